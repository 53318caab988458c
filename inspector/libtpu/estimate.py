"""libtpu's estimate of every kernel's time, within a budget that always finishes.

The compiled program is compiled once more, in a process of its own, with libtpu's static
profile (its simulation of the program: cycles per HLO op) and its final VLIW bundles dumped.
What the whole simulation would cost is judged before it runs (``budget``):

1. XLA ops whose cost-model cycles (the optimized HLO's own ``estimated_cycles``) would take
   over half the budget to simulate are not simulated together: the ops the cost model gave up on
   are simulated one at a time, each alone as compiled (ops_alone.py), the bundles are dumped, then
   the costliest other ops are simulated alone while the budget lasts; the rest keep the
   compiler's figure (``libtpu-cost-model``), Pallas kernels their roofline.
2. Pallas grids of at most ``Budget.probe_steps`` steps: the whole program is simulated (``libtpu``).
3. Larger grids: the program is simulated with each Pallas grid cut to ``probe_steps`` steps,
   then cut to as many more (2 to 4 times) as what is left of the budget allows; the line through
   the two gives cycles per step and the full grid's cycles (``libtpu-extrapolated``). The whole
   program is simulated after all (``libtpu``) when the cut compiles say it fits in what is left.

Every compile runs under a hard stop (time and memory); what a stopped or aborted compile wrote
is still used. XLA ops an aborted simulation left untimed are simulated alone too. Kernels libtpu
gave nothing for keep their roofline (``roofline``).
"""
from __future__ import annotations

import dataclasses
import math
import time

from ..compilation.backends import Backend
from ..base.chips import Chip
from ..base.findings import Finding
from ..hlo.fusions import analyse_fusions
from ..jax_internals.aot import compile_request, grids_replaced
from ..jax_internals.branches import Guard
from ..jax_internals.evaluate import leading_values
from ..jax_internals.isolate import alone, pallas_equations, with_grid
from ..compilation.target import Target
from .store import key as cache_key, load as load_cached, store as store_cached
from .budget import MIN_SECONDS, Budget, full_grid_cycles, line_through, predict_whole, reduced_grid
from .bundles import bundle_findings, bundles_of
from .guards import weighted
from .kernel_times import timed as _timed, timed_roofline as _timed_roofline, totals as _totals
from .model import (COST_MODEL, EXTRAPOLATED, LIBTPU, PALLAS_KINDS, ROOFLINE, JobCost, KernelBundles, KernelTime, StepFit,
                    TimeEstimate)
from .ops_alone import REPLAY, simulate_untimed
from .runner import DumpSession, Outcome, open_session
from .time_findings import (aborted as aborted_finding, below_roofline, budget_note, cost_model_gave_up, extrapolated,
                            no_time, simulated_alone, stopped, unreadable)

STOPPED = ("time-limit", "memory-limit", "no-answer")  # a job's statuses that say more about the machine than the program


def estimate_times(target: Target, chip: Chip, *, budget: Budget | None = None, kernels: list | None = None,
                   use_cache: bool = True, hlo: str | None = None) -> TimeEstimate:
    """Every kernel's estimated cycles and seconds on ``chip``, the program's total, the bundles
    of each kernel and the findings they lead to. ``kernels``: the program's kernels as the
    Report has them (``report.fusions.kernels``; computed here when not given), ``hlo`` its
    optimized HLO (``report.stages.hlo``). Off TPU, or where libtpu gives nothing, the roofline.
    Cached like a compile: asking again is instant."""
    from ..compilation.stages import lowered_program  # (numpy, jax: only when an estimate runs)

    budget = budget or Budget()
    backend = Backend(chip)
    if kernels is None:
        kernels = _plain_kernels(target, backend, chip)
    if not chip.is_tpu:
        return _roofline_only(chip, kernels, budget)
    _, lowered, module_text = lowered_program(target, backend)
    if lowered is None or not kernels:
        return _roofline_only(chip, kernels, budget, why="the program did not compile")
    key = cache_key(module_text, chip.name, budget)
    if use_cache and (hit := load_cached(key)) is not None:
        hit.cached = True
        return hit
    estimate = _Run(target, backend, chip, kernels, budget, hlo=hlo).run()
    # a compile stopped by the budget depends on how busy the machine was: not a result to keep
    if use_cache and not any(job.status in STOPPED for job in estimate.jobs if not job.label.startswith(REPLAY)):
        store_cached(key, estimate)
    return estimate


def bundle_report(target: Target, chip: Chip, *, budget: Budget | None = None, kernels: list | None = None,
                  use_cache: bool = True) -> list[KernelBundles]:
    """Each kernel's bundles (Pallas kernels first, then the costliest); the same compile and
    cache entry as ``estimate_times``."""
    return estimate_times(target, chip, budget=budget, kernels=kernels, use_cache=use_cache).bundles


def _plain_kernels(target: Target, backend, chip: Chip) -> list:
    from ..compilation.stages import capture  # (numpy, jax: only when an estimate runs)

    stages = capture(target, backend, jaxpr_text=False).stages
    return analyse_fusions(stages.hlo, chip, stages.cost).kernels if stages.hlo else []


def _roofline_only(chip: Chip, kernels: list, budget: Budget, why: str | None = None) -> TimeEstimate:
    times = [_timed(k, chip, None, ROOFLINE) for k in kernels]
    finding = Finding("info", "time-roofline-only",
                      f"{why or f'{chip.name} is not a TPU'}: no libtpu estimate, times are the roofline",
                      view="fusions", data={"chip": chip.name})
    return TimeEstimate(chip=chip.name, clock_hz=chip.clock_hz, kernels=times, totals=_totals(times, chip), method=ROOFLINE,
                        budget=budget.as_dict(), jobs=[], findings=[finding])


class _Run:
    """One estimate: the compiles it makes, what they gave, and the answer built from them."""

    def __init__(self, target: Target, backend, chip: Chip, kernels: list, budget: Budget, known: list | None = None,
                 label: str = "", hlo: str | None = None):
        self.target, self.backend, self.chip, self.kernels, self.budget = target, backend, chip, kernels, budget
        self.hlo = hlo  # the program's optimized HLO, when the caller has it (else compiled again when needed)
        self.label = label  # before each compile's label: "alone-" for the kernels simulated on their own
        # per Pallas kernel in lowering order: (its dynamic grid sizes, its scalar prefetch values) where known
        self.known = known
        self.deadline = time.monotonic() + budget.seconds
        self.jobs: list[JobCost] = []
        self.findings: list[Finding] = []
        self.points: dict[str, list[tuple[int, int, list[int]]]] = {}  # Pallas op -> (steps, cycles, grid)
        self.not_timed: set[str] = set()  # Pallas ops libtpu simulated to 0 cycles
        self.cycles: dict[str, int] = {}  # other ops -> simulated cycles (the same in every compile)
        self.replayed: set[str] = set()  # XLA ops simulated alone (whatever came of it)
        self.llo: dict[str, dict[str, str]] = {}
        self.grids: dict[str, tuple[int, ...]] = {}  # Pallas op -> its full grid
        self.guards: dict[str, Guard] = {}  # Pallas op -> its costliest pl.when / lax.cond
        self.forced: dict[str, dict[str, tuple[int, int]]] = {}  # Pallas op -> heavy|light -> (steps, cycles)
        self.names: dict[int, str] = {}  # index of a pallas_call in lowering order -> its HLO op
        self.dynamic: dict[int, str] = {}  # the same, for kernels whose grid is sized at run time
        self.aborted = False
        self.records = 0  # Pallas kernels lowered (one record each)
        self.cores = max(1, (chip.tensor_cores or 1) // (chip.devices_per_chip or 1))
        assert chip.topology is not None  # a TPU (estimate_times runs this on no other chip): each has one
        self.topology: str = chip.topology

    def left(self) -> float:
        return self.deadline - time.monotonic()

    # ------------------------------------------------------------------ the compiles

    def run(self) -> TimeEstimate:
        method = self._simulate()
        if self.aborted and method != COST_MODEL:
            self._alone()
        if method == COST_MODEL or self.aborted:
            simulate_untimed(self)
        return self._finish(method)

    def _simulate(self) -> str:
        """The compiles of the program; the method its Pallas kernels' figures come by."""
        pallas = [k for k in self.kernels if k.kind in PALLAS_KINDS]
        # copies and collectives are DMAs, which the simulation models without running bundles
        xla_cycles = sum((k.compiler_cycles or 0) for k in self.kernels
                         if k.kind not in PALLAS_KINDS and k.kind not in ("copy", "collective"))
        seconds, memory = xla_cycles * self.budget.seconds_per_cycle, xla_cycles * self.budget.bytes_per_cycle
        if seconds > self.budget.seconds / 2 or memory > 0.9 * self.budget.memory_bytes:
            self._budget_note(f"its XLA ops ({xla_cycles:,} cycles by the compiler's estimate) would take about "
                              f"{seconds:.0f} s and {memory / 2**30:.1f} GiB to simulate (budget "
                              f"{self.budget.seconds:.0f} s, {self.budget.memory_bytes / 2**30:.0f} GiB): its "
                              "costliest XLA ops are simulated one at a time as the budget allows, the others keep "
                              "the compiler's estimate, Pallas kernels their roofline; --time-budget and "
                              "--time-memory give it more (the need can be twice this guess)")
            simulate_untimed(self, unestimated_only=True)  # before the bundles: else such an op has only its roofline
            self._bundles_only()
            return COST_MODEL
        request, records = self._request(None)
        self._name_grids(records, pallas)
        steps = [math.prod(grid) for grid in self.grids.values()]
        reducible = any(s > self.budget.probe_steps for s in steps)
        with open_session(self.topology, profile=True, bundles=True) as session:
            if not reducible:
                outcome = self._job(session, "whole", request, records, self.left())
                if outcome.status in STOPPED:
                    self._budget_note(f"the whole simulation {stopped(outcome)} after {outcome.wall_seconds:.0f} s: "
                                      "kernels it did not time keep their roofline")
            else:
                self._probes(session, request, records)
            self._guarded(session, None if not reducible else [self.budget.probe_steps] * len(records))
        self.records = len(records)
        return EXTRAPOLATED if reducible else LIBTPU

    def _alone(self) -> None:
        """The Pallas kernels libtpu left untimed when it stopped at another op, simulated in a
        program of their own (jax_internals/isolate.py); their figures join this estimate's."""
        from ..compilation.stages import lowered_program  # (jax: only when an estimate runs)

        order = {op: i for i, op in {**self.names, **self.dynamic}.items()}
        missing = [op for op in self.grids if not self.points.get(op) and op not in self.not_timed]
        missing += [op for op in self.dynamic.values() if op not in self.cycles]
        # a program of nothing but those kernels would be the same program: libtpu refuses the chip or the kernel
        if not missing or {k.name for k in self.kernels} <= set(missing) or self.left() < MIN_SECONDS:
            return
        capture, _, _ = lowered_program(self.target, self.backend)
        equations = pallas_equations(capture.program.closed_jaxpr)
        if len(equations) != self.records:  # a kernel lowered once and run twice: no sure pairing with its op
            return
        known = self.known or [(None, None)] * len(equations)
        chosen = {op: with_grid(equations[order[op]], known[order[op]][0]) for op in missing}
        missing = sorted((op for op in missing if chosen[op] is not None), key=order.__getitem__)
        if not missing:
            return
        fn, args = alone([chosen[op] for op in missing])
        target = dataclasses.replace(self.target, fn=fn, args=args, kwargs={}, params={}, reference=None)
        run = _Run(target, self.backend, self.chip, _plain_kernels(target, self.backend, self.chip),
                   dataclasses.replace(self.budget, seconds=max(self.left(), MIN_SECONDS)),
                   known=[(None, known[order[op]][1]) for op in missing], label="alone-")
        run._simulate()
        self.jobs += run.jobs
        renamed = {run.names[i]: op for i, op in enumerate(missing) if i in run.names}
        for mine, op in renamed.items():
            self.points[op], self.grids[op] = run.points.get(mine, []), run.grids[mine]
            self.forced.update({op: run.forced[mine]} if mine in run.forced else {})
            self.guards.update({op: run.guards[mine]} if mine in run.guards else {})
            self.llo.update({op: run.llo[mine]} if mine in run.llo else {})
            if mine in run.not_timed:
                self._not_timed(op)
            self.findings.append(simulated_alone(self.chip, op))
        for f in run.findings:
            kernel = renamed.get(f.kernel or "", f.kernel)
            message = f.message.replace(f"{f.kernel}:", f"{kernel}:", 1) if f.kernel else f.message
            self.findings.append(dataclasses.replace(f, kernel=kernel, message=message))

    def _guarded(self, session, caps: list[int] | None) -> None:
        """Twice more, at the grids of the first simulation, with each Pallas kernel's costliest
        guard taken at every step and at none: what a step of each kind costs (libtpu's simulation
        does not follow the guard step by step)."""
        for side in ("heavy", "light"):
            if not self.guards or self.aborted or self.left() < MIN_SECONDS:
                return
            request, records = self._request(caps, force=side)
            self._job(session, f"guards-{side}", request, records, self.left())

    def _probes(self, session, request, records) -> None:
        """Two compiles with every Pallas grid cut: the first at ``probe_steps``, the second as
        large as what is left allows (at most 4 times the first, at least twice); between them,
        the whole program after all when the first says it fits."""
        first_request, first_records = self._request([self.budget.probe_steps] * len(records))
        first = self._job(session, "probe-1", first_request, first_records, 0.5 * self.left())
        if first.status != "ok" or self.aborted:
            return
        cut = [math.prod(r.used) for r in first_records]
        if self.budget.whole and self._whole_fits([(first.wall_seconds, first.peak_rss_bytes,
                                                     sum(first.cycles.values()))]):
            whole = self._job(session, "whole", request, records, self.left())
            if whole.status == "ok":
                return
            self._budget_note(f"the whole simulation {stopped(whole)}: figures from smaller grids")
        factor = min(4.0, 0.8 * self.left() / max(first.wall_seconds, 1e-3))  # its time grows at most as its steps
        if factor < 2:
            self._budget_note(f"no time left for a second cut grid: one point ({first.wall_seconds:.0f} s), "
                              "cycles taken as proportional to steps")
            return
        second_request, second_records = self._request([int(c * factor) for c in cut])
        second = self._job(session, "probe-2", second_request, second_records, self.left())
        if second.status == "ok" and self.budget.whole:
            measured = [(o.wall_seconds, o.peak_rss_bytes, sum(o.cycles.values())) for o in (first, second)]
            if self._whole_fits(measured, note=True):
                outcome = self._job(session, "whole", request, records, self.left())
                if outcome.status != "ok":
                    self._budget_note(f"the whole simulation {stopped(outcome)}: figures from smaller grids")

    def _whole_fits(self, measured: list, note: bool = False) -> bool:
        """Whether simulating the whole program fits in what is left, from the cut compiles so far
        (one: its time per simulated cycle, a bound from above; two: the line through them)."""
        whole_cycles = sum(self.cycles.values()) + sum(self._pallas_cycles(op)[0] or 0 for op in self.grids)
        if len(measured) >= 2:
            seconds, memory = predict_whole(measured, whole_cycles)
        else:
            (wall, peak, cycles), = measured
            seconds = wall * whole_cycles / max(cycles, 1)
            memory = None if peak is None else int(peak + self.budget.bytes_per_cycle * max(whole_cycles - cycles, 0))
        fits = seconds <= 0.8 * self.left() and (memory is None or memory <= 0.9 * self.budget.memory_bytes)
        if note and not fits:
            self._budget_note(f"the whole simulation would take about {seconds:.0f} s"
                              + (f" and {memory / 2**30:.1f} GiB" if memory else "")
                              + f" (budget {self.budget.seconds:.0f} s, {self.budget.memory_bytes / 2**30:.0f} GiB): "
                              "figures from smaller grids")
        return fits

    def _request(self, caps: list[int] | None, force: str | None = None):
        """The program lowered with each Pallas grid cut to ``caps[i]`` steps (the i-th kernel
        to lower), or whole; with ``force``, each kernel's costliest guard taken at every step."""
        from ..compilation.stages import lowered_program  # (numpy, jax: only when an estimate runs)

        seen = []

        def choose(grid, semantics):
            seen.append(grid)
            if caps is None or len(seen) > len(caps):
                return grid
            return reduced_grid(grid, semantics, caps[len(seen) - 1], self.cores)

        if self.known is None:
            capture, _, _ = lowered_program(self.target, self.backend)
            self.known = leading_values(capture.program.closed_jaxpr, capture.program.example_values)
        with grids_replaced(choose, force=force, prefetch=[prefetch for _, prefetch in self.known]) as records:
            _, lowered, _ = lowered_program(self.target, self.backend, memo=False)
        return compile_request(lowered, self.topology), list(records)

    def _name_grids(self, records, pallas) -> None:
        """Each Pallas op's full grid: records in lowering order, custom calls named after their
        pallas_call ("matmul" -> "matmul.1"), in program order; by position when names fail."""
        free = list(pallas)
        for index, record in enumerate(records):
            match = next((k for k in free if record.name and k.name.rsplit(".", 1)[0] == record.name), None)
            if match is None and len(records) == len(pallas):
                match = pallas[index] if pallas[index] in free else None
            if match is not None and None in record.grid:  # a grid sized at run time: neither cut nor counted
                free.remove(match)
                self.dynamic[index] = match.name
            elif match is not None:
                free.remove(match)
                self.names[index] = match.name
                self.grids[match.name] = record.grid
                if record.guard is not None:
                    self.guards[match.name] = record.guard

    def _job(self, session: DumpSession, label: str, request, records, seconds: float) -> Outcome:
        outcome = session.run(request, seconds=max(seconds, MIN_SECONDS), memory_bytes=self.budget.memory_bytes)
        used = {self.names[i]: r.used for i, r in enumerate(records) if i in self.names}
        self.jobs.append(JobCost(label=self.label + label, status=outcome.status, wall_seconds=round(outcome.wall_seconds, 3),
                                 peak_rss_bytes=outcome.peak_rss_bytes, steps={op: math.prod(g) for op, g in used.items()},
                                 detail=outcome.detail))
        unnamed = {k.name for k in self.kernels if k.kind in PALLAS_KINDS} - set(used)
        if label.startswith("guards-"):  # only the guarded kernels' cycles: the rest is the same program
            for op, c in outcome.cycles.items():
                if op in used and c:
                    self.forced.setdefault(op, {})[label.removeprefix("guards-")] = (math.prod(used[op]), c)
            return outcome
        collectives = {k.name for k in self.kernels if k.kind == "collective"}
        for op, cycles in outcome.cycles.items():
            if op in collectives and not cycles:  # one chip simulated: 0 cycles is "not simulated", not a time
                continue
            if not cycles and (op in used or op in unnamed):  # a Pallas kernel libtpu did not time (emit_pipeline in a pallas_call on v6e)
                self._not_timed(op)
                continue
            if op in used:
                self.points.setdefault(op, []).append((math.prod(used[op]), cycles, list(used[op])))
            elif op not in unnamed or label == "whole":  # a Pallas kernel not paired: its grid may be cut
                self.cycles.setdefault(op, cycles)
        for op, texts in outcome.llo.items():  # bundles are the same code at any grid: the first found is kept
            self.llo.setdefault(op, texts)
        for problem in outcome.unreadable:
            self._unreadable(problem)
        if outcome.status in STOPPED and label != "whole":  # a stopped "whole" is said where it is run
            self._budget_note(f"the {self.label}{label} compile {stopped(outcome)} after {outcome.wall_seconds:.0f} s: "
                              "kernels it did not time keep their roofline")
        if outcome.status == "aborted":
            self.aborted = True
            self.findings.append(aborted_finding(self.chip, self.label + label, outcome.detail))
        return outcome

    def _bundles_only(self) -> None:
        """The bundles without the simulation (a program too large to simulate, or a chip whose
        simulation aborts)."""
        if self.left() <= 1:
            return
        request, records = self._request(None)
        self._name_grids(records, [k for k in self.kernels if k.kind in PALLAS_KINDS])
        with open_session(self.topology, profile=False, bundles=True) as session:
            self._job(session, "bundles", request, records, self.left())

    def _finish(self, method: str) -> TimeEstimate:
        if method == COST_MODEL:
            return self._answer(method)
        if self.aborted and (not self.llo or any(op not in self.llo for op in self.grids)):
            self._bundles_only()  # libtpu stopped before it wrote them all
        return self._answer(method)

    # ------------------------------------------------------------------ the answer

    def _pallas_cycles(self, op: str) -> tuple[float | None, StepFit | None]:
        return full_grid_cycles(self.points.get(op, []), self.grids[op])

    def _answer(self, method: str) -> TimeEstimate:
        times = []
        for k in self.kernels:
            if k.name in self.grids:
                cycles, fit = self._pallas_cycles(k.name)
                source = None if cycles is None else EXTRAPOLATED if fit is not None else LIBTPU
                plain = cycles
                if cycles is not None and k.name in self.forced:
                    cycles = self._weighted(k.name, cycles, fit)
                t = _timed(k, self.chip, cycles, source)
                t.grid, t.steps = list(self.grids[k.name]), math.prod(self.grids[k.name])
                t.fit = fit
                if cycles is not None:
                    t.cycles_per_step = fit.per_step if fit is not None and cycles == plain else cycles / max(t.steps, 1)
                if fit is not None:
                    self.findings.append(extrapolated(self.chip, t, fit))
            elif k.name in self.cycles:
                t = _timed(k, self.chip, float(self.cycles[k.name]), LIBTPU)
            elif k.compiler_cycles:
                t = _timed(k, self.chip, float(k.compiler_cycles), COST_MODEL)
            else:
                t = _timed(k, self.chip, None, None)
                if k.compiler_gave_up:
                    self.findings.append(cost_model_gave_up(self.chip, t))
            times.append(t)
        times = [self._no_faster_than_roofline(t) for t in times]
        bundles = self._bundles(times)
        self.findings += bundle_findings(bundles, self.chip)
        if method != COST_MODEL:  # how the Pallas kernels got theirs (all kernels' without one): the least exact
            sources = ({t.estimate_source for t in times if t.name in self.grids}
                       or {t.estimate_source for t in times if t.estimate_source})
            method = next((s for s in (ROOFLINE, COST_MODEL, EXTRAPOLATED) if s in sources), LIBTPU)
        return TimeEstimate(chip=self.chip.name, clock_hz=self.chip.clock_hz, kernels=times, totals=_totals(times, self.chip),
                            method=method, budget=self.budget.as_dict(), jobs=self.jobs, findings=self.findings, bundles=bundles)

    def _bundles(self, times: list[KernelTime]) -> list[KernelBundles]:
        found, problems = bundles_of(times, self.llo)
        for problem in problems:
            self._unreadable(problem)
        return found

    # ------------------------------------------------------------------ findings

    def _budget_note(self, why: str) -> None:
        self.findings.append(budget_note(self.chip, self.budget, why))

    def _weighted(self, op: str, cycles: float, fit: StepFit | None) -> float:
        """The kernel's cycles from the two forced simulations, weighted by the steps of each kind."""
        sides = self.forced[op]
        if "heavy" not in sides or "light" not in sides:
            return cycles
        fit = fit or line_through(self.points.get(op, []))  # the whole grid simulated: the fixed part from the grids simulated
        intercept = max(fit.intercept, 0.0) if fit is not None else 0.0
        cycles, finding = weighted(op, cycles, self.guards[op], intercept, sides["heavy"], sides["light"], self.chip.name)
        if finding is not None:
            self.findings.append(finding)
        return cycles

    def _no_faster_than_roofline(self, t: KernelTime) -> KernelTime:
        if (t.estimate_source not in (LIBTPU, EXTRAPOLATED) or t.roofline_seconds is None or t.estimated_seconds is None
                or t.estimated_seconds >= t.roofline_seconds):
            return t
        self.findings.append(below_roofline(self.chip, t))
        return _timed_roofline(t, self.chip)

    def _not_timed(self, op: str) -> None:
        if op not in self.not_timed:  # said once per kernel
            self.not_timed.add(op)
            self.findings.append(no_time(self.chip, op))

    def _unreadable(self, problem: str) -> None:
        self.findings.append(unreadable(self.chip, problem))
