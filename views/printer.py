"""Rich printers for `inspector show` and `inspector chips`: colour on a terminal, plain in a pipe."""
from __future__ import annotations

import json
import os
import sys

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..chips import CHIPS, Chip
from ..report import Report
from ..units import fmt_bytes, fmt_count, fmt_time

from .cells import add_row, findings_table
from .fusions import fusions_view
from .highlight import THEME, IrHighlighter
from .pallas import pallas_view

def make_console(file=None) -> Console:
    """Colour on a terminal; in a pipe, plain and wide (tables are for files and grep, not 80 columns)."""
    file = file or sys.stdout
    width = None if file.isatty() or os.environ.get("COLUMNS") else 140
    return Console(file=file, theme=THEME, highlight=False, soft_wrap=True, width=width)


def _kv_table(rows: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        add_row(table, key, value)
    return table


def _top_ops(counts: dict[str, int], n: int = 6) -> str:
    total = sum(counts.values())
    top = ", ".join(f"{op} {c}" for op, c in list(counts.items())[:n])
    return f"{total} ops ({top}{', ...' if len(counts) > n else ''})"


def _inputs_line(report: Report, limit: int = 6) -> str:
    inputs = report.inputs
    if len(inputs) <= limit:
        return "  ".join(f"{i.name}: {i.type}" for i in inputs) or "-"
    groups: dict[str, list] = {}
    for i in inputs:
        groups.setdefault(i.name.split("[", 1)[0], []).append(i)
    return "  ".join(f"{name}: {len(g)} arrays, {fmt_bytes(sum(i.bytes for i in g))}" if len(g) > 1 else f"{name}: {g[0].type}"
                     for name, g in groups.items())


def _cost_line(cost: dict | None) -> str:
    if not cost or "flops" not in cost:
        return "not reported (XLA has no cost for a Pallas custom call without a pl.CostEstimate)"
    return (f"flops {fmt_count(cost.get('flops'))}, transcendentals {fmt_count(cost.get('transcendentals'))}, "
            f"bytes accessed {fmt_bytes(cost.get('bytes accessed'))}")


def overview(report: Report, timings: bool = True, findings: bool = True):
    t, s = report.target, report.stages
    params = ", ".join(f"{k}={v!r}" for k, v in t.params.items()) or "-"
    where = f"{t.file}:{t.line}" if t.file else "-"
    rows = [
        ("function", f"{t.function}  ({where})"),
        ("inputs", _inputs_line(report)),
        ("params", params),
        ("reference", t.reference or "-"),
        ("target", f"{report.chip.name}: {report.chip.description}"
                   + (f", compiled by libtpu for a '{s.device_kind}' without a TPU" if report.chip.is_tpu else "")),
    ]
    for stage, counts in s.op_counts.items():
        rows.append((f"{stage} ops", _top_ops(counts)))
    if s.hlo is not None:
        rows.append(("XLA cost", _cost_line(s.cost)))
    if s.memory:
        m = s.memory
        rows.append(("XLA memory", f"arguments {fmt_bytes(m.get('argument_size_in_bytes'))}, outputs "
                                   f"{fmt_bytes(m.get('output_size_in_bytes'))}, temporaries {fmt_bytes(m.get('temp_size_in_bytes'))}, "
                                   f"aliased {fmt_bytes(m.get('alias_size_in_bytes'))}"))
    if report.fusions:
        a = report.fusions
        bound = sum(1 for k in a.kernels if k.bound == "memory")
        roof = (f", roofline {fmt_time(a.totals['roofline_s'])} on {a.chip} ({bound} of {len(a.kernels)} memory-bound)"
                if a.totals.get("roofline_s") else " (roofline: --roofline CHIP)")
        rows.append(("kernels", f"{len(a.kernels)} launched, HBM traffic {fmt_bytes(a.totals['hbm_bytes'])}{roof}"))
        top = a.intermediates[0] if a.intermediates else None
        if top is not None:
            where = "HBM" if top.memory_space == 0 else "VMEM"
            rows.append(("largest intermediate", f"{top.shape} {fmt_bytes(top.bytes)} in {where}, made at {top.source or top.producer} "
                                                 "(--view fusions)"))
    if s.mosaic:
        rows.append(("pallas kernels", ", ".join(f"{k.name} ({k.source})" for k in s.mosaic)))
    if timings:
        timing = ", ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in s.timings.items())
        rows.append(("time", timing + (" (compile from cache)" if s.compile_cached else "")))
    parts = [_kv_table(rows)]
    if findings:  # the TUI lists the findings in a table of its own
        parts += ([Text("\nfindings", style="bold"), findings_table(report.findings)] if report.findings
                  else [Text("\nno findings", style="green")])
    return Panel(Group(*parts), title=Text.assemble((t.spec, "bold"), f" on {report.chip.name}"), expand=False)


def stage_text(report: Report, view: str) -> str:
    s = report.stages
    if view == "hlo":
        if s.hlo is None:
            reason = s.compile_error.headline if s.compile_error else "not compiled"
            return f"// no optimized HLO: {reason}\n"
        return s.hlo
    if view == "mosaic":
        if not s.mosaic:
            why = ("this target is not a TPU: Mosaic runs only when lowering for a TPU (try --target tpu-v5e)"
                   if not report.chip.is_tpu else "the function has no pallas_call")
            return f"// no Mosaic kernels: {why}\n"
        return "\n".join(f"// ===== {k.name}  ({k.source})\n{k.mlir}" for k in s.mosaic)
    return getattr(s, view)


def print_view(report: Report, view: str, console: Console, sort: str = "order", top: int = 40) -> None:
    if view == "overview":
        console.print(overview(report), soft_wrap=False)
        return
    if view == "pallas":
        console.print(pallas_view(report.pallas or []), soft_wrap=False)
        return
    if view == "fusions":
        if report.fusions is None:
            reason = report.stages.compile_error.headline if report.stages.compile_error else "not compiled"
            console.print(f"no kernels: {reason}", soft_wrap=False)
        else:
            console.print(fusions_view(report.fusions, sort, top), soft_wrap=False)
        return
    text = stage_text(report, view)
    if console.is_terminal and not console.no_color:
        console.print(IrHighlighter()(Text(text)))
    else:  # plain and fast for pipes: no markup, no wrapping
        console.file.write(text if text.endswith("\n") else text + "\n")


def print_json(data, console: Console) -> None:
    console.file.write(json.dumps(data, indent=2, default=str) + "\n")


def chip_rows(chips: tuple[Chip, ...] = CHIPS) -> list[dict]:
    return [{k: v for k, v in vars(c).items()} for c in chips]


def chips_table(chips: tuple[Chip, ...] = CHIPS) -> Table:
    table = Table(title="targets for --target (figures per chip; VMEM per TensorCore)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1),
                  caption="aliases: " + "; ".join(f"{c.name} = {', '.join(c.aliases)}" for c in chips if c.aliases),
                  caption_justify="left")
    for col in ("target", "TCs", "VMEM", "scoped", "SMEM*", "HBM", "GB/s", "TFLOP/s", "MXU"):
        table.add_column(col, justify="left" if col == "target" else "right", no_wrap=True)
    for c in chips:
        add_row(table, 
            c.name, str(c.tensor_cores or "-"), fmt_bytes(c.vmem_bytes), fmt_bytes(c.scoped_vmem_bytes),
            fmt_bytes(c.smem_bytes or c.shared_mem_per_block),
            f"{c.hbm_bytes / 2**30:.0f} GiB" if c.hbm_bytes else "-", f"{c.hbm_bytes_per_s / 1e9:.0f}" if c.hbm_bytes_per_s else "-",
            f"{c.bf16_flops / 1e12:.0f}" if c.bf16_flops else "-", str(c.mxu or "-"),
        )
    table.caption += "\n*SMEM on TPUs, opt-in shared memory per block on GPUs; TFLOP/s is dense bf16; sources: inspector chips --json"
    return table
