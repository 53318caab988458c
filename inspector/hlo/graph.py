"""The kernel graph as DOT (and SVG through Graphviz's `dot`): kernels are nodes, HBM tensors
are edges labelled with shape and bytes. Large programs are grouped by op_name scope (a layer)
and collapsed past a node limit."""
from __future__ import annotations

import dataclasses
import math
import re
import shutil
import subprocess

from ..units import fmt_bytes, fmt_count, fmt_time
from ..errors import UsageError
from .fusions import FusionAnalysis, Kernel

BOUND_FILL = {"memory": "#f6c177", "compute": "#8ec5ff", None: "#dddddd"}
TOP = "<top>"  # the cluster of kernels outside any named scope
SVG_NODE_LIMIT = 600  # dot needs ~10 s for 500 nodes here and minutes past 900
_WRAPPER = re.compile(r"^(?:jvp|transpose|vmap|remat|checkpoint|pjit|jit|custom_jvp_call|custom_vjp_call)\((.*)\)$")


def scope_of(kernel: Kernel) -> str:
    """The user's scope of a kernel: the op_name path without the outer jit and transform
    wrappers, e.g. jit(train_step)/transpose(jvp(layer3))/dot_general -> layer3."""
    if not kernel.scope:
        return TOP
    parts = kernel.scope.split(";", 1)[0].split("/")[1:]  # XLA joins merged op_names with ';'; drop the outer jit(f)
    cleaned = []
    for part in parts:
        while (m := _WRAPPER.match(part)):
            part = m[1]
        if part:
            cleaned.append(part)
    return "/".join(cleaned) or TOP


@dataclasses.dataclass
class GraphSummary:
    nodes: int  # drawn
    kernels: int
    clusters: int
    collapsed: list[str]


def _label_bytes(n: int) -> str:
    return fmt_bytes(n).replace(" ", "")


def _kernel_label(k: Kernel) -> str:
    time = f"{fmt_time(k.roofline_s)} {k.bound}" if k.roofline_s else (k.bound or "")
    src = (k.source or (k.sources[0] if k.sources else "")).rsplit("/", 1)[-1]
    lines = [k.name, k.kind, src, f"HBM {_label_bytes(k.hbm_bytes)}  {fmt_count(k.flops)}flop", time]
    return "\n".join(l for l in lines if l)


def _shade(hbm_bytes: int, biggest: int) -> str:
    """Darker border for kernels that move more HBM bytes (log scale)."""
    if biggest <= 0 or hbm_bytes <= 0:
        return "1"
    return f"{1 + 4 * math.log1p(hbm_bytes) / math.log1p(biggest):.1f}"


def _clusters(kernels: list[Kernel]) -> dict[str, str]:
    """Each kernel's top-level scope. Kernels XLA made without an op_name (async copies and
    slices that feed a layer) join the scope of the kernel that reads their result."""
    cluster = {k.name: scope_of(k).split("/", 1)[0] for k in kernels}
    reader: dict[str, str] = {}
    for k in kernels:
        for t in k.inputs:
            reader.setdefault(t.producer, k.name)
    for k in reversed(kernels):  # readers come later in the schedule: walk back so chains resolve
        if k.op_name is None and k.name in reader:
            cluster[k.name] = cluster[reader[k.name]]
    return cluster


def _scope_node(scope: str) -> str:
    return "scope_" + re.sub(r"\W", "_", scope)  # no ':' in ids: graphviz reads node:port


def _kernel_node(g, k: Kernel, biggest: int) -> None:
    g.node(k.name, _kernel_label(k), shape="box", style="filled,rounded", fillcolor=BOUND_FILL.get(k.bound, "#dddddd"),
           penwidth=_shade(k.hbm_bytes, biggest))


def build_dot(analysis: FusionAnalysis, title: str, *, max_nodes: int = 200, expand: tuple[str, ...] = ()):
    """A graphviz.Digraph and a summary; raises UsageError when even collapsed it is too big."""
    import graphviz

    kernels = analysis.kernels
    cluster_of = _clusters(kernels)
    clusters: dict[str, list[Kernel]] = {}
    for k in kernels:
        clusters.setdefault(cluster_of[k.name], []).append(k)
    collapsed: list[str] = []
    group_params = False
    if len(kernels) + len(analysis.parameters) + 1 > max_nodes:
        wanted = lambda c: any(c == e or c.startswith(e + "/") or e.startswith(c) for e in expand)
        collapsed = [c for c in clusters if not wanted(c)]
        group_params = len(analysis.parameters) > 8
    params = {p.producer for p in analysis.parameters}
    param_node = {p: "parameters" if group_params else p for p in params}
    io_nodes = len(set(param_node.values())) + 1
    node_of = {k.name: _scope_node(cluster_of[k.name]) if cluster_of[k.name] in collapsed else k.name for k in kernels}
    drawn = len(set(node_of.values())) + io_nodes
    if drawn > max_nodes:
        raise UsageError(f"the graph has {drawn} nodes ({len(kernels)} kernels) even with {len(collapsed)} scopes collapsed, "
                         f"over --max-nodes {max_nodes}: raise --max-nodes or draw fewer scopes with --expand SCOPE")

    biggest = max((k.hbm_bytes for k in kernels), default=0)
    g = graphviz.Digraph(title, graph_attr={
        "rankdir": "TB", "label": title, "labelloc": "t", "fontsize": "16", "fontname": "Helvetica",
        "nodesep": "0.25", "ranksep": "0.35"}, node_attr={"fontname": "Helvetica", "fontsize": "10"},
        edge_attr={"fontname": "Helvetica", "fontsize": "8", "color": "#555555"})

    if group_params:
        g.node("parameters", f"{len(params)} parameters\n{_label_bytes(sum(p.bytes for p in analysis.parameters))}",
               shape="invhouse", style="filled", fillcolor="#c8e6c9")
    else:
        for p in analysis.parameters:
            g.node(p.producer, f"{p.producer}\n{p.shape}\n{_label_bytes(p.bytes)}", shape="invhouse", style="filled",
                   fillcolor="#c8e6c9")
    g.node("__output__", "program output", shape="house", style="filled,bold", fillcolor="#c8e6c9")

    for name, members in clusters.items():
        if name in collapsed:
            hbm = sum(k.hbm_bytes * k.repeat for k in members)
            flops = sum(k.flops * k.repeat for k in members)
            mem = sum(1 for k in members if k.bound == "memory")
            g.node(_scope_node(name), f"{name}\n{len(members)} kernels (collapsed)\nHBM {_label_bytes(hbm)}  {fmt_count(flops)}flop\n"
                   f"{mem} memory-bound, {len(members) - mem} other", shape="box3d", style="filled", fillcolor="#eeeeee")
            continue
        if name == TOP:
            for k in members:
                _kernel_node(g, k, biggest)
            continue
        with g.subgraph(name="cluster_" + _scope_node(name), graph_attr={"label": name, "style": "rounded", "color": "#999999"}) as sub:
            for k in members:
                _kernel_node(sub, k, biggest)

    edges: dict[tuple[str, str], list] = {}
    for k in kernels:
        for t in k.inputs:
            src = node_of.get(t.producer, param_node.get(t.producer))
            dst = node_of[k.name]
            if src is None or src == dst:
                continue
            edges.setdefault((src, dst), []).append(t)
    for (src, dst), tensors in edges.items():
        total = sum(t.bytes for t in tensors)
        label = f"{tensors[0].shape}\n{_label_bytes(total)}" if len(tensors) == 1 else f"{len(tensors)} tensors\n{_label_bytes(total)}"
        hbm = any(t.memory_space == 0 for t in tensors)
        g.edge(src, dst, label=label, style="solid" if hbm else "dashed",
               penwidth=_shade(total, biggest) if hbm else "1")
    for src in dict.fromkeys(node_of.get(r, param_node.get(r)) for r in analysis.results):
        if src is not None:
            g.edge(src, "__output__")

    with g.subgraph(name="cluster_legend", graph_attr={"label": "legend", "fontsize": "10", "style": "dashed"}) as legend:
        legend.node("__l_mem", "memory-bound kernel", shape="box", style="filled,rounded", fillcolor=BOUND_FILL["memory"])
        legend.node("__l_cmp", "compute-bound kernel", shape="box", style="filled,rounded", fillcolor=BOUND_FILL["compute"])
        legend.node("__l_in", "parameter", shape="invhouse", style="filled", fillcolor="#c8e6c9")
        legend.node("__l_edge", "solid edge: HBM tensor\ndashed: stays in VMEM\nthicker: more bytes", shape="plaintext")
        if analysis.chip is None:
            legend.node("__l_none", "grey: no roofline\n(--roofline CHIP)", shape="box", style="filled,rounded", fillcolor=BOUND_FILL[None])
        legend.edge("__l_mem", "__l_cmp", style="invis")
        legend.edge("__l_in", "__l_edge", style="invis")
    return g, GraphSummary(drawn, len(kernels), len(clusters), collapsed)


def dot_available() -> bool:
    return shutil.which("dot") is not None


def render_svg(graph, nodes: int = 0, timeout_s: float = 120) -> bytes:
    if nodes > SVG_NODE_LIMIT:
        raise UsageError(f"the graph has {nodes} nodes, too many for dot to lay out (limit {SVG_NODE_LIMIT}): "
                         f"collapse scopes with --max-nodes {SVG_NODE_LIMIT} or fewer, open only the scopes you need "
                         "with --expand SCOPE, or write the source with --dot PATH")
    if not dot_available():
        raise UsageError("Graphviz's `dot` is not installed, so no SVG: apt-get install graphviz (or brew install graphviz); "
                         "--dot PATH writes the graph source without it")
    try:
        out = subprocess.run(["dot", "-Tsvg"], input=graph.source.encode(), capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        raise UsageError(f"dot did not finish in {timeout_s:.0f} s: draw fewer nodes (--max-nodes, --expand SCOPE)") from err
    if out.returncode != 0:
        raise UsageError(f"dot failed: {out.stderr.decode(errors='replace').strip().splitlines()[-1] if out.stderr else out.returncode}")
    return out.stdout
