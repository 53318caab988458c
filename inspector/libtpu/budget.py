"""How much libtpu's simulation may cost, and how to get a figure when the whole would cost more.

libtpu's static profile runs the compiled program bundle by bundle (it unrolls the loops), so
its time and memory grow with what the program runs: a Pallas kernel's grid steps, an XLA op's
cycles. Measured here (2 shared cores): a 2048^3 bf16 matmul at 128-cubed blocks (4,096 steps)
took the compile from 2 s / 0.4 GB to 20-24 s / 1.3 GB; XLA's own 4096^3 dot 30 s / 2.2 GB.

A Pallas kernel costs the same per grid step whatever the grid (libtpu 0.0.42.1, 128-cubed
blocks: 747 cycles a step at 1024^3, 745 at 4096^3), so a grid too large to simulate is
simulated at two reduced sizes of the same kernel, and the line through them is extrapolated
(``fit_steps``). The reduced grids keep the inner axes whole where they can (the steps that differ, such as the
first and last of a reduction axis, keep their share) and shrink the outer ones.
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


@dataclasses.dataclass(frozen=True)
class Budget:
    """What one estimate may spend on libtpu's compiles (every compile together)."""

    seconds: float = 60.0
    memory_bytes: int = 4 * GiB
    probe_steps: int = 8  # grid steps of each Pallas kernel in the first cut compile (its innermost axis keeps up to 64)
    whole: bool = True  # simulate the whole program when it fits; False: extrapolate every grid over probe_steps
    # Simulation cost per simulated cycle, measured here (XLA's 4096^3 dot: 1.08M cycles, 27 to
    # over 60 s as the machine's load varied, 2.2 GB): to judge a program's XLA ops before simulating them.
    # A guess, low for softmax-heavy programs: samples/attention.py:reference at bf16 4x4096x128
    # (2.9M cycles by the compiler's estimate, so 117 s and 5.8 GB) took 172 s and 10.6 GiB.
    seconds_per_cycle: float = 40e-6
    bytes_per_cycle: float = 2000.0

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


def extrapolate(fit: StepFit, steps: int) -> float:
    return fit.intercept + fit.per_step * steps


def line_through(points: list[tuple[int, int, list[int]]]) -> StepFit | None:
    """cycles = a + b * steps through the grids simulated, (steps, cycles, grid) each; None below two."""
    distinct = {s: (c, g) for s, c, g in points}
    if len(distinct) < 2:
        return None
    return fit_steps([(s, c) for s, (c, _) in distinct.items()], [g for _, g in distinct.values()])


def full_grid_cycles(points: list[tuple[int, int, list[int]]], grid) -> tuple[float | None, StepFit | None]:
    """(cycles of the full ``grid``, the fit when extrapolated) from the grids simulated."""
    full = math.prod(grid)
    exact = next((c for s, c, _ in points if s == full), None)
    if exact is not None:
        return float(exact), None
    if (fit := line_through(points)) is not None:
        return extrapolate(fit, full), fit
    distinct = {s: (c, g) for s, c, g in points}
    if len(distinct) == 1:  # one cut only: a line through the origin
        (s, (c, g)), = distinct.items()
        fit = StepFit(intercept=0.0, per_step=c / s, points=[(s, c)], grids=[g])
        return extrapolate(fit, full), fit
    return None, None


def predict_whole(probes: list[tuple[float, int | None, float]], whole_cycles: float) -> tuple[float, int | None]:
    """Time and peak memory of simulating ``whole_cycles`` (all ops), from two reduced compiles
    given as (wall seconds, peak bytes, simulated cycles): both grow linearly in simulated cycles."""
    (t1, m1, c1), (t2, m2, c2) = probes[:2]
    extra = max(whole_cycles - c2, 0.0)
    span = c2 - c1
    # the difference of the two is the simulation's own rate; on a loaded machine noise can hide
    # it, so it is taken as at least half the larger compile's whole time per cycle (that one
    # counts the compile too: more than the rate, the safe side to err on)
    rate = max((t2 - t1) / span if span > 0 else 0.0, 0.5 * t2 / max(c2, 1))
    seconds = t2 + rate * extra
    memory = None
    if m1 is not None and m2 is not None:
        memory = int(m2 + ((m2 - m1) / span if span > 0 and m2 > m1 else 0) * extra)
    return seconds, memory
