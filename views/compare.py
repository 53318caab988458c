"""The compare printer: two variants' totals side by side with ratios, VMEM per Pallas kernel,
the kernels only one side has and those whose HBM bytes changed most."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_estimate, fmt_bytes, fmt_count, fmt_time

from .cells import add_row

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..verbs.comparison import Compare, KernelRef

_FORMAT = {"bytes": fmt_bytes, "flops": fmt_count, "seconds": fmt_time,
           "count": lambda n: "-" if n is None else str(int(n))}


def _ratio(r: float | None) -> Text:
    if r is None:
        return Text("-")
    style = "green" if r < 0.95 else "red" if r > 1.05 else ""
    return Text(f"{r:.2f}x", style=style)


def _sides(c: Compare) -> Text:
    out = Text()
    for tag, side in (("A", c.a), ("B", c.b)):
        out.append(f"{tag}  ", style="bold")
        out.append(side.label)
        if side.compile_error:
            out.append(f"  (compile failed: {side.compile_error})", style="red")
        out.append("\n")
    return out


def totals_table(c: Compare) -> Table:
    table = Table(title="totals (ratio: B / A)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("", "A", "B", "ratio"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=bool(col))
    for t in c.totals:
        fmt = _FORMAT[t.unit]
        name = t.name + (" (A from cache)" if t.name == "compile time" and c.a.compile_cached else "") \
                      + (" (B from cache)" if t.name == "compile time" and c.b.compile_cached else "")
        shown = ((fmt_estimate(t.a, t.kind_a), fmt_estimate(t.b, t.kind_b)) if t.kind_a or t.kind_b
                 else (fmt(t.a), fmt(t.b)))
        add_row(table, name, *shown, _ratio(t.ratio))
    return table


def vmem_table(c: Compare) -> Table | None:
    if not c.vmem:
        return None
    table = Table(title="VMEM per Pallas kernel (estimate of limit; compiler's own figure on TPU targets)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("kernel", "A", "B", "ratio", "compiler A", "compiler B"):
        table.add_column(col, justify="left" if col == "kernel" else "right", overflow="fold")
    for v in c.vmem:
        side = lambda est, lim, chip: "-" if est is None else f"{fmt_bytes(est)} of {fmt_bytes(lim)}" + (f" ({chip})" if chip else "")
        add_row(table, v.kernel, side(v.estimate_a, v.limit_a, v.chip_a), side(v.estimate_b, v.limit_b, v.chip_b),
                _ratio(v.estimate_b / v.estimate_a if v.estimate_a and v.estimate_b is not None else None),
                fmt_bytes(v.compiler_a), fmt_bytes(v.compiler_b))
    return table


def _only_table(title: str, kernels: list[KernelRef], top: int) -> Table | Text:
    if not kernels:
        return Text(f"{title}: none", style="dim")
    shown = kernels if top <= 0 else kernels[:top]
    table = Table(title=f"{title} ({len(kernels)}, largest first)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("kernel", "kind", "source", "HBM r+w", "flops"):
        table.add_column(col, justify="right" if col in ("HBM r+w", "flops") else "left", overflow="fold")
    for k in shown:
        add_row(table, k.name, k.kind, (k.source or "-").rsplit("/", 1)[-1], fmt_bytes(k.hbm_bytes), fmt_count(k.flops))
    if len(shown) < len(kernels):
        table.caption, table.caption_justify = f"{len(kernels) - len(shown)} more: --top 0 shows all", "left"
    return table


def changed_table(c: Compare, top: int) -> Table | Text:
    if not c.changed:
        return Text(f"the {c.paired} kernels on both sides move the same HBM bytes", style="dim")
    shown = c.changed if top <= 0 else c.changed[:top]
    table = Table(title=f"kernels whose HBM bytes changed most ({len(c.changed)} of {c.paired} on both sides)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("kernel A", "kernel B", "source", "HBM A", "HBM B", "change", "ratio"):
        table.add_column(col, justify="left" if col in ("kernel A", "kernel B", "source") else "right", overflow="fold")
    for ch in shown:
        sign = "+" if ch.bytes_delta > 0 else "-"
        add_row(table, ch.a.name, ch.b.name, (ch.a.source or "-").rsplit("/", 1)[-1], fmt_bytes(ch.a.hbm_bytes),
                fmt_bytes(ch.b.hbm_bytes), sign + fmt_bytes(abs(ch.bytes_delta)), _ratio(ch.ratio))
    if len(shown) < len(c.changed):
        table.caption, table.caption_justify = f"{len(c.changed) - len(shown)} more: --top 0 shows all", "left"
    return table


def compare_view(c: Compare, top: int = 10) -> Group:
    parts: list[RenderableType] = [_sides(c), totals_table(c)]
    vmem = vmem_table(c)
    if vmem is not None:
        parts.append(vmem)
    parts += [changed_table(c, top), _only_table("only in A", c.only_a, top), _only_table("only in B", c.only_b, top)]
    for tag, side in (("A", c.a), ("B", c.b)):
        parts += [Text(f"error in {tag}: {m}", style="red") for m in side.errors]
    return Group(*parts)
