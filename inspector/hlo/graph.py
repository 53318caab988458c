"""The kernel graph as DOT (and SVG through Graphviz's `dot`): kernels are nodes, HBM tensors
are edges labelled with shape and bytes, ranked by schedule order. Large programs are grouped by
op_name scope (a layer) and phase (forward, backward), collapsed past a node limit. The structure
comes from `graph_model.build_graph`; this module only draws it."""
from __future__ import annotations

import dataclasses
import math

from ..base.errors import UsageError
from ..base.units import fmt_bytes, fmt_count, fmt_time
from .fusions import VECTOR_UNITS, FusionAnalysis
from .graph_model import COLORS, TOP, KernelGraph, Node, build_graph, group_graphs, scope_matches, scope_of  # noqa: F401 (re-exported)
from .graphviz_run import dot_available, render_svg  # noqa: F401 (re-exported)
from .kernel_groups import group_matches, summary

RANK_COLOR = "#d4007f"  # the top-N border: magenta stands out on every fill, light and dark
VECTOR_FILL = "#d4a5f5"  # a Pallas kernel bound by a vector unit: VPU, EUP or XLU
BOUND_FILL: dict[str | None, str] = {"memory": "#f6c177", "compute": "#8ec5ff", **dict.fromkeys(VECTOR_UNITS, VECTOR_FILL),
                                      None: "#dddddd"}
_HEAT = ("#fff5eb", "#fdd0a2", "#fd8d3c", "#d94801", "#7f2704")  # light to dark: more time / more bytes
_HEAT_TEXT = ("#000000", "#000000", "#000000", "#ffffff", "#ffffff")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GraphSummary:
    nodes: int  # drawn
    kernels: int
    clusters: int  # groups: a scope's forward or backward kernels
    collapsed: list[str]
    graph: KernelGraph | None = None


def label_bytes(n: int) -> str:
    return fmt_bytes(n).replace(" ", "")


def short_source(src: str | None) -> str:
    return (src or "").rsplit("/", 1)[-1]


def node_label(n: Node) -> str:
    """The text of a node's box (the HTML export's hover shows the same lines)."""
    if n.kind == "parameter":
        return f"{n.title}\n{n.shape}\n{label_bytes(n.hbm_bytes)}"
    lines = [("#" + ",#".join(map(str, n.ranks)) + "  " if n.ranks else "") + n.title,
             "  ".join(x for x in (n.detail, short_source(n.source)) if x),
             f"({n.away}, scheduled apart)" if n.away else "",
             f"HBM {label_bytes(n.hbm_bytes)}  {fmt_count(n.flops)}flop",
             f"{fmt_time(n.time_s)} {n.bound or ''}".strip() if n.time_s is not None else ""]
    if n.folded:
        names = ", ".join(n.folded[:2]) + (f" +{len(n.folded) - 2}" if len(n.folded) > 2 else "")
        lines.append(f"holds {len(n.folded)} folded: {names}")
    if n.param_count:
        lines.append(f"reads {label_bytes(n.param_bytes)} of parameters ({n.param_count})")
    if n.output_count:
        lines.append(f"writes {n.output_count} outputs, {label_bytes(n.output_bytes)}")
    if n.hidden_in:
        lines.append(f"+{n.hidden_in} smaller inputs, {label_bytes(n.hidden_in_bytes)} (not drawn)")
    return "\n".join(l for l in lines if l)


def node_fill(n: Node, color: str, scale: float) -> tuple[str, str]:
    """(fill, font colour) of a node under the chosen colouring."""
    if color == "bound" or n.kind == "parameter":
        return (BOUND_FILL.get(n.bound, "#dddddd") if n.kind != "parameter" else "#c8e6c9"), "#000000"
    value = n.time_s if color == "roofline" else n.hbm_bytes
    if not value or scale <= 0:
        return BOUND_FILL[None], "#000000"
    step = min(len(_HEAT) - 1, int(len(_HEAT) * math.sqrt(value / scale)))  # sqrt: the small still show
    return _HEAT[step], _HEAT_TEXT[step]


def _width(n: int, biggest: int) -> str:
    """Thicker lines for more HBM bytes (log scale)."""
    if biggest <= 0 or n <= 0:
        return "1"
    return f"{1 + 4 * math.log1p(n) / math.log1p(biggest):.1f}"


def build_dot(analysis: FusionAnalysis, title: str, *, max_nodes: int = 200, expand: tuple[str, ...] = (),
              color: str = "roofline"):
    """A graphviz.Digraph and a summary. The node budget holds on any program (groups collapse,
    neighbours merge); an --expand that names no group of the program is a UsageError that
    lists the groups it has."""
    if color == "roofline" and not any(k.roofline_s for k in analysis.kernels):
        color = "bytes"  # no chip figures: time is unknown
    kg = build_graph(analysis, title, max_nodes=max_nodes, expand=expand, color=color)
    for asked in expand:
        if not any(group_matches(g, asked) for g in kg.program_groups):
            by_scope = any(g.by == "scope" for g in kg.program_groups)
            raise UsageError(f"--expand {asked}: no such {'scope' if by_scope else 'group'} in this program; its groups: "
                             + (summary(kg.program_groups) or "none"))
    drawn = len(kg.nodes) + (1 if kg.output_node else 0)
    return dot_of(kg), GraphSummary(nodes=drawn, kernels=kg.kernels, clusters=len(kg.groups), collapsed=kg.collapsed, graph=kg)


def dot_of(kg: KernelGraph, legend: bool = True):
    """Graphviz source of a KernelGraph: ranked by schedule order (an invisible chain through the
    nodes, first kernel first), expanded groups as clusters."""
    import graphviz

    g = graphviz.Digraph(kg.title, graph_attr={
        "rankdir": "TB", "label": kg.title, "labelloc": "t", "fontsize": "16", "fontname": "Helvetica",
        "nodesep": "0.25", "ranksep": "0.3", "newrank": "true"}, node_attr={"fontname": "Helvetica", "fontsize": "10"},
        edge_attr={"fontname": "Helvetica", "fontsize": "8", "color": "#555555"})
    measure = (lambda n: n.time_s or 0) if kg.color == "roofline" else (lambda n: n.hbm_bytes)
    scale = max((measure(n) for n in kg.nodes if n.kind != "parameter"), default=0)
    biggest = max((e.bytes for e in kg.edges), default=0)
    groups = {gr.id: gr for gr in kg.groups}

    def draw(sub, n: Node) -> None:
        fill, font = node_fill(n, kg.color, scale)
        if n.kind == "parameter":
            sub.node(n.id, node_label(n), id=n.id, shape="invhouse", style="filled", fillcolor=fill)
        else:
            sub.node(n.id, node_label(n), id=n.id, shape="box3d" if n.kind == "group" else "box",
                     style="filled" if n.kind == "group" else "filled,rounded", fillcolor=fill, fontcolor=font,
                     penwidth="4" if n.ranks else "1", color=RANK_COLOR if n.ranks else "#333333")

    clusters: dict[str, list[Node]] = {}
    for n in kg.nodes:
        if n.kind == "kernel" and n.group and groups[n.group].scope != "<top>" and not n.away:
            clusters.setdefault(n.group, []).append(n)
        else:
            draw(g, n)
    for gid, members in clusters.items():
        with g.subgraph(name="cluster_" + gid, graph_attr={"label": groups[gid].label, "style": "rounded",
                                                         "color": "#999999", "id": gid}) as sub:
            for n in members:
                draw(sub, n)
    if kg.output_node:
        g.node("__output__", "program output", id="__output__", shape="house", style="filled,bold", fillcolor="#c8e6c9")

    chain = [n for n in kg.nodes if n.kind != "parameter"]
    for a, b in zip(chain, chain[1:]):  # time runs top to bottom
        g.edge(a.id, b.id, style="invis", weight="20")
    for e in kg.edges:
        label = f"{e.shape}\n{label_bytes(e.bytes)}" if e.tensors == 1 else f"{e.tensors} tensors\n{label_bytes(e.bytes)}"
        g.edge(e.src, e.dst, label=label, style="solid" if e.hbm else "dashed",
               penwidth=_width(e.bytes, biggest) if e.hbm else "1")
    if kg.output_node:
        if chain:
            g.edge(chain[-1].id, "__output__", style="invis")
        for src in kg.outputs:
            g.edge(src, "__output__")

    if not legend:
        return g
    with g.subgraph(name="cluster_legend", graph_attr={"label": "legend", "fontsize": "10", "style": "dashed"}) as panel:
        if kg.color == "bound":
            panel.node("__l_mem", "memory-bound", shape="box", style="filled,rounded", fillcolor=BOUND_FILL["memory"])
            panel.node("__l_cmp", "compute-bound", shape="box", style="filled,rounded", fillcolor=BOUND_FILL["compute"])
            panel.node("__l_vec", "vector-bound\n(VPU, EUP or XLU)", shape="box", style="filled,rounded", fillcolor=VECTOR_FILL)
            if kg.chip is None:
                panel.node("__l_none", "grey: no roofline\n(--roofline CHIP)", shape="box", style="filled,rounded",
                           fillcolor=BOUND_FILL[None])
        else:
            what = f"roofline time on {kg.chip}" if kg.color == "roofline" else "HBM bytes"
            panel.node("__l_lo", f"less {what}", shape="box", style="filled,rounded", fillcolor=_HEAT[0])
            panel.node("__l_hi", f"most {what}", shape="box", style="filled,rounded", fillcolor=_HEAT[-1], fontcolor="#ffffff")
        ranked_by = "slowest kernels" if kg.top and kg.top[0].time_s is not None else "kernels with most HBM bytes"
        panel.node("__l_top", f"#1: the {ranked_by}\n(top {len(kg.top)}, their rank; magenta border)", shape="box",
                   style="rounded", penwidth="4", color=RANK_COLOR)
        panel.node("__l_grp", "a group: a layer's (a scope's,\na loop's i-th run) forward\nor backward kernels", shape="box3d")
        panel.node("__l_edge", "solid edge: HBM tensor\ndashed: stays in VMEM\nthicker: more bytes", shape="plaintext")
    return g
