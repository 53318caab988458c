"""HTML for Jupyter's rich display: the same rich views the terminal shows, recorded by a
``Console(record=True)`` and exported with inline styles, plus the kernel graph as inline SVG
where Graphviz's ``dot`` is there. ``Report._repr_html_`` and the other results' go through
``inspector.display``, which imports this module only when a notebook displays them, so the core never loads rich."""
from __future__ import annotations

import html
import io
import re

from rich.console import Console

from typing import TYPE_CHECKING, Any, Callable

from ..base.errors import InspectorError
from .collectives import collectives_view, remote_dma_lines
from .compare import compare_view
from .diff import diff_view
from .fusions import fusions_view
from .highlight import THEME
from .memory import memory_view
from .pallas import check_view, pallas_view
from .printer import overview

if TYPE_CHECKING:  # the result types call in through inspector.display; views never import them back
    from ..verbs.comparison import Compare
    from ..verbs.checking import CheckResult
    from ..results.report import Report
    from ..run.result import DiffResult

WIDTH = 140  # columns: the width `show` uses in a pipe
INLINE_GRAPH_NODES = 200  # past this the graph is collapsed by scope, as `inspector export` does
GRAPH_TIMEOUT_S = 30.0  # a notebook cell should not wait minutes on dot

_PRE = ('<pre style="font-family: Menlo, \'DejaVu Sans Mono\', Consolas, \'Courier New\', monospace; font-size: 12px; '
        'line-height: 1.3; white-space: pre; overflow-x: auto; color: #1f2328; background: #ffffff; padding: 6px">'
        "{code}</pre>")


def render(*renderables, width: int = WIDTH) -> str:
    """Rich renderables as one <pre> block with inline styles (no <html> wrapper, no stylesheet)."""
    console = Console(record=True, file=io.StringIO(), width=width, theme=THEME, highlight=False, color_system="truecolor",
                      force_terminal=True, soft_wrap=False)
    for r in renderables:
        console.print(r)
    return console.export_html(inline_styles=True, code_format=_PRE)


def _section(title: str, body: str, open_: bool = True) -> str:
    return (f'<details{" open" if open_ else ""} style="margin: 4px 0"><summary style="font-weight: bold; cursor: pointer">'
            f"{html.escape(title)}</summary>{body}</details>")


def _note(text: str) -> str:
    return f'<p style="color: #57606a; margin: 4px 0">{html.escape(text)}</p>'


def graph_html(report: Report) -> str:
    """The kernel graph inline (the SVG without its XML prologue), or one line saying why not."""
    from ..hlo.graph import dot_available, render_svg

    if report.fusions is None:
        return _note("no kernel graph: " + (report.stages.compile_error.headline if report.stages.compile_error
                                            else "not compiled"))
    if not dot_available():
        return _note("the kernel graph needs Graphviz's dot (apt-get install graphviz); report.kernel_graph() gives its DOT source")
    try:
        graph, summary = report.kernel_graph(max_nodes=INLINE_GRAPH_NODES)
        svg = render_svg(graph, summary.nodes, timeout_s=GRAPH_TIMEOUT_S).decode()
    except InspectorError as err:
        return _note(f"no kernel graph: {err}")
    svg = svg[svg.find("<svg"):] if "<svg" in svg else svg
    return f'<div style="overflow: auto; max-height: 800px">{svg}</div>'


def report_html(report: Report) -> str:
    parts = [render(overview(report))]
    if report.fusions is not None:
        parts.append(_section(f"fusions: {len(report.fusions.kernels)} kernels", render(fusions_view(report.fusions))))
    else:
        reason = report.stages.compile_error.headline if report.stages.compile_error else "not compiled"
        parts.append(_note(f"no fusions table: {reason}"))
    if report.pallas:
        parts.append(_section(f"pallas: {len(report.pallas)} pallas_call (BlockSpecs, grid, VMEM budgets)",
                              render(pallas_view(report.pallas))))
    m = report.memory
    if m is not None:  # open where it decides something: a sharded program, or one that does not fit
        parts.append(_section(f"memory: HBM per device on {m.chip}" + (": DOES NOT FIT" if m.fits is False else ""),
                              render(memory_view(m)), open_=m.devices > 1 or m.fits is False))
    comms, remote = report.collectives, remote_dma_lines(report.pallas)
    if comms is not None and (comms.collectives or remote):
        parts.append(_section(f"collectives: {len(comms.collectives)} per device" + (", and Pallas remote DMAs" if remote else ""),
                              render(collectives_view(comms, remote=remote, link=report.family.interconnect))))
    parts.append(_section("kernel graph", graph_html(report), open_=False))
    return _wrap(parts)


def check_html(result: CheckResult) -> str:
    parts = [render(check_view(result))]
    if result.kernels:
        parts.append(_section("pallas_calls (BlockSpecs, grid, VMEM budgets)", render(pallas_view(result.kernels)), open_=False))
    return _wrap(parts)


def diff_html(result: DiffResult) -> str:
    return _wrap([render(diff_view(result))])


def compare_html(result: Compare) -> str:
    return _wrap([render(compare_view(result))])


def html_of(result) -> str:
    """The HTML of any result type, chosen by its class name (no import of the core's types)."""
    if type(result).__name__ == "TuneResult":
        from .tune import tune_html

        return tune_html(result)
    makers: dict[str, Callable[[Any], str]] = {"Report": report_html, "CheckResult": check_html, "DiffResult": diff_html, "Compare": compare_html}
    return makers[type(result).__name__](result)


def _wrap(parts: list[str]) -> str:
    return '<div class="inspector">' + "".join(parts) + "</div>"


def plain(html_text: str) -> str:
    """The text of an HTML fragment (tests, and a quick look without a browser)."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))
