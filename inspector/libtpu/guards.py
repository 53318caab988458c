"""A Pallas kernel's simulated time, weighted by the grid steps that run its guarded code.

libtpu's static simulation times one path through each grid step (on the v5e: the side of a
``pl.when`` that skips its body; jax_internals/branches.py has the measurements). A second
simulation of the kernel with its costliest guard taken at every step gives what a step that
runs it costs; the kernel's time is the first, plus that difference for each step that takes it.
Where the guard depends on values known only when the kernel runs, the two simulations bound it.
"""
from __future__ import annotations

from ..findings import Finding
from ..jax_internals.branches import Guard


def weighted(op: str, cycles: float, guard: Guard, plain: tuple[int, float], forced: tuple[int, float],
             chip: str) -> tuple[float, Finding | None]:
    """(the kernel's cycles, what was done) from the first simulation's ``cycles`` for the full
    grid and the two simulations at the same (possibly cut) grid: ``plain`` and ``forced``, each
    (steps, cycles)."""
    (steps, plain_cycles), (forced_steps, forced_cycles) = plain, forced
    if steps != forced_steps or steps <= 0:
        return cycles, None
    extra = (forced_cycles - plain_cycles) / steps  # what taking the guard adds to one step
    if extra <= 0:  # the simulation took the heavy side already, or it costs nothing more
        return cycles, None
    at = f" at {guard.source}" if guard.source else ""
    data = {"chip": chip, "guard": guard.source, "steps": guard.steps, "heavy_steps": guard.heavy_steps,
            "cycles_per_step_skipped": plain_cycles / steps, "cycles_per_step_taken": forced_cycles / steps}
    if guard.heavy_steps is None:
        high = cycles + extra * guard.steps
        return cycles, Finding(
            "warning", "libtpu-guard-unknown",
            f"{op}: whether a grid step runs the code guarded{at} depends on values known only when the kernel "
            f"runs (a scalar prefetch, a ref); libtpu's simulation skipped it at every step, so the estimate is a "
            f"floor: with it run at every step the kernel would take {high / cycles:.1f}x as long "
            "(measure on a TPU: --measure)", kernel=op, view="fusions", data={**data, "high_cycles": high})
    return cycles + extra * guard.heavy_steps, Finding(
        "info", "libtpu-guarded-steps",
        f"{op}: {guard.heavy_steps:,} of the {guard.steps:,} grid steps run the code guarded{at} (from the program "
        f"ids); libtpu's simulation skipped it at every step ({plain_cycles / steps:,.0f} cycles per step), so those "
        f"steps take the time of a second simulation that runs it ({forced_cycles / steps:,.0f} cycles per step)",
        kernel=op, view="fusions", data=data)
