"""What Mosaic did to each kernel: its passes (ops by kind, what changed), the relayouts it
inserted per source line, the layout each vector value got, and one pass's diff. Renders an
inspector.mosaic.passes.MosaicPasses; computes nothing."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes
from .cells import add_row
from .passes import diff_text

if TYPE_CHECKING:  # types only
    from ..mosaic.dumps import KernelPasses
    from ..mosaic.passes import MosaicPasses

# Columns, declared once for the printer and the TUI: (header, right-aligned)
MOSAIC_PASS_COLUMNS = [("#", True), ("pass", False), ("changed", False), ("ops", True), ("Δ", True),
                       ("what changed (ops by kind)", False)]
RELAYOUT_COLUMNS = [("source", False), ("relayouts", True), ("shape", False), ("from", False), ("to", False)]
LAYOUT_COLUMNS = [("source", False), ("value", False), ("op", False), ("shape", False), ("layout", False)]


def _signed(n: int) -> str:
    return f"{n:+d}" if n else ""


def changes_text(delta: dict[str, int], top: int = 4) -> str:
    items = list(delta.items())
    shown = ", ".join(f"{n:+d} {kind}" for kind, n in items[:top])
    return shown + (f", {len(items) - top} more kinds" if len(items) > top else "")


def mosaic_pass_cells(p) -> list[Text]:
    """One pass's cells, in MOSAIC_PASS_COLUMNS order; a pass that changed nothing is dim, one that failed red."""
    style = "red" if p.failed else "" if p.changed else "dim"
    changed = "FAILED" if p.failed else "yes" if p.changed else "no"
    return [Text(str(p.index), style=style), Text(p.name, style=style or "bold"),
            Text(changed, style="red" if p.failed else "green" if p.changed else "dim"),
            Text(str(p.total)), Text(_signed(p.total_delta)), Text(changes_text(p.delta), style=style)]


def relayout_cells(r) -> list[Text]:
    return [Text(r.source or "(no location)", style="" if r.source else "dim"), Text(str(r.count)), Text(r.shape),
            Text(r.from_layout), Text(r.to_layout)]


def layout_cells(v) -> list[Text]:
    return [Text(v.source or "-", style="" if v.source else "dim"), Text(v.value), Text(v.op), Text(v.shape),
            Text(v.layout)]


def _table(title: str, columns, caption: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), caption=caption,
                  caption_justify="left")
    for header, right in columns:
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    return table


def kernel_title(k: KernelPasses) -> str:
    changed = sum(p.changed for p in k.passes)
    return (f"{k.kernel}" + (f" ({k.source})" if k.source else "") + f": {len(k.passes)} Mosaic passes, {changed} changed "
            f"the module (dumps {fmt_bytes(k.dump_bytes)}, removed)" + (f"; failed in {k.failed_pass}" if k.failed_pass else ""))


def relayouts_table(k: KernelPasses) -> Table:
    rel = _table(f"relayouts inserted by relayout-insertion: {k.relayout_count}, per source line", RELAYOUT_COLUMNS)
    for r in k.relayouts or []:
        add_row(rel, *relayout_cells(r))
    return rel


def kernel_view(k: KernelPasses, layouts: bool = False, colour: bool = True) -> Group:
    passes = _table(kernel_title(k), MOSAIC_PASS_COLUMNS,
                    "`--pass NAME` (or an index, or A..B) shows the diff of a pass; layouts: Mosaic's "
                    "\"bitwidth,{row offset,lane offset},(tile)\", * = replicated")
    for p in k.passes:
        add_row(passes, *mosaic_pass_cells(p))
    parts: list[RenderableType] = [passes]
    if k.relayouts is not None:
        parts.append(relayouts_table(k))
    if layouts and k.layouts is not None:
        lay = _table(f"the layout infer-vector-layout gave each vector value ({len(k.layouts)})", LAYOUT_COLUMNS)
        for v in k.layouts:
            add_row(lay, *layout_cells(v))
        parts.append(lay)
    if k.diff is not None:
        parts.append(diff_text(k.diff, colour))
    return Group(*parts)


def mosaic_passes_view(result: MosaicPasses, layouts: bool = False, colour: bool = True) -> Group:
    parts: list[RenderableType] = [kernel_view(k, layouts, colour) for k in result.kernels]
    if result.compile_error:
        parts.append(Text(f"the compile failed: {result.compile_error}", style="red"))
    for f in result.findings:
        parts.append(Text(f"{f.severity}  {f.message}", style="dim"))
    if not parts:
        parts.append(Text(f"{result.chip}: no Mosaic kernels"))
    return Group(*parts)
