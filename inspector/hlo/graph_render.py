"""Drawing the kernel graph within a time budget, whatever the program: Graphviz's full layout when
the graph is easy enough for it, its fast settings (straight edges, fewer passes) when not or when
the full one runs out of time, and the inspector's own ranked layout (which cannot hang) when
Graphviz still does not finish. Each step down is said in a note. The HTML page's drawings of
each group are laid out side by side, never one whole-program layout."""
from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor

from .graph import build_dot, dot_of
from .graph_model import KernelGraph, group_graphs
from .graph_groups import TOP
from .graph_ranked import ranked_svg
from .graphviz_run import FAST_ARGS, FULL_SHARE, DotRun, allow_runs, dot_available, kill_all, run_dot, seconds_text

DEFAULT_BUDGET_S = 30.0  # `--layout-budget`: the drawing's share of an export on a 2-core machine
# What dot gets through per second here (layout_cost units, measured on 2 cores under load): the
# full layout ~600 (2,795 in 4-6 s, 9,370 in 32 s), the fast settings ~10,000 (36,975 in 4 s; a
# 1,550-node graph of cost 1.6M unfinished after 20 s). A layout not expected within its share
# of the budget is not tried.
FULL_RATE = 600
FAST_RATE = 10_000
LIGHT = 1500  # group drawings up to this cost share one dot process (a start is ~0.1 s)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Layout:
    svg: bytes
    engine: str  # dot | dot-fast | ranked
    seconds: float
    note: str | None = None  # what was simplified, for the user


def layout_cost(kg: KernelGraph) -> int:
    """What Graphviz's dot pays for: a node per rank an edge crosses (labels double the ranks),
    plus the nodes; the nodes are ranked in schedule order."""
    order = {n.id: i for i, n in enumerate(n for n in kg.nodes if n.kind != "parameter")}
    span = sum(abs(order.get(e.dst, 0) - order.get(e.src, 0)) for e in kg.edges)
    out = len(order)
    span += sum(out - order.get(s, 0) for s in kg.outputs)
    return 2 * span + len(kg.nodes)


def _ranked(kg: KernelGraph, why: str, started: float) -> Layout:
    note = f"Graphviz {why}: drawn in schedule order by the inspector's own layout ({_advice(why)})"
    return Layout(svg=ranked_svg(kg, note), engine="ranked", seconds=time.perf_counter() - started, note=note)


def _advice(why: str) -> str:
    """What helps: more time when Graphviz ran out of it, a working Graphviz when it failed."""
    if "not installed" in why:
        return "apt-get install graphviz (or brew install graphviz) for Graphviz's layout"
    if "failed (" in why:
        return "Graphviz's dot failed, not the budget: `inspector doctor --svg` checks it"
    return "--layout-budget SECONDS gives Graphviz longer"


def layout(kg: KernelGraph, source: str, budget_s: float = DEFAULT_BUDGET_S) -> Layout:
    """The SVG of one graph within `budget_s` seconds: the full layout when it is expected within
    its share of the budget, the fast one beside it (on the other core) in case it is not."""
    started = time.perf_counter()
    if not dot_available():
        return _ranked(kg, "(dot) is not installed", started)
    cost = layout_cost(kg)
    full = DotRun([source], ()) if cost <= FULL_RATE * budget_s * FULL_SHARE else None
    fast = DotRun([source], FAST_ARGS) if cost <= FAST_RATE * budget_s else None
    tried = None
    if full is not None:
        out = full.result(budget_s * FULL_SHARE)
        if not isinstance(out, str):
            if fast is not None:
                fast.kill()
            return Layout(svg=out[0], engine="dot", seconds=time.perf_counter() - started)
        tried = f"full layout {out}"
    left = started + budget_s - time.perf_counter()
    if fast is None:
        why = f"{tried}, " if tried else ""
        return _ranked(kg, f"{why}would not finish in {seconds_text(budget_s)} (a graph of {len(kg.nodes)} nodes, "
                           f"{cost} ranks of edges)", started)
    out = fast.result(left)
    if not isinstance(out, str):
        why = tried or f"full layout skipped: {cost} ranks of edges, more than it lays out in {seconds_text(budget_s * FULL_SHARE)}"
        note = f"Graphviz's {why}: laid out with straight edges and fewer passes"
        return Layout(svg=out[0], engine="dot-fast", seconds=time.perf_counter() - started, note=note)
    return _ranked(kg, f"{tried + ', fast layout ' if tried else 'fast layout '}{out}", started)


def layout_many(graphs: dict[str, KernelGraph], budget_s: float, procs: int = 0) -> tuple[dict[str, Layout], list[str]]:
    """Several graphs (the HTML page's groups) within `budget_s` in all: the light ones a few to a
    dot process, the heavy ones each with the fast settings, processes side by side; what does
    not finish by the deadline is laid out by our own layout. Returns the layouts and a note."""
    started = time.perf_counter()
    deadline = started + budget_s
    if not graphs:
        return {}, []
    sources = {gid: dot_of(g, legend=False).source for gid, g in graphs.items()}
    if not dot_available():
        return {gid: _ranked(g, "(dot) is not installed", started) for gid, g in graphs.items()}, []
    procs = max(1, min(len(graphs), procs or os.cpu_count() or 1, 8))
    costs = {gid: layout_cost(g) for gid, g in graphs.items()}
    huge = [gid for gid in graphs if costs[gid] > FAST_RATE * budget_s]  # straight to our own layout
    light = [gid for gid in graphs if costs[gid] <= LIGHT]
    heavy = [gid for gid in graphs if LIGHT < costs[gid] and gid not in huge]
    tasks = [(light[i::procs], ()) for i in range(procs) if light[i::procs]] + [([gid], FAST_ARGS) for gid in heavy]
    done: dict[str, Layout] = {}

    def work(task) -> None:
        ids, args = task
        out = run_dot([sources[g] for g in ids], args, deadline - time.perf_counter())
        if isinstance(out, str) and len(ids) > 1:  # one slow graph must not cost the others
            for g in ids:
                work(([g], FAST_ARGS))
            return
        for g, svg in zip(ids, out if not isinstance(out, str) else [None] * len(ids)):
            if svg is not None:
                done[g] = Layout(svg=svg, engine="dot" if not args else "dot-fast", seconds=time.perf_counter() - started)

    with ThreadPoolExecutor(procs) as pool:
        try:
            list(pool.map(work, tasks))
        except BaseException:  # Ctrl-C: the threads wait on dot, which the signal does not reach
            kill_all()
            raise
    late = [gid for gid in graphs if gid not in done]
    for gid in late:
        done[gid] = Layout(svg=ranked_svg(graphs[gid]), engine="ranked", seconds=time.perf_counter() - started)
    notes = [f"{len(late)} of {len(graphs)} group drawings were not done by Graphviz in the budget: drawn in schedule "
             "order by the inspector's own layout (--layout-budget SECONDS gives Graphviz longer)"] if late else []
    return done, notes


@dataclasses.dataclass(kw_only=True)
class Drawing:
    """What `inspector export` writes: the graph, its DOT source, the SVG and the groups' SVGs."""

    graph: KernelGraph
    dot: str
    svg: bytes  # empty when not asked for
    group_svgs: dict[str, str]  # a collapsed group's node id -> the drawing of its own kernels
    group_graphs: dict[str, KernelGraph]  # ... and their graph
    notes: list[str]  # what was simplified to fit the budgets, each with how to see more
    seconds: float  # laying out
    # not laid out here (no Graphviz): the DOT sources, {"main": ..., "groups": {node id: ...}}, for
    # the HTML page to lay out itself
    dots: dict | None = None

    @property
    def summary(self) -> str:
        """`57 nodes, 52 groups collapsed (--expand 'block #7' to open one)`."""
        kg = self.graph
        drawn = len(kg.nodes) + (1 if kg.output_node else 0)
        if not kg.collapsed:
            return f"{drawn} node{'s' if drawn != 1 else ''}"
        return f"{drawn} nodes, {len(kg.collapsed)} groups collapsed (--expand {expand_example(kg)} to open one)"


def expand_example(kg: KernelGraph) -> str:
    """An --expand argument this program answers to: a scope (layer3) or a loop's repetition
    ('block #7'), as the shell wants it."""
    shut = set(kg.collapsed) | {m for g in kg.groups if not g.expanded for m in g.members}
    for g in kg.program_groups:
        if g.place == TOP or g.label not in shut:
            continue
        if g.by == "scope":
            return g.place
        if g.repetition is not None:
            return f"'{g.place.rsplit(' ', 1)[-1]} #{g.repetition}'"
    named = next((g for g in kg.program_groups if g.place != TOP and g.label in shut), None)
    return f"'{named.label}'" if named else "GROUP"


def draw(analysis, title: str, *, max_nodes: int = 200, expand: tuple[str, ...] = (), color: str = "roofline",
         budget_s: float = DEFAULT_BUDGET_S, svg: bool = True, groups: bool = False, in_page: bool = False) -> Drawing:
    """The kernel graph of `analysis` drawn within `budget_s` seconds of layout: the SVG when
    `svg`, each collapsed group's own drawing too when `groups` (the HTML page). `in_page`: no
    layout here, only the DOT sources (the HTML page lays them out itself: no Graphviz needed)."""
    started = time.perf_counter()
    graph, summary = build_dot(analysis, title, max_nodes=max_nodes, expand=expand, color=color)
    kg = summary.graph
    notes = list(kg.notes)
    if kg.hidden_edges:
        notes.append(f"{kg.hidden_edges} smaller edges not drawn, to keep under 2 edges per node "
                     "(each node says what it leaves out: +N smaller inputs)")
    subs = group_graphs(analysis, kg) if groups else {}
    if in_page:
        dots = {"main": graph.source, "groups": {gid: dot_of(g, legend=False).source for gid, g in subs.items()}}
        notes.append("Graphviz's dot is not installed here: the HTML page lays the graph out itself when it opens "
                     "(Graphviz as WebAssembly, inline: a few seconds)")
        return Drawing(graph=kg, dot=graph.source, svg=b"", group_svgs={}, group_graphs=subs, notes=notes,
                       seconds=time.perf_counter() - started, dots=dots)
    allow_runs()
    with ThreadPoolExecutor(1) as pool:  # the whole drawing beside the groups' (one core each, where there are two)
        try:
            future = pool.submit(layout, kg, graph.source, budget_s) if (svg or groups) else None
            done, more = layout_many(subs, budget_s - (time.perf_counter() - started), max(1, (os.cpu_count() or 1) - 1))
            main = future.result() if future else None
        except BaseException:  # Ctrl-C, SIGTERM: kill dot now, or leaving this block waits out the budget
            kill_all()
            raise
    if main is not None and main.note:
        notes.append(main.note)
    notes += more
    group_svgs = {gid: lay.svg.decode() for gid, lay in done.items()}
    return Drawing(graph=kg, dot=graph.source, svg=main.svg if main else b"", group_svgs=group_svgs, group_graphs=subs,
                   notes=notes, seconds=time.perf_counter() - started)
