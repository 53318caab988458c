"""The fusions view: kernels with HBM traffic and roofline, totals against XLA, intermediates."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from rich import box
from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes, fmt_count, fmt_estimate, fmt_time

from .cells import add_row

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..hlo.fusions import FusionAnalysis
    from ..hlo.kernel import Kernel

SORT_KEYS = {
    "order": None,
    "bytes": lambda k: -k.hbm_bytes * k.repeat,
    "flops": lambda k: -k.flops * k.repeat,
    # libtpu's estimate where --time gave one, else the roofline
    "time": lambda k: -(k.estimated_seconds if k.estimated_seconds is not None else k.roofline_s or 0) * k.repeat,
}
ESTIMATE_MARK = {"libtpu": "", "libtpu-extrapolated": " ~", "bundles": " b", "roofline": " r"}
VECTOR_BOUNDS = ("VPU", "EUP", "XLU")  # hlo.fusions.VECTOR_UNITS (not imported: the UI paints before the analyses load)
BOUND_STYLE: dict[str | None, str] = {"memory": "yellow", "compute": "cyan", **dict.fromkeys(VECTOR_BOUNDS, "magenta")}


def _short_source(k: Kernel) -> str:
    src = k.source or (k.sources[0] if k.sources else "")
    return src.rsplit("/", 1)[-1] + (f" +{len(k.sources) - 1}" if len(k.sources) > 1 else "")


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of the kernels table, declared once for the printer and the TUI."""

    label: str
    cell: Callable[[Kernel], str | Text]
    justify: JustifyMethod = "right"


KERNEL_COLUMNS = (
    Column("kernel", lambda k: k.name + (f" x{k.repeat}" if k.repeat > 1 else ""), "left"),
    Column("kind", lambda k: k.kind.replace("custom-call:", "cc:"), "left"),
    Column("source", _short_source, "left"),
    Column("HBM r+w", lambda k: fmt_bytes(k.hbm_bytes)),
    Column("flops", lambda k: fmt_count(k.flops)),
    Column("flop/B", lambda k: f"{k.intensity:.1f}" if k.intensity is not None else "-"),
    Column("time", lambda k: fmt_time(k.roofline_s)),
    Column("bound", lambda k: Text(k.bound or "-", style=BOUND_STYLE.get(k.bound, "")), "left"),
    Column("XLA cycles", lambda k: fmt_count(k.compiler_cycles)),
)


GROUP_COLUMN = Column("group", lambda k: k.group or "-", "left")  # FusionAnalysis.groups: a layer's forward, a loop's i-th run
MADE_BY_COLUMN = Column("made by pass", lambda k: (k.made_by or "-").split(" (", 1)[0], "left")
ESTIMATE_COLUMN = Column("est. time", lambda k: fmt_estimate(k.estimated_seconds, k.estimate_kind, k.high_seconds)
                         + ESTIMATE_MARK.get(k.estimate_source or "", ""))
MEASURED_COLUMN = Column("measured", lambda k: fmt_time(k.measured_seconds))
RATIO_COLUMN = Column("est./meas.", lambda k: f"{k.estimated_seconds / k.measured_seconds:.2f}x"
                      if k.estimated_seconds and k.measured_seconds else "-")


def table_columns(analysis: FusionAnalysis) -> list[Column]:
    """The kernels table's columns for this analysis, the printer's and the TUI's: the group where
    there are several, the pass that made each kernel (compiled with pass dumps), libtpu's estimate
    (--time) and the chip's time (--measure) where the analysis has them."""
    columns = list(KERNEL_COLUMNS)
    if len(analysis.groups) > 1:  # the grouping the kernel graph and compare use, beside the source line
        columns.insert(next(i for i, c in enumerate(columns) if c.label == "source") + 1, GROUP_COLUMN)
    if any(k.made_by for k in analysis.kernels):
        columns.append(MADE_BY_COLUMN)
    if any(k.estimate_source for k in analysis.kernels):
        columns.append(ESTIMATE_COLUMN)
    if analysis.totals.get("measured_seconds") is not None:
        columns.append(MEASURED_COLUMN)
        if ESTIMATE_COLUMN in columns:  # how far libtpu's estimate is from the chip, kernel by kernel
            columns.append(RATIO_COLUMN)
    return columns


def kernels_table(analysis: FusionAnalysis, sort: str = "order", top: int = 40) -> Table:
    kernels = list(analysis.kernels)
    if sort_key := SORT_KEYS.get(sort):
        kernels.sort(key=sort_key)
    shown = kernels if top <= 0 else kernels[:top]
    roofline = (f"roofline on {analysis.chip}" if analysis.chip else
                "no roofline time (this target has no bandwidth figures; --roofline CHIP borrows a chip's)")
    table = Table(title=f"kernels {'in schedule order' if sort == 'order' else f'by {sort}'}; {roofline}",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("#", justify="right", no_wrap=True)
    columns = table_columns(analysis)
    for col in columns:
        if col.label in ("kernel", "made by pass"):
            table.add_column(col.label, min_width=14 if col.label == "kernel" else None, ratio=1 if col.label == "kernel" else None,
                             overflow="fold")
        elif col.label == "group":
            table.add_column(col.label, no_wrap=True, overflow="ellipsis", max_width=40)
        else:
            table.add_column(col.label, justify=col.justify, no_wrap=True)
    labels = {c.label for c in columns}
    timed, measured = ESTIMATE_COLUMN.label in labels, MEASURED_COLUMN.label in labels
    order = {id(k): i for i, k in enumerate(analysis.kernels)}
    for k in shown:
        add_row(table, str(order[id(k)]), *(col.cell(k) for col in columns))
    notes = []
    if len(shown) < len(kernels):
        notes.append(f"{len(kernels) - len(shown)} more kernels: --top 0 shows all, --sort bytes|flops|time ranks them")
    if any(k.bound in VECTOR_BOUNDS for k in shown):
        notes.append("bound: the unit the roofline's time is for: memory (HBM), compute (the MXU), or for a Pallas kernel "
                     "its VPU (VALU), EUP (transcendentals) or XLU (across the lanes) work, counted from the kernel body")
    if timed and not {k.estimate_source for k in shown} & {"libtpu", "libtpu-extrapolated"}:  # nothing simulated
        notes.append("est. time: a floor (>=), nothing simulated the kernels: r its bytes and flops at the chip's peaks "
                     "(the findings say how); time: the roofline bound")
    elif timed:
        notes.append("est. time: libtpu's static simulation of the compiled kernel (~ extrapolated from smaller grids); "
                     ">= a floor where libtpu gave none (r the roofline, b the bundles the kernel issues; XLA cycles: "
                     "the compiler's own estimate, no bound), a-b a range; time: the roofline bound")
    if measured:
        notes.append("measured: device time of one launch on the attached TPU (jax's profiler; - where the chip ran no op "
                     "of that name)")
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    return table


def totals_table(analysis: FusionAnalysis) -> Table:
    t, xla, agree = analysis.totals, analysis.xla_cost or {}, analysis.agreement
    table = Table(title="totals against XLA's cost analysis", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("", "estimate", "XLA", "ratio"):
        table.add_column(col, justify="left" if not col else "right")
    ratio = lambda r: f"{r:.3f}" if r is not None else "-"
    once = agree.get("loop_bodies_once")  # XLA counts a loop body once: so are the figures compared
    label = (lambda what: f"{what}, loop bodies once") if once else (lambda what: what)
    add_row(table, label("flops"), fmt_count(agree.get("flops_compared", t["flops"])), fmt_count(xla.get("flops")),
            ratio(agree.get("flops_ratio")))
    add_row(table, label("bytes accessed"), fmt_bytes(agree.get("bytes_compared", t["bytes"])),
            fmt_bytes(xla.get("bytes accessed")), ratio(agree.get("bytes_ratio")))
    add_row(table, label("transcendentals"), fmt_count(agree.get("transcendentals_compared", t["transcendentals"])),
            fmt_count(xla.get("transcendentals")), "")
    if once:
        add_row(table, "flops, every trip", fmt_count(t["flops"]), "", "")
        add_row(table, "bytes accessed, every trip", fmt_bytes(t["bytes"]), "", "")
    add_row(table, "HBM traffic", fmt_bytes(t["hbm_bytes"]), "", "")
    add_row(table, "roofline time", fmt_time(t["roofline_s"]), "", "")
    if t.get("estimated_seconds") is not None:
        sources = sorted({k.estimate_source for k in analysis.kernels if k.estimate_source is not None})
        add_row(table, f"estimated time ({', '.join(sources) or 'libtpu'})",
                fmt_estimate(t["estimated_seconds"], t.get("estimate_kind"), t.get("high_seconds")), "", "")
        if t.get("floor_share"):
            add_row(table, "  of it, floors", f"{t['floor_share']:.0%}", "", "")
    if t.get("measured_seconds") is not None:
        add_row(table, "measured time (on the chip)", fmt_time(t["measured_seconds"]), "", "")
    return table


def intermediates_table(analysis: FusionAnalysis) -> Table | Text:
    if not analysis.intermediates:
        return Text("no buffer passes from one kernel to another", style="green")
    table = Table(title="materialized intermediates (written by one kernel, read by another)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("shape", "bytes", "in", "made by", "source", "read by"):
        table.add_column(col, justify="right" if col == "bytes" else "left", overflow="fold")
    for i in analysis.intermediates:
        where = Text("HBM", style="bold yellow") if i.memory_space == 0 else Text("VMEM" if i.memory_space == 1 else f"S({i.memory_space})", style="dim")
        add_row(table, i.shape, fmt_bytes(i.bytes), where, i.producer, (i.source or "-").rsplit("/", 1)[-1],
                      ", ".join(i.consumers[:4]) + (f" +{len(i.consumers) - 4}" if len(i.consumers) > 4 else ""))
    return table


def fusions_view(analysis: FusionAnalysis, sort: str = "order", top: int = 40) -> Group:
    notes = sorted({k.note for k in analysis.kernels if k.note})
    parts: list[RenderableType] = [kernels_table(analysis, sort, top), totals_table(analysis),
             Text(analysis.agreement.get("note") or "", style="dim"), Text(""), intermediates_table(analysis)]
    parts += [Text(f"note: {n}", style="dim") for n in notes]
    return Group(*parts)
