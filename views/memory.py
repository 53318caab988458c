"""The memory view: HBM per device (XLA's memory analysis) against the chip's capacity, and what
is live at the peak of the schedule (the compiler's buffer assignment), with source lines."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes

from .cells import add_row

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..hlo.memory import MemoryReport


def _share(n: int | None, of: int | None) -> str:
    return f"{100 * n / of:.1f}%" if n is not None and of else ""


def figures_table(m: MemoryReport) -> Table:
    where = f"{m.chip}" + (f", {m.devices} devices, mesh " + ",".join(f"{k}={v}" for k, v in m.mesh.items()) if m.mesh else "")
    table = Table(title=f"HBM per device on {where}", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("", "bytes", "of capacity"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for label, value in (("arguments", m.argument_bytes), ("outputs", m.output_bytes), ("temporaries", m.temp_bytes),
                         ("aliased (outputs reusing an argument)", m.alias_bytes)):
        add_row(table, label, fmt_bytes(value), _share(value, m.hbm_capacity_bytes))
    add_row(table, Text("needed (arguments + outputs + temporaries - aliased)", style="bold"), fmt_bytes(m.required_bytes),
            _share(m.required_bytes, m.hbm_capacity_bytes))
    add_row(table, "generated code (not counted)", fmt_bytes(m.code_bytes), "")
    add_row(table, "HBM usable per device", fmt_bytes(m.hbm_capacity_bytes), "")
    return table


def verdict(m: MemoryReport) -> Text:
    if m.fits is None:
        return Text("no HBM capacity to compare with on this target (a TPU target has one: --target tpu-v5e:4x4)", style="dim")
    assert m.required_bytes is not None and m.hbm_capacity_bytes is not None  # fits is known only with both
    if m.fits:
        room = m.hbm_capacity_bytes - m.required_bytes
        return Text(f"fits: {fmt_bytes(m.required_bytes)} of {fmt_bytes(m.hbm_capacity_bytes)} per device, "
                    f"{fmt_bytes(room)} to spare", style="bold green")
    return Text(f"does not fit: needs {fmt_bytes(m.required_bytes)} of {fmt_bytes(m.hbm_capacity_bytes)} per device, over by "
                f"{fmt_bytes(m.required_bytes - m.hbm_capacity_bytes)}"
                + (" (the compiler refused it)" if m.compiler_refused else ""), style="bold red")


def peak_table(m: MemoryReport) -> Table | Text:
    if not m.largest:
        return Text(m.note or "no buffer assignment", style="dim")
    kinds = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(m.live_by_kind.items(), key=lambda kv: -kv[1]))
    table = Table(title=f"live in HBM at the peak ({fmt_bytes(m.peak_bytes)}, at {m.peak_at or '?'}): {kinds}",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("buffer", "shape", "bytes", "kind", "source", "op"):
        table.add_column(col, justify="right" if col == "bytes" else "left", overflow="fold")
    for b in m.largest:
        add_row(table, b["value"], b["shape"], fmt_bytes(b["bytes"]), b["kind"] or "-", b["source"] or "-", b["op_name"] or "-")
    return table


def memory_view(m: MemoryReport | None, reason: str = "not compiled") -> Group | Text:
    if m is None:
        return Text(f"no memory figures: {reason}")
    parts: list[RenderableType] = [figures_table(m), verdict(m), Text(""), peak_table(m)]
    if m.note and m.largest:
        parts.append(Text(f"note: {m.note}", style="dim"))
    return Group(*parts)
