"""Which simulations an estimate makes, decided before any of them runs, from the program alone.

Every figure an estimate gives is a function of the program, the chip and libtpu's version, never
of the machine: so what to simulate is chosen here from what each simulation will cost, read from
the program's own bundles (bundle_walk.py: the bundles it issues, each loop at its trip count), not
from how long anything took. The budget (budget.py) is a number of bundles: the most one compile
may simulate (its memory) and the most all of them together may (its time).

In order, while the budget lasts:

1. **The whole program**, when it fits one compile: every kernel simulated as it runs (``whole``).
2. Otherwise **each Pallas grid cut** (the same kernel on fewer steps; budget.reduced_grid), twice,
   to fit a line through the two (``probe-1``, ``probe-2``), in the program when its XLA ops fit
   beside them, else in a program of the Pallas kernels alone (``alone-probe-N``). A kernel whose
   steps are costly is cut further: its innermost axis shortened too, three grids to fit the
   plane of rows and steps. A kernel too costly even so is left to its floor.
3. **Guarded kernels** (a ``pl.when``): simulated twice more with the guard taken at every step and
   at none (guards.py), at the first cut's grid (``guards-heavy``, ``guards-light``).
4. **XLA ops** that the program's simulation does not reach (the program too costly), each alone
   as XLA compiled it (``replay-OP``): those the compiler's cost model gave up on first, then the
   costliest by that model.
"""
from __future__ import annotations

import dataclasses
import math

from .budget import BUNDLES_PER_CYCLE, CLOCK_GUESS_HZ, COMPILE_BUNDLES, VMEM_RESULT_BUNDLES, VREG_BYTES, Budget, reduced_grid
from .bundle_walk import Walk

DMA_KINDS = ("collective",)  # the other chips' part of it: one chip's simulation does not time them
VMEM = 1  # an HLO layout's memory space for VMEM (S(1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PallasGrid:
    """A Pallas kernel of the program as the plan sees it."""

    op: str
    index: int  # its place in lowering order
    grid: tuple[int, ...]  # a grid sized at run time: the sizes the example inputs give it
    semantics: tuple[str, ...]
    guarded: bool
    dynamic: bool = False  # its grid is sized at run time: simulated in a program of its own, at those sizes


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """One compile to make: what it simulates and what the plan expects it to cost."""

    label: str  # whole | probe-N | alone-probe-N | guards-heavy | guards-light | alone-guards-... | replay-OP
    bundles: int  # what it will simulate, predicted
    program: str = "program"  # program | alone | replay
    grids: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # Pallas op -> the grid it runs at
    force: str | None = None  # heavy | light: each guard taken at every step or at none
    op: str | None = None  # a replay's op


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan:
    jobs: list[Job]
    alone: list[str]  # Pallas ops simulated in a program of their own (order of lowering)
    floors: list[str]  # Pallas ops no simulation within the budget could time
    replays: list[str]  # XLA ops simulated alone
    notes: list[str]  # why something was not simulated, for the time-budget finding


def xla_bundles(kernel, walks: dict[str, Walk]) -> int:
    """What simulating an XLA op costs, each time it runs."""
    return _xla_cost(kernel, walks) * max(getattr(kernel, "repeat", 1) or 1, 1)


def _xla_cost(kernel, walks: dict[str, Walk]) -> int:
    """What simulating an XLA op once costs: its bundles as it runs where they were read, else the
    compiler's cycles at budget.BUNDLES_PER_CYCLE (an op the cost model gave up on: its roofline's
    cycles, a guess from below), and its result left in VMEM."""
    walk = walks.get(kernel.name)
    if walk is not None:
        cost = walk.most
    elif kernel.compiler_cycles and not getattr(kernel, "compiler_gave_up", False):
        cost = int(kernel.compiler_cycles * BUNDLES_PER_CYCLE)
    else:
        cost = int((getattr(kernel, "roofline_s", None) or 0) * CLOCK_GUESS_HZ)
    return cost + vmem_result_bundles(kernel)


def vmem_result_bundles(kernel) -> int:
    """What an op that leaves its result in VMEM costs libtpu beyond its bundles: it grows with the
    square of the result's vector registers (budget.VMEM_RESULT_BUNDLES)."""
    held = sum(t.bytes for t in getattr(kernel, "outputs", None) or () if t.memory_space == VMEM)
    return int(VMEM_RESULT_BUNDLES * (held / VREG_BYTES) ** 2)


def pallas_bundles(walk: Walk | None, full: tuple[int, ...], grid: tuple[int, ...]) -> int:
    """What simulating a Pallas kernel at ``grid`` (a cut of ``full``) costs, from its bundles
    at the full grid (the outermost loop of its bundles is its grid, plus the pipeline's stages)."""
    if walk is None:
        return 0
    steps, cut = math.prod(full), math.prod(grid)
    if walk.outer_trips is None or steps == cut:
        return walk.most if steps == cut else math.ceil(walk.most * cut / max(steps, 1))
    extra = walk.outer_trips - steps
    if not 0 <= extra <= 2:  # the outermost loop is not the grid: in proportion
        return math.ceil(walk.most * cut / max(steps, 1))
    return walk.most_at(cut + extra)


def cuts(kernel: PallasGrid, budget: Budget, cores: int) -> list[list[tuple[int, ...]]]:
    """The ways to simulate a kernel, the most faithful first, each the list of grids to simulate:
    whole when its grid is small; two cuts that keep the innermost axis whole; three that shorten
    it too (the plane of rows and steps)."""
    grid, semantics = kernel.grid, kernel.semantics
    if math.prod(grid) <= budget.probe_steps:
        return [[tuple(grid)]]
    first = reduced_grid(grid, semantics, budget.probe_steps, cores)
    ways: list[list[tuple[int, ...]]] = []
    for factor in (4, 2):
        second = reduced_grid(grid, semantics, math.prod(first) * factor, cores)
        if second != first:
            ways.append([first, second])
            break
    if grid and grid[-1] > 4:
        if len(grid) == 1:
            ways.append([(2,), (4,)])
        else:
            rows = reduced_grid(grid[:-1], semantics[:-1], 1, cores, inner=1)
            more = reduced_grid(grid[:-1], semantics[:-1], 2 * math.prod(rows), cores, inner=1)
            ways.append([(*rows, 2), (*rows, 4), (*more, 2)] if more != rows else [(*rows, 2), (*rows, 4)])
    return ways or [[first]]


def make_plan(kernels: list, walks: dict[str, Walk], pallas: list[PallasGrid], budget: Budget, cores: int,
              *, split: bool = False, lowered: set[str] | None = None) -> Plan:
    """The compiles to make, in the order their results are taken. ``kernels``: the program's
    (name, kind, compiler_cycles, compiler_gave_up, repeat); ``walks``: op -> its bundles as run;
    ``pallas``: its Pallas kernels; ``lowered``: every op a pallas_call of the program lowered to
    (some have no grid known here): the other custom calls (XLA's own Mosaic kernels) are
    simulated as XLA ops are. ``split``: never the program itself (its simulation stopped at an
    op): Pallas kernels alone, XLA ops alone."""
    job_cap, total = budget.job_bundles, budget.total_bundles
    spent = 0
    jobs: list[Job] = []
    notes: list[str] = []

    def admit(job: Job) -> bool:
        nonlocal spent
        cost = job.bundles + COMPILE_BUNDLES
        if job.bundles > job_cap or spent + cost > total:
            return False
        jobs.append(job)
        spent += cost
        return True

    lowered = {p.op for p in pallas} if lowered is None else lowered | {p.op for p in pallas}
    # an asynchronous start (copy-start, slice-start) is timed with its program only: alone it does not compile
    xla = [k for k in kernels if k.kind not in DMA_KINDS and k.name not in lowered
           and not getattr(k, "opcode", "").endswith("-start")]
    xla_cost = sum(xla_bundles(k, walks) for k in xla)
    static = [p for p in pallas if not p.dynamic]
    whole = xla_cost + sum(pallas_bundles(walks.get(p.op), p.grid, p.grid) for p in static)
    small = all(math.prod(p.grid) <= budget.probe_steps for p in static)
    floors: list[str] = []
    replays: list[str] = []
    if split:
        alone, replays = list(pallas), replay_order(xla, walks)
    elif whole <= job_cap and (budget.whole or small):
        grids = {p.op: p.grid for p in static}
        admit(Job(label="whole", bundles=whole, grids=grids))
        if any(p.guarded for p in static):
            # the guards are simulated at a cut grid (cheaper), with the program simulated there
            # too: the line through it and the whole gives the fixed part of each kernel's cycles
            chosen, _ = _choose_cuts(static, walks, budget, cores, job_cap - xla_cost)
            first = {op: way[0] for op, way in chosen.items()}
            if len(chosen) == len(static) and first != grids:
                _probes(admit, {op: [g] for op, g in first.items()}, static, walks, xla_cost, "")
                _guards(admit, static, walks, xla_cost, chosen, "", notes)
            elif spent + 2 * (whole + COMPILE_BUNDLES) <= total:
                for side in ("heavy", "light"):
                    admit(Job(label=f"guards-{side}", bundles=whole, grids=grids, force=side))
            else:
                notes.append("no budget left to simulate the guarded code taken and skipped: libtpu's own figure "
                             "stands for the guarded kernels")
        alone = [p for p in pallas if p.dynamic]
    else:
        if whole > job_cap:
            notes.append(f"the whole program would simulate about {whole:,} bundles, past what one compile may "
                         f"({job_cap:,} within {budget.memory_bytes / 2**30:.0f} GiB)")
        in_program = xla_cost <= job_cap // 8
        chosen, floors = _choose_cuts(static, walks, budget, cores, job_cap - (xla_cost if in_program else 0))
        if in_program and not floors:
            _probes(admit, chosen, static, walks, xla_cost, "")
            _guards(admit, static, walks, xla_cost, chosen, "", notes)
            alone, replays = [p for p in pallas if p.dynamic], []
        else:
            alone = [p for p in pallas if p.op in chosen or p.dynamic]
            replays = replay_order(xla, walks)
    if alone:
        chosen, more = _choose_cuts(alone, walks, budget, cores, job_cap)
        floors += more
        alone = [p for p in alone if p.op in chosen]
        _probes(admit, chosen, alone, walks, 0, "alone-")
        _guards(admit, alone, walks, 0, chosen, "alone-", notes)
    taken = [op for op in replays if admit(Job(label=f"replay-{op}", bundles=_replay_cost(op, xla, walks),
                                               program="replay", op=op))]
    if len(taken) < len(replays):
        notes.append(f"{len(replays) - len(taken)} of the program's {len(replays)} XLA ops keep their floor (simulating "
                     "them too would pass the budget; XLA's own estimate, no bound, is the fusions view's XLA cycles)")
    if floors:
        notes.append(f"{', '.join(floors)}: even its smallest cut grid would pass what one compile may simulate")
    return Plan(jobs=jobs, alone=[p.op for p in alone], floors=floors, replays=taken, notes=notes)


def replay_order(xla: list, walks: dict[str, Walk]) -> list[str]:
    """XLA ops to simulate alone, most needed first: those the cost model gave up on, then those
    it gave no figure, then by what it says they take (its roofline where it says nothing)."""
    gave_up = lambda k: getattr(k, "compiler_gave_up", False)
    weight = lambda k: (k.compiler_cycles or (getattr(k, "roofline_s", None) or 0) * CLOCK_GUESS_HZ) * max(k.repeat or 1, 1)
    ranked = sorted(xla, key=lambda k: (not gave_up(k), bool(k.compiler_cycles), -weight(k)))
    return [k.name for k in ranked if weight(k) > 0 or gave_up(k)]


def _replay_cost(op: str, xla: list, walks: dict[str, Walk]) -> int:
    return _xla_cost(next(k for k in xla if k.name == op), walks)


def _choose_cuts(pallas: list[PallasGrid], walks: dict[str, Walk], budget: Budget, cores: int,
                 room: int) -> tuple[dict[str, list[tuple[int, ...]]], list[str]]:
    """For each Pallas kernel, the grids it is simulated at: the most faithful way to cut it whose
    largest compile fits ``room`` beside the others; the kernels no way fits go to ``floors``."""
    chosen, floors = {}, []
    share = room // max(len(pallas), 1)
    for p in pallas:
        walk = walks.get(p.op)
        ways = cuts(p, budget, cores)
        fitting = next((way for way in ways if max(pallas_bundles(walk, p.grid, g) for g in way) <= share), None)
        if fitting is None:
            floors.append(p.op)
        else:
            chosen[p.op] = fitting
    return chosen, floors


def _probes(admit, chosen: dict[str, list[tuple[int, ...]]], pallas: list[PallasGrid], walks: dict[str, Walk],
            xla_cost: int, prefix: str) -> None:
    """probe-1, probe-2 (and probe-3 for kernels cut three ways): the n-th grid of each kernel."""
    rounds = max((len(way) for way in chosen.values()), default=0)
    for n in range(rounds):
        grids = {p.op: chosen[p.op][min(n, len(chosen[p.op]) - 1)] for p in pallas if p.op in chosen}
        cost = xla_cost + sum(pallas_bundles(walks.get(p.op), p.grid, grids[p.op]) for p in pallas if p.op in grids)
        admit(Job(label=f"{prefix}probe-{n + 1}", bundles=cost, grids=grids, program="alone" if prefix else "program"))


def _guards(admit, pallas: list[PallasGrid], walks: dict[str, Walk], xla_cost: int,
            chosen: dict[str, list[tuple[int, ...]]], prefix: str, notes: list[str]) -> None:
    """The guarded kernels simulated with each guard taken at every step and at none, at their
    first cut's grid (every kernel of the program at its own first)."""
    if not any(p.guarded and p.op in chosen for p in pallas):
        return
    grids = {p.op: chosen[p.op][0] for p in pallas if p.op in chosen}
    cost = xla_cost + sum(pallas_bundles(walks.get(p.op), p.grid, grids[p.op]) for p in pallas if p.op in grids)
    for side in ("heavy", "light"):
        if not admit(Job(label=f"{prefix}guards-{side}", bundles=cost, grids=grids, force=side,
                         program="alone" if prefix else "program")):
            notes.append("no budget left to simulate the guarded code taken and skipped: "
                         "libtpu's own figure stands for the guarded kernels")
            return
