"""The collectives view: every collective of the compiled program in schedule order, what it
moves per device over which mesh axes, a time estimate over the links between chips (a TPU's ICI), and
whether compute overlaps it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes, fmt_time

from .cells import add_row

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..hlo.collectives import CollectiveAnalysis


def _axes(axes) -> str:
    return "+".join(axes) if axes else ("-" if axes == [] else "?")


def collectives_table(a: CollectiveAnalysis, top: int = 40, link: str | None = "ICI") -> Table:
    """``link``: the family's links between devices ("ICI", "NVLink"; FamilyInfo.interconnect); the
    time column only where the chip has their figures (``a.chip``)."""
    shown = a.collectives if top <= 0 else a.collectives[:top]
    mesh = ",".join(f"{k}={v}" for k, v in a.mesh.items()) if a.mesh else "no mesh"
    timed = f"{link} time on {a.chip}" if a.chip else f"no time: no {link or 'interconnect'} figures"
    table = Table(title=f"collectives in schedule order (per device; mesh {mesh}; {timed})",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("#", justify="right", no_wrap=True)
    time_column = f"{link} time" if a.chip else None
    for col in ("kind", "name", "shape", "bytes", "axes", "group", time_column, "overlap", "source"):
        if col is not None:
            table.add_column(col, justify="right" if col in ("bytes", "group", time_column) else "left", overflow="fold")
    for i, c in enumerate(shown):
        overlap = (Text(f"yes ({c.overlapped_kernels} kernels)", style="green") if c.overlaps
                   else Text("async, nothing between" if c.asynchronous else "no (sync)", style="yellow"))
        add_row(table, str(i), c.kind, c.name + (f" x{c.repeat}" if c.repeat > 1 else "") + (f" in {c.fusion}" if c.fusion else ""),
                c.shape, fmt_bytes(c.bytes), _axes(c.axes), str(c.group_size), *([fmt_time(c.time_s)] if time_column else []),
                overlap, (c.source or "-").rsplit("/", 1)[-1])
    if len(shown) < len(a.collectives):
        table.caption = f"{len(a.collectives) - len(shown)} more: --top 0 shows all"
        table.caption_justify = "left"
    return table


def totals_table(title: str, rows: dict[str, dict], time_column: str | None = "ICI time") -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("", "count", "bytes", time_column):
        if col is not None:
            table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for key, row in sorted(rows.items(), key=lambda kv: -kv[1]["bytes"]):
        add_row(table, key, str(row["count"]), fmt_bytes(row["bytes"]), *([fmt_time(row["time_s"])] if time_column else []))
    return table


def remote_dma_lines(kernels) -> list[str]:
    """What Pallas kernels move between devices themselves (remote DMAs: a ring all-gather, an
    all-to-all), which XLA's collectives do not show: per kernel, its remote copies per grid step."""
    lines = []
    for k in kernels or []:
        remote = [d for d in k.call.dmas if d.remote]
        if not remote:
            continue
        count = sum(d.per_step[1] for d in remote)
        per_step = sum(d.per_step[1] * d.bytes for d in remote)
        steps = k.call.steps
        total = f", {fmt_bytes(per_step * steps)} per call over {steps} steps" if steps is not None and steps > 1 else ""
        lines.append(f"{k.call.name}: up to {count:g} remote DMA{'s' if count != 1 else ''}, {fmt_bytes(per_step)} per device "
                     f"per grid step{total} (--view pallas lists them)")
    return lines


def collectives_view(a: CollectiveAnalysis | None, top: int = 40, reason: str = "not compiled",
                     remote: list[str] | None = None, link: str | None = "ICI") -> Group | Text:
    """``remote``: remote_dma_lines of the program's Pallas kernels (device-to-device traffic no
    XLA collective shows); ``link``: the family's links between devices (FamilyInfo.interconnect)."""
    pallas = (Text("Pallas kernels move data between devices themselves (remote DMAs; not in XLA's collectives):\n  "
                   + "\n  ".join(remote)) if remote else None)
    if a is None:
        return Group(Text(f"no collectives: {reason}"), pallas) if pallas else Text(f"no collectives: {reason}")
    if not a.collectives:
        if pallas:
            return Group(Text("no XLA collectives"), pallas)
        return Text("no collectives: the compiled program moves nothing between devices"
                    + ("" if a.mesh else " (a sharded program needs a topology and a mesh: --target tpu-v5e:4x4 --mesh data=4,model=4)"))
    summary = (f"{sum(r['count'] for r in a.by_kind.values())} collectives, {fmt_bytes(a.total_bytes)} per device"
               + (f", {link} {fmt_time(a.total_time_s)} estimated, {fmt_time(a.exposed_time_s)} of it not overlapped"
                  if a.total_time_s is not None else ""))
    time_column = f"{link} time" if a.chip else None
    note = (f"{link} time: an estimate (ring over each axis, both link directions, no latency); see --json" if a.chip else
            f"no time estimate: the chip table has no {link or 'interconnect'} figures for the target; the bytes per "
            "device are XLA's; see --json")
    return Group(collectives_table(a, top, link), Text(summary, style="bold"), Text(""),
                 totals_table("by kind", a.by_kind, time_column), totals_table("by mesh axis", a.by_axis, time_column),
                 Text(note, style="dim"), *([pallas] if pallas else []))
