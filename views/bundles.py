"""The bundles view: each kernel's final VLIW program as libtpu compiled it (show --view bundles,
the TUI's Bundles tab): bundles per grid step, each unit's use, what bounds it, spills, the source
lines of a Pallas kernel's body, and the first bundles of the listing."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_count, fmt_estimate
from .cells import add_row
from .fusions import ESTIMATE_MARK

if TYPE_CHECKING:
    from ..libtpu import KernelBundles, TimeEstimate
    from ..results.report import Report

UNITS_SHOWN = ("MXU", "VALU", "XLU", "EUP", "VLOAD", "VSTORE", "VLOAD:FILL", "VSTORE:SPILL")


def _table(title: str, *columns: tuple[str, str]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for label, justify in columns:
        table.add_column(label, justify="right" if justify == "r" else "left", overflow="fold")
    return table


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def summary_table(estimate: TimeEstimate) -> Table:
    timed = {k.name: k for k in estimate.kernels}
    table = _table(f"VLIW bundles per kernel on {estimate.chip} (per grid step for a Pallas kernel)",
                   ("kernel", "l"), ("bundles", "r"), ("per step", "r"), ("cycles/step", "r"), ("est. time", "r"),
                   ("bound", "l"), ("spill st/fill", "r"), *((u, "r") for u in UNITS_SHOWN[:5]))
    for b in estimate.bundles:
        t = timed.get(b.kernel)
        add_row(table, b.kernel, fmt_count(b.bundles), fmt_count(b.bundles_per_step), fmt_count(b.cycles_per_step),
                fmt_estimate(t.estimated_seconds, t.estimate_kind, t.high_seconds) + ESTIMATE_MARK.get(t.estimate_source or "", "")
                if t else "-",
                Text(b.bound or "-", style="bold" if b.bound else ""),
                Text(f"{b.spill_stores}/{b.spill_fills}", style="bold red" if b.spill_stores or b.spill_fills else ""),
                *(_share(b.units[u].share) if u in b.units else "-" for u in UNITS_SHOWN[:5]))
    table.caption = ("unit columns: share of the unit's slots used over the bundles (the capacity per bundle is in the "
                     "kernel's units table); bound: the unit the bundles need most, or DMA waits; est. time: libtpu's "
                     "simulation (~ extrapolated); >= a floor where libtpu gave none (r the roofline, "
                     "b the bundles the kernel issues)")
    table.caption_justify = "left"
    return table


def kernel_detail(b: KernelBundles, listing: int) -> Group:
    parts: list[RenderableType] = []
    units = _table(f"{b.kernel}: units over {fmt_count(b.bundles_per_step or b.bundles)} bundles"
                   + (" of a grid step" if b.bundles_per_step else ""),
                   ("unit", "l"), ("slots used", "r"), ("capacity", "r"), ("share", "r"), ("bundles using it", "r"))
    for name, u in sorted(b.units.items(), key=lambda item: -item[1].share):
        add_row(units, name, fmt_count(u.used), str(u.capacity), _share(u.share), fmt_count(u.busy))
    parts.append(units)
    if b.lines:
        lines = _table(f"{b.kernel}: per source line of the kernel body (a grid step's bundles)",
                       ("source", "l"), ("bundles", "r"), ("share", "r"), ("MXU ops", "r"), ("spills", "r"))
        for line in b.lines:
            add_row(lines, line.source, fmt_count(line.bundles), _share(line.share), fmt_count(line.mxu_ops),
                    Text(fmt_count(line.spills), style="bold red" if line.spills else ""))
        parts.append(lines)
    if b.spilled_lines:
        parts.append(Text(f"spilled values come from: {', '.join(b.spilled_lines[:6])}", style="red"))
    if listing and b.listing:
        rows = _table(f"{b.kernel}: the first {min(listing, len(b.listing))} of {fmt_count(b.bundles)} bundles "
                      "(--json has the listing; --top N shows more)", ("#", "r"), ("loop", "r"), ("ops", "l"), ("source", "l"))
        for row in b.listing[:listing]:
            add_row(rows, str(row.index), str(row.depth) if row.depth else "", row.ops, ", ".join(row.sources))
        parts.append(rows)
    return Group(*parts)


def bundles_view(estimate: TimeEstimate, listing: int = 40) -> Group:
    if not estimate.bundles:
        why = next((f.message for f in estimate.findings), "libtpu wrote no bundles for this program")
        return Group(Text(f"no bundles: {why}", style="yellow"))
    parts: list[RenderableType] = [summary_table(estimate)]
    pallas = [b for b in estimate.bundles if b.kind.startswith("custom-call")]
    for b in pallas or estimate.bundles[:1]:
        parts += [Text(""), kernel_detail(b, listing)]
    return Group(*parts)


def render_bundles(report: Report, view: str, options) -> RenderableType:
    if not report.chip.is_tpu:
        return Text(f"no bundles on {report.chip.name}: VLIW bundles and libtpu's time estimate are for TPU targets "
                    "(try --target tpu-v5e); the fusions view has the roofline")
    if report.time is None:
        hint = "press T" if options.interactive else "show --time or --view bundles"
        return Text(f"no bundles yet: {hint} estimates time with libtpu (compiles of its own)")
    return bundles_view(report.time, options.top)
