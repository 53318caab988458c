"""A Pallas kernel's simulated time, weighted by the grid steps that run its guarded code.

libtpu's static simulation does not follow a ``pl.when`` step by step (jax_internals/branches.py
has the measurements). The kernel is simulated twice more, at the same (possibly cut) grid, with
its costliest guard taken at every step and skipped at every step; a step of each kind then costs
what those two give per step, and the kernel's time is the fixed part of the first simulation
plus the steps of each kind at their cost. Where the guard depends on values known only when the
kernel runs, the two bound the kernel's time and libtpu's own figure stays.
"""
from __future__ import annotations

from ..base.findings import Finding
from ..jax_internals.branches import Guard


def weighted(op: str, cycles: float, guard: Guard, intercept: float, heavy: tuple[int, float],
             light: tuple[int, float], chip: str, full_fixed: float | None = None) -> tuple[float, Finding | None]:
    """(the kernel's cycles, what was done) from libtpu's own ``cycles`` for the full grid, the
    fixed cycles of its fit at the grid the forced simulations ran at (``intercept``: 0 without
    one) and at the full grid (``full_fixed``: the same where not given), and the two forced
    simulations, each (steps, cycles), at the same grid."""
    (steps, heavy_cycles), (light_steps, light_cycles) = heavy, light
    if steps != light_steps or steps <= 0:
        return cycles, None
    taken, skipped = ((heavy_cycles - intercept) / steps, (light_cycles - intercept) / steps)
    if taken <= skipped:  # the guarded code costs nothing the simulation sees
        return cycles, None
    at = f" at {guard.source}" if guard.source else ""
    intercept = intercept if full_fixed is None else full_fixed
    low, high = intercept + guard.steps * skipped, intercept + guard.steps * taken
    data = {"chip": chip, "guard": guard.source, "steps": guard.steps, "heavy_steps": guard.heavy_steps,
            "cycles_per_step_skipped": skipped, "cycles_per_step_taken": taken, "libtpu_cycles": cycles,
            "low_cycles": low, "high_cycles": high}
    if guard.heavy_steps is None:
        return cycles, Finding(
            "warning", "libtpu-guard-unknown",
            f"{op}: whether a grid step runs the code guarded{at} depends on values known only when the kernel "
            f"runs (a scalar prefetch, a ref), and libtpu's simulation does not follow it step by step: the kernel "
            f"takes between {low / cycles:.2f}x (no step runs it) and {high / cycles:.2f}x (every step) of the "
            "estimate shown (measure on a TPU: --measure)", kernel=op, view="fusions", data=data)
    steps_weighted = intercept + guard.heavy_steps * taken + (guard.steps - guard.heavy_steps) * skipped
    return steps_weighted, Finding(
        "info", "libtpu-guarded-steps",
        f"{op}: {guard.heavy_steps:,} of the {guard.steps:,} grid steps run the code guarded{at} (from the program "
        f"ids{' and the scalar prefetch values the inputs give' if guard.read_values else ''}), which libtpu's simulation does not follow step by step; simulated with it run at every step and at "
        f"none, a step costs {taken:,.0f} and {skipped:,.0f} cycles, and the kernel {cycles:,.0f} -> "
        f"{steps_weighted:,.0f} cycles", kernel=op, view="fusions", data=data)
