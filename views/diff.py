"""The diff verdict: per output, the error figures, and the error map over the output blocks."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_time

from .cells import add_row, findings_table

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..run import DiffResult, LeafDiff


def _error(x: float) -> str:
    """An error figure; "-" where no element of the output (or block) is a number on both sides."""
    return "-" if x != x else f"{x:.3g}"


def _leaf_table(title: str, leaves: list[LeafDiff]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title=title, title_justify="left")
    for col in ("output", "shape", "max abs", "max rel", "ulp at worst", "outside tol", "NaN k/ref", "worst at", "verdict"):
        table.add_column(col, justify="left" if col in ("output", "shape", "worst at", "verdict") else "right", no_wrap=True)
    for l in leaves:
        verdict = Text("ok", style="green") if l.ok else Text("WRONG", style="bold red")
        add_row(table, l.output or "output", f"{l.dtype}{l.shape}", _error(l.max_abs), _error(l.max_rel),
                "-" if l.max_ulp is None else f"{l.max_ulp:.3g}", f"{l.bad} ({l.bad_fraction:.2%})",
                f"{l.nan_kernel}/{l.nan_reference}",
                "no elements" if 0 in l.shape else f"{tuple(l.worst_index)} {l.worst_kernel:.4g} vs {l.worst_reference:.4g}",
                verdict)
    return table


def _tolerances(leaves: list[LeafDiff]) -> list:
    """One line per distinct tolerance: the figures, where they come from and why."""
    seen: dict[tuple, list[str]] = {}
    for l in leaves:
        if l.tolerance is not None:
            t = l.tolerance
            seen.setdefault((t.atol, t.rtol, t.source, t.reason), []).append(l.output or "output")
    lines = []
    for (atol, rtol, source, reason), names in seen.items():
        who = "" if len(seen) == 1 else f"{', '.join(names[:4])}{' ...' if len(names) > 4 else ''}: "
        lines.append(Text(f"tolerance {who}atol={atol:.3g}, rtol={rtol:.3g} ({source}: {reason})", style="dim"))
    return lines


def _map(leaf: LeafDiff) -> list:
    m = leaf.error_map
    if m is None or not m.bad_blocks:
        return []
    what = f"{m.kernel}'s output blocks of {m.block_shape}" if m.basis == "blockspec" else f"an even grid of {m.block_shape} cells"
    parts = [Text(f"{leaf.output or 'output'}: {m.bad_block_count} of {_count(m.blocks)} blocks wrong, over {what} "
                  "('.' ok, 'x' wrong, 'N' NaN: never written)", style="bold")]
    parts += [Text("  " + row) for row in m.rows]
    table = Table(box=box.SIMPLE, padding=(0, 1))
    for col in ("block", "wrong", "NaN", "max abs", "written at grid points"):
        table.add_column(col, justify="right" if col in ("wrong", "NaN", "max abs") else "left")
    for b in m.bad_blocks[:8]:
        add_row(table, str(tuple(b.block)), str(b.bad), str(b.nan), _error(b.max_abs),
                ", ".join(str(tuple(p)) for p in b.grid_points) or ("none: no step writes it" if m.basis == "blockspec" else "-"))
    return parts + [table]


def _count(blocks: list[int]) -> int:
    n = 1
    for b in blocks:
        n *= b
    return n


def diff_view(result: DiffResult) -> Group:
    head: list[RenderableType] = [Text.assemble(("diff ", "bold"), f"{result.target} against {result.reference}  ",
                          (f"({result.mode}; seed {result.seed})", "dim")),
            Text("inputs: " + ", ".join(result.inputs), style="dim")]
    parts = head + ([_leaf_table("outputs", result.outputs)] if result.outputs else
                    [Text("no outputs compared (see the findings)", style="bold red")])
    parts += _tolerances(result.outputs)
    for leaf in result.outputs:
        parts += _map(leaf)
    if result.gradients is not None:
        parts.append(_leaf_table("gradients (vjp with a random cotangent)", result.gradients))
        parts += _tolerances(result.gradients)
        for leaf in result.gradients:
            parts += _map(leaf)
    if result.timing:
        t = result.timing
        parts.append(Text(f"time, median of {t.runs}: kernel {fmt_time(t.kernel_s)}, reference {fmt_time(t.reference_s)} ({t.note})"))
    parts += [Text(""), findings_table(result.findings), Text(""),
              Text("ok" if result.ok else "FAILED", style="bold green" if result.ok else "bold red")]
    return Group(*parts)
