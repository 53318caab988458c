"""Rich printers for `inspector show` and `inspector chips`: colour on a terminal, plain in a pipe."""
from __future__ import annotations

import dataclasses
import errno
import importlib
import os
import sys
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..base import json_text
from ..base.chips import CHIPS, Chip
from ..results.view_table import get_view
from ..base.units import fmt_estimate, fmt_bytes, fmt_count, fmt_time

from .cells import add_row, findings_table
from .fusions import fusions_view
from .highlight import THEME, IrHighlighter
from .collectives import collectives_view, remote_dma_lines
from .memory import memory_view
from .mosaic_passes import mosaic_passes_view
from .pallas import errors_outside, gpu_kernels_table, pallas_view, unread_calls
from .passes import diff_text, passes_view

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..results.report import Report

ASK_BUFFERS = "press B to compile with the compiler's buffer assignment: the largest buffers live at the peak"
MIN_WIDTH = 40  # narrower than this, tables cannot show their figures whole


def console_width(file) -> int:
    """COLUMNS when it is a positive number (``COLUMNS=0`` or junk count as unset), else the
    terminal's width, else 140 in a pipe (tables are for files and grep, not 80 columns); never
    under MIN_WIDTH, where tables would have to cut their figures."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        columns = 140
        try:
            if file.isatty():
                columns = os.get_terminal_size(file.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            pass
    return max(columns, MIN_WIDTH)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich's own answer is SystemExit(1) with no message; the CLI says what happened."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def make_console(file=None) -> Console:
    """Colour on a terminal; in a pipe, plain and wide. The width is always given, so rich never
    reads a COLUMNS of 0 (which would print nothing)."""
    file = file or sys.stdout
    return _Console(file=file, theme=THEME, highlight=False, soft_wrap=True, width=console_width(file))


def _whole_words(renderable) -> None:
    """Every table inside (a view's own, in a group or a panel): a column is never narrower than
    its longest word (its longest line, where it may not wrap), and a cell too long wraps onto
    more lines instead of ending in "…"."""
    if isinstance(renderable, Table):
        for column in renderable.columns:
            cells = [column.header, *column.cells]
            texts = [c.plain if isinstance(c, Text) else Text.from_markup(c).plain if isinstance(c, str) else "" for c in cells]
            pieces = [line for t in texts for line in t.splitlines()] if column.no_wrap else [w for t in texts for w in t.split()]
            longest = max((cell_len(p) for p in pieces), default=0)
            column.min_width = max(column.min_width or 0, longest)
            if column.overflow == "ellipsis":
                column.overflow = "fold"
            for cell in column.cells:
                _whole_words(cell)
    for child in getattr(renderable, "renderables", None) or ():  # Group
        _whole_words(child)
    inner = getattr(renderable, "renderable", None)  # Panel, Padding
    if inner is not None:
        _whole_words(inner)


def _min_width(console: Console, renderable) -> int:
    """The narrowest width that shows every table inside whole (a panel measures no wider than
    the console, so panels and groups are walked, not measured)."""
    from rich.measure import Measurement

    if isinstance(renderable, Panel):
        return _min_width(console, renderable.renderable) + 4  # borders and padding
    children = getattr(renderable, "renderables", None)  # Group
    if children is not None:
        return max((_min_width(console, c) for c in children), default=0)
    if isinstance(renderable, (str, Text)):
        return 0  # text wraps at any width
    return Measurement.get(console, console.options.update_width(10_000), renderable).minimum


def print_fitting(console: Console, renderable) -> None:
    """Print a table (or a panel of them) no narrower than its narrowest complete rendering: on
    a narrow terminal a figure wraps at a space or the line runs past the edge, but it is never
    cut to "25…" or dropped with its column. (rich lays a table out wider than the console when
    its columns' minimum widths ask for it, and the console would then crop the lines.)"""
    from rich.segment import Segment, Segments

    _whole_words(renderable)
    width = console.width
    needed = max(width, _min_width(console, renderable))
    try:
        for _ in range(4):  # a wider layout may need a little more again (a wrapped title)
            console.width = needed  # print(width=) cannot go past the console's own width
            # laid out as print would (its options at this width), and printed as laid out: a
            # large table (the fusions of a big program) is not laid out once more to print it
            segments = list(console.render(renderable, console.options))
            longest = max((Segment.get_line_length(line) for line in Segment.split_lines(segments)), default=0)
            if longest <= needed:
                break
            needed = longest
        else:  # still wider: print at the last width asked for, cropped to it
            console.width = needed
            segments = list(console.render(renderable, console.options))
        if not console.is_terminal:  # a file or a pipe: no line ends in the table's padding
            segments = _without_trailing_spaces(segments)
        console.print(Segments(segments), soft_wrap=False)
    finally:
        console.width = width


def _without_trailing_spaces(segments: list) -> list:
    """The lines of ``segments`` with the blanks at their ends dropped (rich pads every cell and
    line to the table's width: grep, diff and editors see a space at every end of line)."""
    from rich.segment import Segment

    out = []
    for line in Segment.split_lines(segments):
        while line and not line[-1].control and not line[-1].text.rstrip(" "):
            line.pop()
        if line and not line[-1].control:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(" "), last.style)
        out += [*line, Segment.line()]
    return out


def _kv_table(rows: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)  # short labels: only the values wrap
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


def _cost_line(cost: dict | None, has_pallas: bool) -> str:
    if not cost or "flops" not in cost:
        why = "XLA has no cost for a Pallas custom call without a pl.CostEstimate" if has_pallas else "XLA reported none"
        return f"not reported ({why})"
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
                   + (f", compiled by {report.family.compiler} for a '{s.device_kind}' without a {report.family.name.upper()}"
                      if report.family.can.compile else "")
                   + (f" ({report.chip_reason})" if report.chip_reason else "")),
    ]
    for stage, counts in s.op_counts.items():
        rows.append((f"{stage} ops", _top_ops(counts)))
    if s.hlo is not None:
        has_pallas = any(e.primitive == "pallas_call" for e in s.jaxpr_eqns)
        rows.append(("XLA cost", _cost_line(s.cost, has_pallas)))
    if s.memory:
        m = s.memory
        rows.append(("XLA memory", f"arguments {fmt_bytes(m.get('argument_size_in_bytes'))}, outputs "
                                   f"{fmt_bytes(m.get('output_size_in_bytes'))}, temporaries {fmt_bytes(m.get('temp_size_in_bytes'))}, "
                                   f"aliased {fmt_bytes(m.get('alias_size_in_bytes'))}"))
    if s.mesh:
        rows.append(("mesh", ",".join(f"{k}={v}" for k, v in s.mesh.items()) + f" ({s.devices} devices; figures per device)"))
    if report.memory is not None and report.memory.fits is not None:
        memory = report.memory
        rows.append(("HBM per device", f"{fmt_bytes(memory.required_bytes)} of {fmt_bytes(memory.hbm_capacity_bytes)}: "
                                       + ("fits" if memory.fits else "does NOT fit") + " (--view memory)"))
    if report.collectives is not None and report.collectives.collectives:
        c = report.collectives
        rows.append(("collectives", f"{sum(r['count'] for r in c.by_kind.values())}, {fmt_bytes(c.total_bytes)} per device"
                                    + (f", ICI {fmt_time(c.total_time_s)} estimated" if c.total_time_s is not None else "")
                                    + " (--view collectives)"))
    if report.fusions:
        a = report.fusions
        bound = sum(1 for k in a.kernels if k.bound == "memory")
        roof = (f", roofline {fmt_time(a.totals['roofline_s'])} on {a.chip} ({bound} of {len(a.kernels)} memory-bound)"
                if a.totals.get("roofline_s") else " (roofline: --roofline CHIP)")
        rows.append(("kernels", f"{len(a.kernels)} launched, HBM traffic {fmt_bytes(a.totals['hbm_bytes'])}{roof}"))
        if report.time is not None:
            rows.append(("estimated time", _estimate_line(report)))
        if report.measured is not None:
            rows.append(("measured time", measured_line(report)))
        top = a.intermediates[0] if a.intermediates else None
        if top is not None:
            where = "HBM" if top.memory_space == 0 else "VMEM"
            rows.append(("largest intermediate", f"{top.shape} {fmt_bytes(top.bytes)} in {where}, made at {top.source or top.producer} "
                                                 "(--view fusions)"))
    if s.mosaic:
        rows.append(("pallas kernels", ", ".join(f"{k.name} ({k.source})" for k in s.mosaic)))
    if timings:
        # this run's steps (compiler_s: what the compiler took when this module was first compiled, maybe from the cache)
        timing = ", ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in s.timings.items() if k != "compiler_s")
        rows.append(("time", timing + (" (compile from cache)" if s.compile_cached else "")))
    parts: list[RenderableType] = [_kv_table(rows)]
    if findings:  # the TUI lists the findings in a table of its own
        parts += ([Text("\nfindings", style="bold"), findings_table(report.findings, _fixes_of(report))] if report.findings
                  else [Text("\nno findings", style="green")])
    return Panel(Group(*parts), title=Text.assemble((t.spec, "bold"), f" on {report.chip.name}"), expand=False)


def _fixes_of(report: Report):
    """The fix lines under each finding, where fixes were asked for (show --fixes)."""
    if report.fixes is None:
        return None
    from .fix import fix_lines

    fixes = report.fixes
    return lambda finding: fix_lines(finding, fixes)


def measured_line(report: Report) -> str:
    """The program's device time on the chip, against the estimate and the roofline (--measure)."""
    m = report.measured
    assert m is not None and report.fusions is not None  # called only when the report has one (overview)
    totals = report.fusions.totals
    against = [f"{name} {fmt_time(value)} ({value / m.seconds:.2f}x)"
               for name, value in (("estimate", totals.get("estimated_seconds")), ("roofline", totals.get("roofline_s"))) if value]
    spread = f", runs {fmt_time(m.seconds_min)}-{fmt_time(m.seconds_max)}" if m.seconds_max > 1.05 * m.seconds_min else ""
    slowest = ", ".join(f"{k.name} {fmt_time(k.seconds)}" for k in m.kernels[:3])
    return (f"{fmt_time(m.seconds)} on the attached {m.device_kind} (median of {m.runs} runs{spread}); "
            + (f"{'; '.join(against)}; " if against else "") + f"slowest: {slowest}")


def _estimate_line(report: Report) -> str:
    """libtpu's estimate of the program and its slowest kernels (show --time)."""
    estimate = report.time
    assert estimate is not None  # called only when the report has one (overview)
    total = estimate.totals.get("estimated_seconds")
    if total is None:
        why = next((f.message for f in estimate.findings if f.severity == "info"), "libtpu gave no estimate")
        return f"- ({why})"
    how = {"libtpu": "libtpu's static simulation", "libtpu-extrapolated": "libtpu's simulation, Pallas grids extrapolated",
           "bundles": "floors: the bundles kernels issue",
           "roofline": "roofline: libtpu gave none, or one below it"}.get(estimate.method, estimate.method)
    slowest = ", ".join(f"{k.name} {fmt_estimate((k.estimated_seconds or 0.0) * k.repeat, k.estimate_kind, (k.high_seconds or 0.0) * k.repeat)}"
                        for k in estimate.slowest(3))  # slowest: timed ones only
    t = estimate.totals
    share = t.get("floor_share") or 0.0
    floors = f", {share:.0%} of it floors" if 0 < share < 0.995 else ""
    shown = fmt_estimate(total, t.get("estimate_kind"), t.get("high_seconds"))
    return f"{shown} on {estimate.chip} ({how}{floors}); slowest: {slowest} (--view bundles)"


def stage_text(report: Report, view: str) -> str:
    s = report.stages
    if view == "hlo":
        if s.hlo is None:
            reason = s.compile_error.headline if s.compile_error else "not compiled"
            return f"// no optimized HLO: {reason}\n"
        return s.hlo
    if view == "mosaic":
        if not s.mosaic:
            interpreted = report.pallas is not None and bool(report.pallas) and all(k.call.interpret for k in report.pallas)
            why = ("this target is not a TPU: Mosaic runs only when lowering for a TPU (try --target tpu-v5e)"
                   if not report.family.can.kernel_dumps else
                   f"the lowering failed before Mosaic had a module: {s.compile_error.headline}"
                   if s.compile_error is not None and not interpreted else
                   "its pallas_calls are given interpret=True, so they lower to the interpreter's HLO (--view hlo)"
                   if any(e.primitive == "pallas_call" for e in s.jaxpr_eqns or [])
                   and (report.pallas is None or all(k.call.interpret for k in report.pallas)) else "the function has no pallas_call")
            return f"// no Mosaic kernels: {why}\n"
        return "\n".join(f"// ===== {k.name}  ({k.source})\n{k.mlir}" for k in s.mosaic)
    if view == "stablehlo" and not (s.stablehlo or "").strip():
        return f"// no StableHLO: {s.compile_error.headline if s.compile_error else 'not lowered'}\n"
    return getattr(s, view)


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """How a view is rendered: the fusions' row order and count, colour (a terminal), and whether
    a person can act on hints (the TUI's keys)."""

    sort: str = "order"
    top: int = 40
    colour: bool = False
    interactive: bool = False


def render_view(report: Report, view: str, options: RenderOptions = RenderOptions()):
    """The view as the table of views names its renderer: a rich renderable, a ``str`` (a stage's
    text, printed as it is), or a list of those, printed one after the other."""
    render = get_view(view).render
    assert render is not None, f"the view {view} has no renderer (a TUI tab of its own)"
    module, function = render.split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)(report, view, options)


def print_view(report: Report, view: str, console: Console, sort: str = "order", top: int = 40) -> None:
    rendered = render_view(report, view, RenderOptions(sort, top, colour=console.is_terminal and not console.no_color))
    for part in rendered if isinstance(rendered, list) else [rendered]:
        if not isinstance(part, str):
            print_fitting(console, part)
        elif console.is_terminal and not console.no_color:
            console.print(IrHighlighter()(Text(part)))
        else:  # plain and fast for pipes: no markup, no wrapping
            console.file.write(part if part.endswith("\n") else part + "\n")


# The renderers the table of views names (report, view, options) -> renderable or str.

def render_overview(report: Report, view: str, options: RenderOptions):
    return overview(report)


def render_stage_text(report: Report, view: str, options: RenderOptions) -> str:
    return stage_text(report, view)


def render_pallas(report: Report, view: str, options: RenderOptions):
    kernels = pallas_view(report.pallas or [], unread_calls(report.findings), errors_outside(report.findings, report.pallas or []))
    return Group(kernels, gpu_kernels_table(report.gpu_kernels, report.chip.name)) if report.gpu_kernels else kernels


def render_memory(report: Report, view: str, options: RenderOptions):
    rendered = memory_view(report.memory, _not_compiled(report))
    if options.interactive and report.memory is not None and not report.memory.largest:
        rendered = Group(rendered, Text(ASK_BUFFERS, style="bold"))
    return rendered


def render_collectives(report: Report, view: str, options: RenderOptions):
    return collectives_view(report.collectives, options.top, _not_compiled(report), remote_dma_lines(report.pallas),
                            report.family.interconnect)


def render_fusions(report: Report, view: str, options: RenderOptions):
    if report.fusions is None:
        return Text(f"no kernels: {_not_compiled(report)}")
    return fusions_view(report.fusions, options.sort, options.top)


def render_mosaic(report: Report, view: str, options: RenderOptions):
    """Mosaic's passes and relayouts where the compile with its dumps ran (a TPU target), then the
    Mosaic MLIR (or why there is none)."""
    if report.mosaic_passes is None:
        return stage_text(report, "mosaic")
    return [render_mosaic_passes(report, view, options), stage_text(report, "mosaic")]


def render_mosaic_passes(report: Report, view: str, options: RenderOptions):
    if report.mosaic_passes is None:
        why = ("this target is not a TPU: Mosaic runs only when lowering for a TPU" if not report.family.can.kernel_dumps
               else "press M to compile with Mosaic's pass dumps" if options.interactive else "not compiled with Mosaic's pass dumps")
        return Text(f"no Mosaic passes: {why}")
    return mosaic_passes_view(report.mosaic_passes, colour=options.colour)


def render_passes(report: Report, view: str, options: RenderOptions):
    """The pass list, or with --pass the diff alone (coloured on a terminal, plain text in a pipe)."""
    log = report.passes
    if log is None or not log.steps:
        reason = report.stages.compile_error.headline if report.stages.compile_error else "the compile wrote no pass dumps"
        return Text(f"no passes: {reason}")
    if log.diff is None:
        if report.stages.compile_error:
            return Group(passes_view(log), Text(f"the compile failed after these steps: "
                                                f"{report.stages.compile_error.headline}", style="red"))
        return passes_view(log)
    text = diff_text(log.diff, colour=options.colour)
    return text if options.colour else text.plain


def _not_compiled(report: Report) -> str:
    return report.stages.compile_error.headline if report.stages.compile_error else "not compiled"


def print_json(data, console: Console) -> None:
    console.file.write(json_text.dumps(data, indent=2) + "\n")


def chip_rows(chips: tuple[Chip, ...] = CHIPS) -> list[dict]:
    return [{k: v for k, v in vars(c).items()} for c in chips]


def chips_table(chips: tuple[Chip, ...] = CHIPS) -> Table:
    table = Table(title="targets for --target (figures per chip; VMEM per TensorCore)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1),
                  caption="aliases: " + "; ".join(f"{c.name} = {', '.join(c.aliases)}" for c in chips if c.aliases),
                  caption_justify="left")
    columns = ("target", "TCs", "VMEM", "scoped", "SMEM*", "HBM", "GB/s", "TFLOP/s", "MXU", "ICI GB/s", "topologies (--target CHIP:SHAPE)")
    rows = [(c.name, str(c.tensor_cores or "-"), fmt_bytes(c.vmem_bytes), fmt_bytes(c.scoped_vmem_bytes),
             fmt_bytes(c.smem_bytes or c.shared_mem_per_block),
             f"{c.hbm_bytes / 2**30:.0f} GiB" if c.hbm_bytes else "-", f"{c.hbm_bytes_per_s / 1e9:.0f}" if c.hbm_bytes_per_s else "-",
             f"{c.bf16_flops / 1e12:.0f}" if c.bf16_flops else "-", str(c.mxu or "-"),
             f"{c.ici_bytes_per_s / 1e9:.0f}" if c.ici_bytes_per_s else "-", " ".join(c.topologies) or "-") for c in chips]
    for i, col in enumerate(columns):
        # On a narrow terminal a figure ("16 MiB") wraps at its space, never inside a word.
        longest_word = max(len(w) for text in (col, *(r[i] for r in rows)) for w in text.split())
        table.add_column(col, justify="left" if col == "target" or col.startswith("topologies") else "right", overflow="fold",
                         min_width=longest_word)
    for row in rows:
        add_row(table, *row)
    assert isinstance(table.caption, str)  # given above
    table.caption += ("\n*SMEM on TPUs, opt-in shared memory per block on GPUs; TFLOP/s is dense bf16; ICI per link, one way; "
                      "topologies: a TPU slice's shapes, a GPU node's GPUs (h100:8); sources: inspector chips --json")
    return table
