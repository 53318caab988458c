"""How much libtpu's simulation may cost, judged before it runs, and how to get a figure when the
whole would cost more.

libtpu's static profile runs the compiled program bundle by bundle (it unrolls the loops and builds
a graph of every bundle it runs), so its time and memory grow with the bundles the program issues.
Those are read before any simulation from the program's final bundles (bundle_walk.py: each loop at
its trip count, every guarded region run), so the plan (plan.py) knows what each compile it may
make will cost, in bundles, and the budget is a number of bundles: the same program, chip and
libtpu give the same plan, and so the same figures, on any machine under any load. The machine's
speed decides only how long that takes; a compile that runs far past what its bundles predict (a
machine many times slower than this one) is stopped, and its kernels get a floor, not a figure.

A Pallas kernel costs the same per grid step whatever the grid (libtpu 0.0.42.1, 128-cubed
blocks: 747 cycles a step at 1024^3, 745 at 4096^3), so a grid too large to simulate is
simulated at reduced sizes of the same kernel and the cycles fitted (``fit_steps``). The reduced
grids keep the inner axes whole where they can (the steps that differ, such as the first and last
of a reduction axis, keep their share) and shrink the outer ones.
"""
from __future__ import annotations

import dataclasses
import math

from ..base.errors import UsageError
from .model import StepFit

GiB = 1024**3


# The least time one of libtpu's compiles is given: a budget below it could not be kept (with 0.001 s
# asked, the compile still ran 1 s and was said to stop "after 1 s"), so it is refused.
MIN_SECONDS = 1.0

# What simulating one bundle costs (the bundles a program issues, bundle_walk.Walk.most), measured on
# this project's 2-core machine with libtpu 0.0.42.1 (tests/bench/bench_time.py --sim-cost): from
# 2.3 us and 0.3 KB (the flash sample) to 21 us and 1.8 KB (XLA's 2048^3 dot); the largest of each
# is taken, rounded up, so that a plan does not promise what the budget cannot pay.
SECONDS_PER_BUNDLE = 25e-6
BYTES_PER_BUNDLE = 2000
# An op whose result stays in VMEM (S(1)) costs libtpu's simulation far more than its bundles
# say, growing with the square of the result's vector registers: the reference attention's causal
# mask, an iota compare writing pred[S,S] to VMEM, simulated alone with libtpu 0.0.42.1 on this
# machine: S=1024 3 s (the compile's own), S=2048 17 s and 0.8 GB, S=4096 over 400 s and 5.7 GB
# for 20k bundles. So such an op counts this many bundles per pair of its result's registers
# (14 s over 1024^2 pairs at S=2048, at SECONDS_PER_BUNDLE).
VMEM_RESULT_BUNDLES = 0.5
VREG_BYTES = 4096  # one vector register: 8 sublanes x 128 lanes x 4 bytes
# An XLA op's bundles are read only when it is simulated (a large program's bundles take minutes to
# dump), so before, its cost is judged from the compiler's own cycles: the simulation of XLA ops
# measured here cost 0.3 to 1.4 bundles' worth a simulated cycle, and the compiler's cycles were 1 to
# 5 times the simulated ones (XLA's 2048^3 dot; the reference attention's softmax fusions).
BUNDLES_PER_CYCLE = 0.2
CLOCK_GUESS_HZ = 1.5e9  # a roofline's seconds as cycles, where the compiler gave none
# What a compile costs beside its simulation (tracing aside: the program is compiled again), in bundles
COMPILE_BUNDLES = 40_000
# A compile is stopped only when it runs this many times past what its bundles predict (plus a
# compile's own time): its figure would then depend on the machine, which a figure never does.
SLACK = 8.0
SLACK_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class Budget:
    """What one estimate may spend on libtpu's simulations (every compile together), judged by
    the bundles they will simulate, before they run."""

    seconds: float = 60.0
    memory_bytes: int = 4 * GiB
    probe_steps: int = 8  # grid steps of each Pallas kernel in the first cut compile (its innermost axis keeps up to 64)
    whole: bool = True  # simulate the whole program when it fits; False: extrapolate every grid over probe_steps
    seconds_per_bundle: float = SECONDS_PER_BUNDLE
    bytes_per_bundle: float = BYTES_PER_BUNDLE

    def __post_init__(self) -> None:
        # nan or inf seconds reached the compile's hard stop as its timeout; 0 or less, no compile at all
        if not (math.isfinite(self.seconds) and self.seconds >= MIN_SECONDS):
            raise UsageError(f"Budget(seconds={self.seconds!r}): give the seconds libtpu's simulation may take, "
                             f"a finite number of {MIN_SECONDS:g} or more: a compile is given {MIN_SECONDS:g} s at "
                             "least (default 60)")
        if not self.memory_bytes > 0:
            raise UsageError(f"Budget(memory_bytes={self.memory_bytes!r}): give the bytes its compiles may use, > 0")

    def as_dict(self) -> dict[str, float | bool]:
        return {"seconds": self.seconds, "memory_bytes": self.memory_bytes, "whole": self.whole}

    @property
    def total_bundles(self) -> int:
        """The bundles all the estimate's simulations together may run."""
        return int(self.seconds / self.seconds_per_bundle)

    @property
    def job_bundles(self) -> int:
        """The bundles one compile may simulate: its share of the time, within the memory."""
        return int(min(self.total_bundles, 0.9 * self.memory_bytes / self.bytes_per_bundle))

    def seconds_for(self, bundles: float) -> float:
        """How long a compile that simulates ``bundles`` may run before it is stopped: many times what
        they predict, and never less than the budget itself (what one bundle costs libtpu varies
        tenfold between kernels: a small prediction is the least sure)."""
        return max(self.seconds, SLACK_SECONDS + SLACK * (bundles + COMPILE_BUNDLES) * self.seconds_per_bundle)

    def bytes_for(self, bundles: float) -> float:
        return (bundles + COMPILE_BUNDLES) * self.bytes_per_bundle


def reduced_grid(grid: tuple[int, ...], semantics: tuple[str, ...], steps: int, cores: int = 1,
                 inner: int = 64) -> tuple[int, ...]:
    """``grid`` cut to at most ``steps`` steps (about): inner axes kept whole while they fit, the
    next one shortened, the outer ones 1. The innermost axis is kept whole up to ``inner`` steps
    whatever ``steps`` says: a reduction's first and last steps then keep their share of the steps,
    and the line through two cut grids has the full grid's cycles per step. On a chip whose TensorCores
    split the parallel axes (``cores`` > 1), the first parallel axis keeps 2, so both cores work."""
    if grid:
        steps = max(steps, min(grid[-1], inner))
    if math.prod(grid) <= steps:
        return tuple(grid)
    new = [1] * len(grid)
    product = 1
    for axis in reversed(range(len(grid))):
        if product * grid[axis] <= steps:
            new[axis] = grid[axis]
            product *= grid[axis]
        else:
            new[axis] = max(1, steps // product)
            break
    if cores > 1:
        first = next((a for a, s in enumerate(semantics) if "parallel" in s and grid[a] >= 2), None)
        if first is not None and new[first] < 2:
            new[first] = 2
    return tuple(new)


def fit_steps(points: list[tuple[int, int]], grids: list[list[int]]) -> StepFit | None:
    """cycles = a + b * steps through the two measured points; None when they cannot make a line
    (the same number of steps, or cycles that fall as steps grow)."""
    (s1, c1), (s2, c2) = sorted(points)[:2]
    if s2 == s1 or c2 < c1:
        return None
    per_step = (c2 - c1) / (s2 - s1)
    return StepFit(intercept=c1 - per_step * s1, per_step=per_step, points=sorted(points), grids=grids)


def extrapolate(fit: StepFit, steps: int, rows: int = 0) -> float:
    return fit.intercept + fit.per_step * steps + fit.per_row * rows


def rows_of(grid) -> int:
    """The runs of a grid's innermost axis: the steps of all its other axes."""
    return math.prod(grid[:-1]) if grid else 1


def fit_rows(points: list[tuple[int, int, list[int]]]) -> StepFit | None:
    """cycles = a + r * rows + b * steps through three grids (steps, cycles, grid) whose innermost
    axis was cut to different lengths: ``r`` is what each run of the innermost axis costs beside its
    steps (its first and last step: a reduction's init and write-back). None when they do not
    decide it (the grids' rows and steps in proportion) or it is not a cost (negative)."""
    import numpy as np

    distinct = {tuple(g): (s, c) for s, c, g in points}
    if len(distinct) < 3:
        return None
    grids = sorted(distinct)
    a = np.array([[1.0, rows_of(g), distinct[g][0]] for g in grids])
    c = np.array([float(distinct[g][1]) for g in grids])
    if np.linalg.matrix_rank(a) < 3:
        return None
    (intercept, per_row, per_step), *_ = np.linalg.lstsq(a, c, rcond=None)
    if per_step < 0 or per_row + per_step < 0:
        return None
    return StepFit(intercept=float(intercept), per_step=float(per_step), per_row=float(per_row),
                   points=sorted((distinct[g][0], distinct[g][1]) for g in grids), grids=[list(g) for g in grids])


def line_through(points: list[tuple[int, int, list[int]]]) -> StepFit | None:
    """cycles = a + b * steps through the grids simulated, (steps, cycles, grid) each; None below two."""
    distinct = {s: (c, g) for s, c, g in points}
    if len(distinct) < 2:
        return None
    return fit_steps([(s, c) for s, (c, _) in distinct.items()], [g for _, g in distinct.values()])


def full_grid_cycles(points: list[tuple[int, int, list[int]]], grid) -> tuple[float | None, StepFit | None]:
    """(cycles of the full ``grid``, the fit when extrapolated) from the grids simulated: the line
    through grids that keep the innermost axis whole, the plane through three that cut it."""
    full = math.prod(grid)
    exact = next((c for s, c, _ in points if s == full), None)
    if exact is not None:
        return float(exact), None
    inner = {g[-1] for _, _, g in points if g}
    if len(inner) > 1 and (fit := fit_rows(points)) is not None:
        return extrapolate(fit, full, rows_of(grid)), fit
    if (fit := line_through(points)) is not None:
        return extrapolate(fit, full), fit
    distinct = {s: (c, g) for s, c, g in points}
    if len(distinct) == 1:  # one cut only: a line through the origin
        (s, (c, g)), = distinct.items()
        fit = StepFit(intercept=0.0, per_step=c / s, points=[(s, c)], grids=[g])
        return extrapolate(fit, full), fit
    return None, None
