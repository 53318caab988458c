"""libtpu's estimate of every kernel's time: the same figures on any machine, within a budget.

The program is compiled again in dump children (runner.py), with libtpu's static profile (its
simulation of the program: cycles per HLO op) or its final VLIW bundles dumped:

1. **The bundles**, always, first: one compile, no simulation. What each kernel issues when it
   runs (bundle_walk.py) says what simulating it will cost, and gives each kernel a floor.
2. **The plan** (plan.py), from those costs alone: the whole program simulated when it fits the
   budget; else each Pallas grid cut and the line (or plane) through the cuts extrapolated
   (``libtpu-extrapolated``), in the program or, when its XLA ops are too costly, in a program of
   the Pallas kernels alone, with those XLA ops simulated one at a time as XLA compiled them
   (ops_alone.py); guarded kernels twice more (guards.py).
3. **The compiles**, side by side on the free cores within the memory budget (parallel.py); their
   outcomes are taken in the plan's order. A compile libtpu aborts (an op it cannot simulate)
   leaves the kernels it did not reach to a second plan: alone, each.
4. **The answer** (answer.py): each kernel's cycles, an estimate, a range or a floor.

Nothing here depends on how long a compile took: a compile that runs far past what its bundles
predict is stopped (a machine many times slower than ours), its kernels get their floors, a
finding says so, and the result is not cached.
"""
from __future__ import annotations

import math
import time

from ..base.chips import UNSIMULATED_WHY, Chip
from ..base.findings import Finding
from ..compilation.backends import Backend
from ..compilation.target import Target
from ..hlo.fusions import analyse_fusions
from .answer import Collected, answer
from .budget import COMPILE_BUNDLES, SLACK, SLACK_SECONDS, Budget
from .bundle_walk import walk
from .dumps import BUNDLES_LABEL, UnreadableDump, read_bundles
from .kernel_times import totals as _totals, timed as _timed
from .model import PALLAS_KINDS, ROOFLINE, JobCost, KernelBundles, TimeEstimate
from .ops_alone import replay_request
from .parallel import Compile, run_all, workers
from .plan import DMA_KINDS, Job, Plan, PallasGrid, make_plan
from .programs import Program, alone_program, name_pallas, original_op, pallas_grids, steps_used
from .runner import Outcome, open_session, open_sessions
from .store import key as cache_key, load as load_cached, store as store_cached
from .time_findings import aborted as aborted_finding, budget_note, refused, stopped, unreadable

STOPPED = ("time-limit", "no-answer")  # a job's statuses that say more about the machine than the program


def estimate_times(target: Target, chip: Chip, *, budget: Budget | None = None, kernels: list | None = None,
                   use_cache: bool = True, hlo: str | None = None, compile_seconds: float | None = None) -> TimeEstimate:
    """Every kernel's estimated cycles and seconds on ``chip``, the program's total, the bundles
    of each kernel and the findings they lead to. ``kernels``: the program's kernels as the
    Report has them (``report.fusions.kernels``; computed here when not given), ``hlo`` its
    optimized HLO (``report.stages.hlo``), ``compile_seconds`` what compiling it took (a compile
    of the whole program is given that much more before it is stopped: it decides no figure).
    Off TPU, or where libtpu gives nothing, the floor. Cached like a compile: asking again is instant."""
    from ..compilation.stages import lowered_program  # (numpy, jax: only when an estimate runs)

    budget = budget or Budget()
    backend = Backend(chip)
    if kernels is None:
        kernels = _plain_kernels(target, backend, chip)
    if chip.topology is None:  # no libtpu topology (not a TPU): nothing to simulate
        return _roofline_only(chip, kernels, budget)
    _, lowered, module_text = lowered_program(target, backend)
    if lowered is None or not kernels:
        return _roofline_only(chip, kernels, budget, why="the program did not compile")
    key = cache_key(module_text, chip.name, budget)
    if use_cache and (hit := load_cached(key)) is not None:
        hit.cached = True
        return hit
    estimate = _Run(target, backend, chip, kernels, budget, hlo=hlo, compile_seconds=compile_seconds or 0.0).run()
    # a compile stopped past its prediction says how busy the machine was: not a result to keep
    if use_cache and not any(job.status in STOPPED for job in estimate.jobs):
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
                      f"{why or f'{chip.name} is not a TPU'}: no libtpu estimate, each time is its floor (the roofline)",
                      view="fusions", data={"chip": chip.name})
    return TimeEstimate(chip=chip.name, clock_hz=chip.clock_hz, kernels=times, totals=_totals(times, chip), method=ROOFLINE,
                        budget=budget.as_dict(), jobs=[], findings=[finding])


class _Run:
    """One estimate: the compiles it makes, what they gave, and the answer built from them."""

    def __init__(self, target: Target, backend, chip: Chip, kernels: list, budget: Budget, hlo: str | None = None,
                 compile_seconds: float = 0.0):
        self.chip, self.kernels, self.budget = chip, kernels, budget
        self.hlo = hlo  # the program's optimized HLO, when the caller has it (else compiled again when needed)
        assert chip.topology is not None  # a TPU (estimate_times runs this on no other chip): each has one
        self.program = Program(target=target, backend=backend, topology=chip.topology)
        self.cores = chip.cores_per_device
        self.got = Collected()
        self.pallas: list[PallasGrid] = []
        self.jobs: list[JobCost] = []
        self.findings: list[Finding] = []
        self.sessions: list = []  # the dump children that simulate, while the estimate runs
        self.compile_seconds = compile_seconds  # a compile of the whole program: its hard stop waits that much more
        # past this no compile runs: a machine many times slower than the plan expects (the figures
        # then depend on it, which a finding says, and the result is not cached)
        self.deadline = time.monotonic() + SLACK_SECONDS + SLACK * (budget.seconds + 4 * compile_seconds)

    def run(self) -> TimeEstimate:
        if not self.chip.libtpu_times:  # nothing to simulate: the whole program's bundles, for the view and floors
            self._read_bundles(whole=True)
            self.findings.append(refused(self.chip, UNSIMULATED_WHY))
            return self._answer()
        # the simulating children start (jax's import) while the Pallas kernels' bundles compile
        with open_sessions(self.program.topology, profile=True, bundles=True, count=workers()) as self.sessions:
            self._read_bundles(whole=False)
            plan = make_plan(self.kernels, self.got.walks, self.pallas, self.budget, self.cores,
                             lowered=set(self.program.ops.values()))
            reasons = self._carry_out(plan)
            if any(j.status != "ok" for j in self.jobs):  # libtpu or the budget stopped a compile: what it did not reach
                reasons += self._carry_out(self._second_plan(plan))
        simulations = [j for j in self.jobs if j.label != "bundles"]
        if simulations and all(j.status == "aborted" for j in simulations):  # the chip refused, not one op
            self.findings = [f for f in self.findings if f.code != "libtpu-aborted"] + [refused(self.chip, reasons[0])]
        return self._answer()

    # ------------------------------------------------------------------ the compiles

    def _read_bundles(self, whole: bool) -> None:
        """The Pallas kernels' bundles, each at its full grid, compiled without a simulation (a
        compile's cost: an XLA op's cost is the compiler's estimate, and its bundles come with its
        simulation; dumping a large program's bundles alone took minutes): each kernel's walk.
        ``whole``: the whole program's bundles (a chip libtpu does not simulate)."""
        pallas_kernels = [k for k in self.kernels if k.kind in PALLAS_KINDS]
        request, records = self.program.request()
        if request is None:
            self._budget_note("the program did not lower again for libtpu's dumps: each kernel keeps its floor")
            return
        self.program.ops, dynamic = name_pallas(records, pallas_kernels)
        self.pallas, self.got.guards = pallas_grids(records, self.program.ops, dynamic, self.program.values())
        self.got.grids = {p.op: p.grid for p in self.pallas}
        self.got.dynamic = {self.program.ops[i] for i in dynamic}
        ops: dict[int, str] | None = None
        if not whole:
            alone = alone_program(self.program, self.pallas) if self.pallas else None
            if alone is None:
                return
            request, ops = alone.request({p.op: p.grid for p in self.pallas})[0], alone.ops
            if request is None:
                return
        with open_session(self.program.topology, profile=False, bundles=True) as session:  # no simulation: a compile's cost
            outcome = session.run(request, seconds=SLACK_SECONDS + SLACK * self.budget.seconds,
                                  memory_bytes=self.budget.memory_bytes)
        self._record("bundles", outcome, 0)
        llo: dict[str, dict[str, str]] = dict(outcome.llo)
        if ops is not None:
            names = {op: original_op(op, ops) for op in outcome.llo}
            llo = {name: outcome.llo[op] for op, name in names.items() if name is not None}
        self.got.llo.update(llo)
        for op, texts in llo.items():
            if BUNDLES_LABEL not in texts:
                continue
            try:
                self.got.walks[op] = walk(read_bundles(texts[BUNDLES_LABEL], f"{op} {BUNDLES_LABEL}"))
            except UnreadableDump as err:
                self.findings.append(unreadable(self.chip, str(err)))
        if outcome.status in STOPPED:
            self._budget_note(f"the compile that dumps the bundles {stopped(outcome)} after {outcome.wall_seconds:.0f} s: "
                              "what each simulation would cost is unknown, so none was made")

    def _carry_out(self, plan: Plan) -> list[str | None]:
        """Every job of the plan, side by side; their outcomes taken in the plan's order. Returns
        the reasons of the compiles libtpu aborted."""
        for note in plan.notes:
            self._budget_note(note)
        alone = alone_program(self.program, [p for p in self.pallas if p.op in plan.alone]) if plan.alone else None
        if plan.alone and alone is None:
            self._budget_note("the kernels to simulate alone could not be paired with their ops: they keep their floor")
        compiles, made = [], []
        for job in plan.jobs:
            built = self._build(job, alone)
            if built is not None:
                made.append((job, built[1]))
                extra = SLACK * self.compile_seconds if job.program == "program" else 0.0
                compiles.append(Compile(built[0], seconds=self.budget.seconds_for(job.bundles) + extra,
                                        memory_bytes=self.budget.memory_bytes,
                                        expected_bytes=self.budget.bytes_for(job.bundles)))
        outcomes = run_all(self.sessions, compiles, self.budget.memory_bytes, self.deadline)
        reasons = []
        for (job, used), outcome in zip(made, outcomes):
            self._record(job.label, outcome, job.bundles, used)
            self.got.take(job, used, outcome, ops=alone.ops if job.program == "alone" and alone is not None else None)
            if outcome.status == "aborted":
                reasons.append(outcome.detail)
        return reasons

    def _build(self, job: Job, alone: Program | None):
        """(the request, the grid each Pallas op runs at) for a job; None where it cannot be made."""
        if job.program == "replay":
            request = replay_request(self._hlo(), job.op or "", self.program.topology)
            return None if request is None else (request, {})
        program = alone if job.program == "alone" else self.program
        if program is None:
            return None
        request, records = program.request(job.grids, force=job.force)
        return None if request is None else (request, steps_used(records, program.ops))

    def _hlo(self) -> str:
        if self.hlo is None:
            from ..compilation.stages import capture  # (jax: only when an estimate runs)

            self.hlo = capture(self.program.target, self.program.backend, jaxpr_text=False).stages.hlo or ""
        return self.hlo

    def _second_plan(self, first: Plan) -> Plan:
        """After a compile that did not finish (libtpu aborted at an op, or it passed the memory
        budget): the Pallas kernels and XLA ops left without a figure, each alone (those not
        already tried so), within what is left of the budget."""
        missing_pallas = [p for p in self.pallas if not self.got.timed(p.op) and p.op not in self.got.tried_alone]
        lowered = set(self.program.ops.values())
        missing_xla = [k for k in self.kernels if k.name not in lowered and k.kind not in DMA_KINDS
                       and k.name not in self.got.cycles and k.name not in self.got.replayed]
        spent = sum(j.bundles + COMPILE_BUNDLES for j in first.jobs)
        seconds = max(self.budget.seconds - spent * self.budget.seconds_per_bundle, 1.0)
        import dataclasses

        left = dataclasses.replace(self.budget, seconds=seconds)
        alone = [dataclasses.replace(p, dynamic=True) for p in missing_pallas]
        return make_plan(missing_xla, self.got.walks, alone, left, self.cores, split=True, lowered=lowered)

    def _record(self, label: str, outcome: Outcome, bundles: int, used: dict | None = None) -> None:
        self.jobs.append(JobCost(label=label, status=outcome.status, wall_seconds=round(outcome.wall_seconds, 3),
                                 peak_rss_bytes=outcome.peak_rss_bytes, bundles=bundles,
                                 steps={op: math.prod(g) for op, g in (used or {}).items()}, detail=outcome.detail))
        for problem in outcome.unreadable:
            self.findings.append(unreadable(self.chip, problem))
        if outcome.status in STOPPED:
            self._budget_note(f"the {label} compile {stopped(outcome)} after {outcome.wall_seconds:.0f} s, far past what "
                              "its bundles predict (a busy or slow machine): what it would have timed is simulated "
                              "alone or keeps its floor, and this result is not cached")
        elif outcome.status == "memory-limit":
            self._budget_note(f"the {label} compile passed the memory budget ({self.budget.memory_bytes / 2**30:.1f} GiB; "
                              "--time-memory gives more): what it would have timed is simulated alone or keeps its floor")
        elif outcome.status == "aborted" and self.chip.libtpu_times:
            self.findings.append(aborted_finding(self.chip, label, outcome.detail))

    def _budget_note(self, why: str) -> None:
        self.findings.append(budget_note(self.chip, self.budget, why))

    def _answer(self) -> TimeEstimate:
        return answer(self.chip, self.kernels, self.got, self.budget, self.jobs, self.findings)

