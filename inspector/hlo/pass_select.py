"""The command line's pass options, checked before anything runs (no jax, no analyses imported):
``--pass`` picks a step of the passes view, ``--passes`` adds the "made by pass" column to the
fusions view. In hlo/, beside the pass pipeline it picks from (``passes``): the compile path and the
command line check a selector the same way."""
from __future__ import annotations

from ..base.errors import UsageError

GRAMMAR = ("a step (a pass name, part of one, or its index as `--view passes` lists it) or a range "
           "A..B (A.. runs to the last step, ..B from the first)")


def selector_problem(selector: str) -> str | None:
    """Why ``selector`` is no step and no range (empty, `..` alone, 1..2..3), or None."""
    parts = selector.split("..")
    if not selector.strip() or len(parts) > 2 or (len(parts) == 2 and not any(p.strip() for p in parts)):
        return f"--pass {selector!r}: give {GRAMMAR}"
    return None


def check_selector(selector: str) -> None:
    if (problem := selector_problem(selector)) is not None:
        raise UsageError(problem)


def check_view_options(view: str, select: str | None, passes: bool) -> None:
    """``--pass`` with its grammar and a view that shows it (passes, or mosaic for Mosaic's passes;
    overview means passes);
    ``--passes`` only where its column is shown (fusions; the passes view compiles with dumps anyway)."""
    if select is not None:
        check_selector(select)
        if view not in ("passes", "overview", "mosaic"):
            raise UsageError(f"--pass is for the passes view (XLA's passes) or the mosaic view (Mosaic's), not --view {view}")
    if passes and view not in ("fusions", "passes"):
        raise UsageError(f"--passes names the pass that made each kernel in the fusions view: add --view fusions "
                         f"(--view {view} does not show it; it only makes the compile slower)")
