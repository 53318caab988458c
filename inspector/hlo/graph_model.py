"""The kernel graph as data, laid out for reading: nodes in schedule order, a scope's forward and
backward kernels as separate groups, parameters and program outputs as figures on the nodes that
read and write them, kernels with no HBM traffic of their own folded into their neighbour, and
small edges summarised on the node past an edge budget. `graph.py` draws it with Graphviz and
`views/html_graph.py` wraps the drawing in an interactive page; neither recomputes a figure."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable

from .fusions import FusionAnalysis
from .kernel import Kernel
from .graph_budget import Group, choose_expanded, coarsen
from .graph_groups import TOP, phase_of, scope_matches, scope_of  # noqa: F401 (re-exported)
from .kernel_groups import KernelGroup, group_kernels

COLORS = ("roofline", "bytes", "bound")
PARAM_NODES_MAX = 8  # up to this many parameters are drawn as their own small nodes
EDGES_PER_NODE = 1.5  # past this many edges per node on average, the smallest are summarised on the node
TOP_N = 10
FEW_GROUPS = 16  # fewer groups than this say little collapsed: the biggest that fit the node budget open
OPEN_CAP = 400  # nodes the groups --expand names may take, whatever --max-nodes (Graphviz's pace: ~10 s for 500)
_FOLDABLE = {"copy-start", "slice-start", "bitcast", "async-start", "copy-done", "slice-done", "async-done"}


@dataclasses.dataclass(kw_only=True)
class Node:
    """One drawn box: a kernel (with the kernels folded into it) or a collapsed group."""

    id: str
    kind: str  # "kernel" | "group" | "parameter"
    title: str
    order: int  # schedule index of its first kernel (parameters: -1)
    group: str | None  # id of the group it belongs to
    kernels: list[str]  # every kernel it holds, in schedule order
    folded: list[str]  # kernels with no HBM traffic of their own folded in (kernel nodes)
    detail: str  # kind, or "N kernels"
    source: str | None
    ops: list[str]
    hbm_bytes: int
    flops: float
    time_s: float | None
    bound: str | None
    param_count: int = 0
    param_bytes: int = 0
    output_count: int = 0
    output_bytes: int = 0
    hidden_in: int = 0  # input edges not drawn (edge budget)
    hidden_in_bytes: int = 0
    ranks: list[int] = dataclasses.field(default_factory=list)  # top-N by time held here
    shape: str | None = None  # parameters
    sources: list[str] = dataclasses.field(default_factory=list)  # every file:line of its kernels
    away: str | None = None  # an open group's kernel that runs apart from the rest: drawn outside its box, named here


@dataclasses.dataclass(frozen=True, kw_only=True)
class Edge:
    src: str
    dst: str
    tensors: int
    bytes: int
    shape: str | None  # when one tensor
    hbm: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class TopKernel:
    rank: int
    name: str
    node: str
    time_s: float | None
    hbm_bytes: int
    flops: float
    source: str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelGraph:
    title: str
    chip: str | None
    color: str
    nodes: list[Node]
    edges: list[Edge]
    groups: list[Group]
    top: list[TopKernel]
    output_node: bool  # results drawn as edges into one "program output" node
    outputs: list[str]  # with output_node: the node ids whose values the program returns
    kernels: int
    hidden_edges: int  # edges summarised on nodes instead of drawn
    collapsed: list[str]  # group labels drawn as one node
    notes: list[str] = dataclasses.field(default_factory=list)  # what was simplified to fit the budgets, and how to see more
    program_groups: list[KernelGroup] = dataclasses.field(default_factory=list)  # the program's own groups (before merging)

    @property
    def node_ids(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)  # no ':' in ids: graphviz reads node:port


def _foldable(k: Kernel, readers: list[str]) -> bool:
    """No HBM traffic of its own and one consumer: a bitcast, the start of a slice or copy, an
    async done half. A collective keeps its own node, whatever it moves through HBM."""
    if k.kind == "collective":
        return False
    return (k.hbm_bytes == 0 or k.opcode in _FOLDABLE) and len(set(readers)) == 1 and k.flops == 0


def build_graph(analysis: FusionAnalysis, title: str, *, max_nodes: int = 200, expand: tuple[str, ...] = (),
                color: str = "roofline", edge_budget: float = EDGES_PER_NODE, top_n: int = TOP_N) -> KernelGraph:
    """The graph of `analysis`'s kernels: groups past `max_nodes` collapse into one node each
    (except those whose scope `expand` names)."""
    if color not in COLORS:
        raise ValueError(f"color must be one of {', '.join(COLORS)}")
    kernels = analysis.kernels
    by_name = {k.name: k for k in kernels}
    program_groups = _program_groups(analysis)
    pairs, group_of = _drawn_groups(program_groups, by_name)
    host = _hosts(kernels, set(analysis.results), group_of)
    params = analysis.parameters
    draw_params = len(params) <= PARAM_NODES_MAX
    fixed = (len(params) if draw_params else 0) + 1  # parameter nodes and the program's output
    fit = _fit(pairs, group_of, host, kernels, expand, max_nodes, fixed)

    node_of = {k.name: group_of[k.name].id if not group_of[k.name].expanded else "k_" + _ident(host.get(k.name, k.name))
               for k in kernels}  # which node holds each kernel
    nodes = _kernel_nodes(kernels, group_of, host, node_of)
    param_id = {p.producer: "p_" + _ident(p.producer) for p in params} if draw_params else {}
    for p in params if draw_params else ():
        nodes[param_id[p.producer]] = Node(id=param_id[p.producer], kind="parameter", title=p.producer, order=-1,
                                           group=None, kernels=[], folded=[], detail="parameter", source=None, ops=[],
                                           hbm_bytes=p.bytes, flops=0.0, time_s=None, bound=None, shape=p.shape)
    src_of = lambda producer: node_of.get(producer) or param_id.get(producer)
    edges = _edges(kernels, nodes, node_of, src_of, {p.producer for p in params} - set(param_id))
    out_srcs = [src_of(r) for r in analysis.results]
    output_node = len(set(s for s in out_srcs if s)) <= PARAM_NODES_MAX
    if not output_node:
        _output_figures(kernels, analysis.results, nodes, src_of)
    edges, hidden = _within_budget(edges, nodes, int(edge_budget * len(nodes)))
    top = _top_kernels(kernels, nodes, node_of, top_n)

    ordered = sorted(nodes.values(), key=lambda n: n.order)
    _mark_away(ordered, fit.groups)
    outputs = list(dict.fromkeys(s for s in out_srcs if s)) if output_node else []
    drawn = len(ordered) + (1 if output_node else 0)
    notes = fit.notes
    if drawn > max_nodes and not fit.asked_open:  # a budget below the drawing's floor: say so, never "fit"
        notes = [n.replace("to fit --max-nodes", "to come near --max-nodes") for n in notes]
        notes.append(f"{drawn} nodes drawn, more than --max-nodes {max_nodes}: the fewest this drawing keeps "
                     "(the program's output, its parameters and a few groups)")
    return KernelGraph(title=title, chip=analysis.chip, color=color, nodes=ordered, edges=edges, groups=fit.groups,
                       top=top, output_node=output_node, outputs=outputs, kernels=len(kernels), hidden_edges=hidden,
                       collapsed=[g.label for g in fit.collapsed], notes=notes, program_groups=program_groups)


def _drawn_groups(program_groups: list[KernelGroup], by_name: dict[str, Kernel]
                  ) -> tuple[list[tuple[Group, KernelGroup]], dict[str, Group]]:
    """Each program group with kernels in this analysis as a drawn Group (paired with it), and
    the Group of each kernel."""
    group_of: dict[str, Group] = {}
    pairs: list[tuple[Group, KernelGroup]] = []
    for kg in program_groups:
        mine = [x for x in kg.kernels if x in by_name]
        if mine:
            g = Group.of(kg, mine)
            pairs.append((g, kg))
            for x in mine:
                group_of[x] = g
    return pairs, group_of


def _hosts(kernels: list[Kernel], results: set[str], group_of: dict[str, Group]) -> dict[str, str]:
    """Kernels with no traffic of their own folded into their one reader of the same group (chains
    resolved to the last): folded kernel -> the kernel whose node holds it."""
    readers: dict[str, list[str]] = {}
    for k in kernels:
        for t in k.inputs:
            readers.setdefault(t.producer, []).append(k.name)
    host: dict[str, str] = {}
    for k in reversed(kernels):
        r = readers.get(k.name, [])
        if k.name not in results and _foldable(k, r) and group_of[r[0]] is group_of[k.name]:
            host[k.name] = host.get(r[0], r[0])
    return host


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Fit:
    """The groups as drawn within the node budget."""

    groups: list[Group]  # in schedule order, merged ones included
    collapsed: list[Group]  # drawn as one node each
    notes: list[str]  # what was simplified to fit
    asked_open: int  # groups --expand opened (they may take the drawing past max_nodes, up to OPEN_CAP)


def _fit(pairs: list[tuple[Group, KernelGroup]], group_of: dict[str, Group], host: dict[str, str],
         kernels: list[Kernel], expand: tuple[str, ...], max_nodes: int, fixed: int) -> _Fit:
    """Every group open when the kernels fit in `max_nodes`; else each group one node, those
    `expand` names open as fit, the rest merged with their neighbours to fit (`group_of` then
    names the merged group of their kernels)."""
    groups = [g for g, _ in pairs]
    if len(kernels) - len(host) + fixed <= max_nodes:
        for g in groups:
            g.expanded = True
        return _Fit(groups=groups, collapsed=[], notes=[], asked_open=0)
    open_size = Counter(group_of[x].id for x in dict.fromkeys(k.name for k in kernels) if x not in host)
    reserve = min(len(groups) - 1, max(8, max_nodes // 4))  # nodes for the other groups, merged if need be
    opened, notes = choose_expanded(pairs, expand, max(max_nodes, OPEN_CAP) - fixed - reserve, open_size)
    for g in opened:
        g.expanded = True
    shut = [g for g in groups if not g.expanded]
    room = max(max_nodes - fixed - sum(open_size[g.id] for g in opened), reserve)
    merged, more = coarsen(shut, room, {g.id: kg.repetition for g, kg in pairs})
    for m in merged:
        if m.members:
            for x in m.kernels:
                group_of[x] = m
    groups = sorted([g for g in groups if g.expanded] + merged, key=lambda g: g.order)
    if len(groups) < FEW_GROUPS:  # a program of a few big groups (a scan's body): open the biggest that fit
        drawn = len(groups) + fixed + sum(open_size[g.id] - 1 for g in groups if g.expanded)
        for g in sorted((g for g in groups if not g.expanded and not g.members), key=lambda g: -open_size[g.id]):
            if drawn + open_size[g.id] - 1 <= max_nodes:
                g.expanded = True
                drawn += open_size[g.id] - 1
    return _Fit(groups=groups, collapsed=[g for g in groups if not g.expanded], notes=notes + more,
                asked_open=len(opened))


def _kernel_nodes(kernels: list[Kernel], group_of: dict[str, Group], host: dict[str, str],
                  node_of: dict[str, str]) -> dict[str, Node]:
    """The nodes that hold kernels (an open group's kernel, with those folded into it, or a
    collapsed group), each with its kernels' summed figures."""
    by_name = {k.name: k for k in kernels}
    index = {k.name: i for i, k in enumerate(kernels)}
    nodes: dict[str, Node] = {}
    for k in kernels:
        nid, g = node_of[k.name], group_of[k.name]
        n = nodes.get(nid)
        if n is None:
            if g.expanded:
                owner = by_name[host.get(k.name, k.name)]
                n = Node(id=nid, kind="kernel", title=owner.name, order=index[owner.name], group=g.id, kernels=[],
                         folded=[], detail=owner.kind, source=owner.source or (owner.sources[0] if owner.sources else None),
                         ops=[], hbm_bytes=0, flops=0.0, time_s=None, bound=owner.bound)
            else:
                n = Node(id=nid, kind="group", title=g.label, order=g.order, group=g.id, kernels=[], folded=[], detail="",
                         source=None, ops=[], hbm_bytes=0, flops=0.0, time_s=None, bound=None)
            nodes[nid] = n
        n.kernels.append(k.name)
        if n.kind == "kernel" and k.name in host:
            n.folded.append(k.name)
        n.hbm_bytes += k.hbm_bytes * k.repeat
        n.flops += k.flops * k.repeat
        if k.roofline_s is not None:
            n.time_s = (n.time_s or 0.0) + k.roofline_s * k.repeat
        for op in k.ops:
            if op not in n.ops:
                n.ops.append(op)
        for source in k.sources:
            if source not in n.sources:
                n.sources.append(source)
    for n in nodes.values():
        if n.kind == "group":
            _describe_group(n, [by_name[x] for x in n.kernels])
        n.kernels.sort(key=index.__getitem__)
        n.folded.sort(key=index.__getitem__)
    return nodes


def _describe_group(n: Node, members: list[Kernel]) -> None:
    """A collapsed group's detail, bound (that of most of its time) and source."""
    n.detail = f"{len(members)} kernel" + ("s" if len(members) != 1 else "")
    by_bound: dict[str | None, float] = {}
    for k in members:
        by_bound[k.bound] = by_bound.get(k.bound, 0.0) + (k.roofline_s or 0.0)
    n.bound = max(by_bound, key=by_bound.__getitem__) if by_bound else None
    n.source = next((k.source or k.sources[0] for k in members if k.source or k.sources), None)  # as the fusions view shows it


def _edges(kernels: list[Kernel], nodes: dict[str, Node], node_of: dict[str, str],
           src_of: Callable[[str], str | None], undrawn_params: set[str]) -> list[Edge]:
    """One edge per pair of nodes a tensor passes between; parameters not drawn as nodes are
    counted on the nodes that read them instead."""
    edge_map: dict[tuple[str, str], list] = {}
    param_seen: dict[str, set] = {}
    for k in kernels:
        dst = node_of[k.name]
        for t in k.inputs:
            if t.producer in undrawn_params:
                if t.producer not in param_seen.setdefault(dst, set()):
                    param_seen[dst].add(t.producer)
                    nodes[dst].param_count += 1
                    nodes[dst].param_bytes += t.bytes
                continue
            src = src_of(t.producer)
            if src is None or src == dst:
                continue
            edge_map.setdefault((src, dst), []).append(t)
    return [Edge(src=s, dst=d, tensors=len(ts), bytes=sum(t.bytes for t in ts),
                 shape=ts[0].shape if len(ts) == 1 else None, hbm=any(t.memory_space == 0 for t in ts))
            for (s, d), ts in edge_map.items()]


def _output_figures(kernels: list[Kernel], results: list[str], nodes: dict[str, Node],
                    src_of: Callable[[str], str | None]) -> None:
    """Too many program outputs for edges into one node: each a figure on the node that makes it."""
    sizes: dict[str, int] = {}
    for k in kernels:
        for o in k.outputs:
            sizes.setdefault(k.name, 0)
            sizes[k.name] += o.bytes
    for result in dict.fromkeys(results):
        s = src_of(result)
        if s is None or nodes[s].kind == "parameter":
            continue
        n = nodes[s]
        n.output_count += 1
        n.output_bytes += sizes.get(result, 0)


def _within_budget(edges: list[Edge], by_id: dict[str, Node], budget: int) -> tuple[list[Edge], int]:
    """Past the budget, each node's biggest input and the largest of the rest; the others
    summarised on the node they enter. The edges in drawing order, and how many were hidden."""
    hidden = 0
    if len(edges) > budget:
        edges.sort(key=lambda e: -e.bytes)
        keep, first_in = [], set()
        for e in edges:
            if e.dst not in first_in:
                first_in.add(e.dst)
                keep.append(e)
        kept = {id(e) for e in keep}  # (by identity: comparing edges field by field is quadratic on a full graph)
        rest = [e for e in edges if id(e) not in kept]
        room = max(0, budget - len(keep))
        keep += rest[:room]
        for e in rest[room:]:
            by_id[e.dst].hidden_in += e.tensors
            by_id[e.dst].hidden_in_bytes += e.bytes
            hidden += 1
        edges = keep
    edges.sort(key=lambda e: (by_id[e.src].order, by_id[e.dst].order))
    return edges, hidden


def _top_kernels(kernels: list[Kernel], by_id: dict[str, Node], node_of: dict[str, str], top_n: int) -> list[TopKernel]:
    """The top-N kernels by time (or bytes without a roofline), each rank told to its node."""
    measure = (lambda k: k.roofline_s * k.repeat) if any(k.roofline_s for k in kernels) else (lambda k: k.hbm_bytes * k.repeat)
    ranked = sorted((k for k in kernels if measure(k)), key=measure, reverse=True)[:top_n]
    top = []
    for rank, k in enumerate(ranked, 1):
        n = by_id[node_of[k.name]]
        n.ranks.append(rank)
        top.append(TopKernel(rank=rank, name=k.name, node=n.id, time_s=k.roofline_s, hbm_bytes=k.hbm_bytes,
                             flops=k.flops, source=k.source or (k.sources[0] if k.sources else None)))
    return top


def _program_groups(analysis: FusionAnalysis) -> list[KernelGroup]:
    """The analysis's groups (an analysis made before they were, or by hand: grouped here)."""
    return analysis.groups or group_kernels(analysis.kernels)


def _mark_away(ordered: list[Node], groups) -> None:
    """An open group's box holds its longest unbroken stretch of the schedule; its kernels that
    XLA runs elsewhere (a weight gradient delayed to the end, a forward op recomputed in the
    backward) are drawn at their own time, outside the box, so one box does not span the step."""
    label = {g.id: g.label for g in groups if g.expanded}
    apart: set[str] = set()
    for _ in range(2):  # the second pass lets the first's strays (another group's) not break a stretch
        runs: dict[str, list[list[Node]]] = {}
        prev = None
        for n in ordered:
            if n.kind == "kernel" and n.id in apart and prev is not None and prev.group != n.group:
                continue  # another group's stray
            if n.kind != "kernel" or n.group is None or n.group not in label:
                prev = None
                continue
            if prev is not None and prev.group == n.group:
                runs[n.group][-1].append(n)
            else:
                runs.setdefault(n.group, []).append([n])
            prev = n
        span = {gid: (max(st, key=len)[0].order, max(st, key=len)[-1].order) for gid, st in runs.items()}
        apart = {n.id for n in ordered if n.group in span and n.kind == "kernel"
                 and not span[n.group][0] <= n.order <= span[n.group][1]}
    for n in ordered:
        n.away = label[n.group] if n.id in apart else None


def group_graphs(analysis: FusionAnalysis, kg: KernelGraph) -> dict[str, KernelGraph]:
    """For each collapsed group, the graph of its own kernels (what clicking it in the HTML page
    opens); the top-N ranks are the whole program's."""
    rank_of = {t.name: t.rank for t in kg.top}
    out = {}
    for g in kg.groups:
        if g.expanded:
            continue
        members = set(g.kernels)
        kernels = [k for k in analysis.kernels if k.name in members]
        read = {t.producer for k in kernels for t in k.inputs}
        sub = dataclasses.replace(analysis, kernels=kernels, parameters=[p for p in analysis.parameters if p.producer in read],
                                  results=[r for r in analysis.results if r in members], intermediates=[])
        graph = build_graph(sub, g.label, max_nodes=1 << 30, color=kg.color, top_n=0)
        for n in graph.nodes:
            n.ranks = sorted(rank_of[k] for k in n.kernels if k in rank_of)
        out[g.id] = graph
    return out
