"""What an estimate's compiles gave, and the answer built from it: each kernel's cycles with what
they are (an estimate, a range, a floor), the program's totals, the bundles and the findings."""
from __future__ import annotations

import dataclasses
import math

from ..base.chips import Chip
from ..base.findings import Finding
from ..jax_internals.branches import Guard
from .budget import Budget, full_grid_cycles, line_through, rows_of
from .bundle_walk import Walk
from .bundles import bundle_findings, bundles_of
from .guards import weighted
from .kernel_times import as_floor, as_range, floor, timed, timed_roofline, totals
from .model import (BUNDLES, EXTRAPOLATED, LIBTPU, PALLAS_KINDS, RANGE, ROOFLINE, JobCost, KernelTime, StepFit, TimeEstimate)
from .plan import Job
from .programs import original_op
from .runner import Outcome
from .time_findings import below_roofline, loop_floor, cost_model_gave_up, extrapolated, no_time, no_time_alone, simulated_alone, unreadable


USABLE = ("ok", "aborted")  # what a compile that ended so wrote is the same every time


@dataclasses.dataclass
class Collected:
    """Everything the compiles of one estimate gave, by HLO op of the program."""

    walks: dict[str, Walk] = dataclasses.field(default_factory=dict)
    llo: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    grids: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # Pallas op -> its full grid
    dynamic: set[str] = dataclasses.field(default_factory=set)  # Pallas ops whose grid is sized at run time
    guards: dict[str, Guard] = dataclasses.field(default_factory=dict)
    points: dict[str, list[tuple[int, int, list[int]]]] = dataclasses.field(default_factory=dict)  # (steps, cycles, grid)
    cycles: dict[str, int] = dataclasses.field(default_factory=dict)  # other ops -> simulated cycles
    forced: dict[str, dict[str, tuple[int, int, list[int]]]] = dataclasses.field(default_factory=dict)  # heavy|light
    not_timed: set[str] = dataclasses.field(default_factory=set)  # Pallas ops simulated to 0 cycles
    replayed: set[str] = dataclasses.field(default_factory=set)  # XLA ops simulated alone, whatever came of it
    alone: set[str] = dataclasses.field(default_factory=set)  # ops whose figure came from a program of their own
    zero: set[str] = dataclasses.field(default_factory=set)  # XLA ops libtpu simulated alone to 0 cycles
    tried_alone: set[str] = dataclasses.field(default_factory=set)  # Pallas ops a program of their own was compiled for

    def timed(self, op: str) -> bool:
        return bool(self.points.get(op)) or op in self.not_timed or op in self.cycles

    def take(self, job: Job, used: dict[str, tuple[int, ...]], outcome: Outcome, ops: dict[int, str] | None = None) -> None:
        """One compile's outcome: ``used`` the grid each Pallas op ran at, ``ops`` the alone
        program's lowering index -> op (its ops are named after their place). A compile the budget
        stopped gives nothing: what it wrote before depends on when it was stopped (a libtpu abort,
        at the same op every time, gives what it wrote)."""
        if job.program == "alone":
            self.tried_alone.update((ops or {}).values())
        if outcome.status not in USABLE:
            if job.program == "replay":
                self.replayed.add(job.op or "")
            return
        if job.program == "replay":
            op = job.op or ""
            self.replayed.add(op)
            if (cycles := outcome.cycles.get(op)) is None:
                return
            if cycles:
                self.cycles[op] = cycles
                self.alone.add(op)
            else:
                self.zero.add(op)
            return
        named = {op: original_op(op, ops) if ops is not None else op for op in outcome.cycles}
        found = {name: outcome.cycles[op] for op, name in named.items() if name is not None}
        for op, texts in outcome.llo.items():  # the bundles are the same code at any grid: the first found is kept
            name = original_op(op, ops) if ops is not None else op
            if name is not None:
                self.llo.setdefault(name, texts)
        if job.force:
            for op, c in found.items():
                if op in used and c:
                    self.forced.setdefault(op, {})[job.force] = (math.prod(used[op]), c, list(used[op]))
            return
        for op, c in found.items():
            if op in used or op in self.grids:
                if not c:  # a Pallas kernel libtpu did not time (emit_pipeline in a pallas_call on v6e)
                    self.not_timed.add(op)
                elif op in used:
                    self.points.setdefault(op, []).append((math.prod(used[op]), c, list(used[op])))
                    if ops is not None:
                        self.alone.add(op)
            elif ops is None and op not in self.dynamic and c:
                self.cycles.setdefault(op, c)  # an XLA op: the same in every compile (0, a collective on one chip: not timed)


def answer(chip: Chip, kernels: list, got: Collected, budget: Budget, jobs: list[JobCost],
           findings: list[Finding]) -> TimeEstimate:
    findings = list(findings)
    times = [_kernel_time(k, chip, got, findings) for k in kernels]
    looped = [t.name for t, k in zip(times, kernels) if getattr(k, "trips_unknown", False) and t.estimated_seconds is not None]
    times = [as_floor(t) if t.name in looped else t for t in times]
    if looped:
        findings.append(loop_floor(chip, looped))
    times = [_no_faster_than_roofline(t, chip, findings) for t in times]
    found, problems = bundles_of(times, got.llo)
    findings += [unreadable(chip, p) for p in problems] + bundle_findings(found, chip)
    for op in sorted(got.alone & {t.name for t in times}):
        findings.append(simulated_alone(chip, op, compiled=op not in got.grids))
    for op in sorted(got.not_timed):
        findings.append(no_time(chip, op))
    for op in sorted(got.zero):
        findings.append(no_time_alone(chip, op))
    return TimeEstimate(chip=chip.name, clock_hz=chip.clock_hz, kernels=times, totals=totals(times, chip),
                        method=_method(times, got), budget=budget.as_dict(), jobs=jobs, findings=findings, bundles=found)


def _kernel_time(k, chip: Chip, got: Collected, findings: list[Finding]) -> KernelTime:
    walk = got.walks.get(k.name)
    if k.name in got.grids and k.kind in PALLAS_KINDS:
        grid = got.grids[k.name]
        cycles, fit = full_grid_cycles(got.points.get(k.name, []), grid)
        if cycles is None:
            return _steps(floor(k, chip, walk), grid)
        t = _steps(timed(k, chip, cycles, EXTRAPOLATED if fit is not None else LIBTPU, walk), grid)
        t.fit = fit
        t.cycles_per_step = fit.per_step + fit.per_row / max(grid[-1], 1) if fit is not None else cycles / max(t.steps or 1, 1)
        if fit is not None:
            findings.append(extrapolated(chip, t, fit))
        if k.name in got.forced:
            t = _weighted(t, got, fit, chip, findings)
        return t
    if k.name in got.cycles:
        return timed(k, chip, float(got.cycles[k.name]), LIBTPU, walk)
    # not simulated: its floor. XLA's cost model (the fusions view's XLA cycles) is no bound either
    # way: 0.03x to 9.9x of the v5e over the chip corpus, where the roofline came within 25% of the
    # chip on 44 of the 52 ops of 0.1 ms or more it had left to the cost model, the cost model on 29
    t = floor(k, chip, walk)
    if getattr(k, "compiler_gave_up", False):
        findings.append(cost_model_gave_up(chip, t))
    return t


def _steps(t: KernelTime, grid: tuple[int, ...]) -> KernelTime:
    t.grid, t.steps = list(grid), math.prod(grid)
    return t


def _weighted(t: KernelTime, got: Collected, fit: StepFit | None, chip: Chip, findings: list[Finding]) -> KernelTime:
    """The kernel's cycles from the two forced simulations, weighted by the steps of each kind;
    a range where the inputs do not say how many steps run the guarded code."""
    sides = got.forced[t.name]
    if "heavy" not in sides or "light" not in sides or t.estimated_cycles is None:
        return t
    guard = got.guards[t.name]
    fit = fit or line_through(got.points.get(t.name, []))  # the whole grid simulated: the fixed part from the grids simulated
    (steps, heavy, grid), (_, light, _) = sides["heavy"], sides["light"]
    # the fixed part at the forced grid (what is not per step), and at the full grid
    fixed = max(fit.intercept + fit.per_row * rows_of(grid), 0.0) if fit is not None else 0.0
    full_fixed = max(fit.intercept + fit.per_row * rows_of(got.grids[t.name]), 0.0) if fit is not None else 0.0
    cycles, finding = weighted(t.name, t.estimated_cycles, guard, fixed, (steps, heavy), (steps, light), chip.name,
                               full_fixed=full_fixed)
    if finding is not None:
        findings.append(finding)
        if guard.heavy_steps is None:
            data = finding.data or {}
            return as_range(t, data["low_cycles"], data["high_cycles"], chip)
    if cycles == t.estimated_cycles or not chip.clock_hz:
        return t
    return dataclasses.replace(t, estimated_cycles=cycles, estimated_seconds=cycles / chip.clock_hz,
                               cycles_per_step=cycles / max(t.steps or 1, 1))


def _no_faster_than_roofline(t: KernelTime, chip: Chip, findings: list[Finding]) -> KernelTime:
    if (t.estimate_source not in (LIBTPU, EXTRAPOLATED) or t.roofline_seconds is None or t.estimated_seconds is None
            or t.estimated_seconds >= t.roofline_seconds):
        return t
    findings.append(below_roofline(chip, t))
    return timed_roofline(t, chip)


def _method(times: list[KernelTime], got: Collected) -> str:
    """How the Pallas kernels got their figures (all kernels' where there are none): the least exact."""
    sources = ({t.estimate_source for t in times if t.name in got.grids}
               or {t.estimate_source for t in times if t.estimate_source})
    return next((s for s in (ROOFLINE, BUNDLES, EXTRAPOLATED) if s in sources), LIBTPU)


__all__ = ["Collected", "answer", "RANGE"]
