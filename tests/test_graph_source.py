"""Programs without named scopes: kernels grouped by the Python stack jax records for each op (a
loop over layers repeats the same lines: the i-th repetition is layer i), the same groups in the
graph, the fusions table and compare; and an export that always finishes (node and edge budgets,
a layout budget, Graphviz's fast settings, our own ranked layout)."""
from __future__ import annotations

import dataclasses
import gzip
import html
import io
import json
import os
import re
import time

import pytest

from browser import find_browser, page_value
from conftest import DATA, line_of, lines_of_function
from inspector.base.chips import get_chip
from inspector.base.errors import UsageError
from inspector.hlo.fusions import analyse_fusions
from inspector.hlo.graph import build_dot, dot_available
from inspector.hlo.graph_model import build_graph
from inspector.hlo.graph_ranked import ranked_svg
from inspector.hlo.graph_render import draw, expand_example, layout, layout_many
from inspector.hlo.kernel import Kernel, TensorRef
from inspector.hlo.kernel_groups import group_kernels
from inspector.hlo.module import Frame, parse_hlo
from inspector.hlo.source_groups import clean_stack

GPT2 = "tests/data/gpt2_plain.py"
LAYERS = 24
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed (.ci/setup installs it)")


@pytest.fixture(scope="module")
def gpt2():
    """tests/data/gpt2_plain.py:train_step compiled by libtpu for v5e (tests/data/make_gpt2_hlo.py)."""
    text = gzip.decompress((DATA / "hlo" / "gpt2_plain_tpu.hlo.gz").read_bytes()).decode()
    return analyse_fusions(text, get_chip("tpu-v5e"), None)


def _block_lines() -> str:
    body = lines_of_function(GPT2, "block")
    return f"gpt2_plain.py:{body.start + 1}-{body.stop - 1} block"  # its two lines, not its def


# ----------------------------------------------------------------------------- the stack of each op


FRAMES = """HloModule m, entry_computation_layout={()->f32[]}

FileNames
1 "main.py"
2 "model.py"

FunctionNames
1 "<module>"
2 "step"
3 "block"

FileLocations
1 {file_name_id=1 function_name_id=1 line=9 end_line=9 column=1 end_column=9}
2 {file_name_id=2 function_name_id=2 line=40 end_line=40 column=1 end_column=9}
3 {file_name_id=2 function_name_id=3 line=12 end_line=12 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=3 parent_frame_id=3}
4 {file_location_id=2 parent_frame_id=4}

ENTRY %main () -> f32[] {
  ROOT %c = f32[] constant(1), metadata={op_name="jit(step)/mul" stack_frame_id=3}
}
"""


def test_stack_frames_are_read_outermost_first():
    """XLA prints a frame's parent as its id plus one (its own parser test: `1 {... parent_frame_id=1}`
    is a frame without a parent), so frame 3's stack is main.py:9 > model.py:40 > model.py:12."""
    m = parse_hlo(FRAMES)
    c = m.entry_computation.instructions[0]
    assert m.source(c) == "model.py:12"
    assert m.stack(c) == (Frame("main.py", 9, "<module>"), Frame("model.py", 40, "step"), Frame("model.py", 12, "block"))
    assert m.stacks[4] == m.stacks[3] + (Frame("model.py", 40, "step"),)
    # jax appends the stack of a cached rule's first trace (another layer's): cut at the first repeat
    a, b, c2 = Frame("m.py", 1, "f"), Frame("m.py", 5, "g"), Frame("m.py", 9, "g")
    assert clean_stack((a, b, a, c2)) == (a, b)
    assert clean_stack((a, b, a, c2), start=3) == (a, b, a, c2)  # the caller's own recursion (pytest's hooks) stays


# ----------------------------------------------------------------------------- grouping by source


def _kernel(name: str, stack: tuple[Frame, ...], phase: str | None, reads: tuple[str, ...] = ()) -> tuple[Kernel, tuple]:
    op = {"forward": "jit(f)/jvp(x)/mul", "backward": "jit(f)/transpose(jvp(x))/mul", None: "jit(f)/sub"}[phase]
    ref = lambda producer: TensorRef(producer=producer, shape="f32[8]", bytes=32, memory_space=0)
    k = Kernel(name=name, kind="fusion:loop", opcode="fusion", ops={}, op_name=op, source=None, sources=[],
               inputs=[ref(r) for r in reads], outputs=[ref(name)], bytes_read=32, bytes_written=32,
               hbm_bytes_read=32, hbm_bytes_written=32, flops=0.0, transcendentals=0.0, intensity=None,
               roofline_s=None, bound=None)
    return k, stack


def _program(layers: int, body: list[int], *, two_calls: bool = False) -> tuple[list[Kernel], dict]:
    """A Python loop over `layers` calling block() (or block() then mlp(), from two lines), forward
    then backward (last layer first), each layer's weight update beside its gradient."""
    top = Frame("m.py", 50, "step")
    kernels, stacks = [], {}

    def add(name, stack, phase, reads=()):
        k, s = _kernel(name, stack, phase, reads)
        kernels.append(k)
        stacks[name] = (top,) + s

    def call(j):  # the loop's call site, then the line in the called function
        if two_calls and j >= len(body) // 2:
            return (Frame("m.py", 43, "loss"), Frame("m.py", body[j], "mlp"))
        return (Frame("m.py", 42, "loss"), Frame("m.py", body[j], "block"))

    add("embed", (Frame("m.py", 40, "loss"),), "forward")
    last = "embed"
    for i in range(layers):
        for j in range(len(body)):
            add(f"f{i}_{j}", call(j), "forward", (last,))
            last = f"f{i}_{j}"
    add("loss", (Frame("m.py", 44, "loss"),), "forward", (last,))
    add("dloss", (Frame("m.py", 44, "loss"),), "backward", ("loss",))
    last = "dloss"
    for i in reversed(range(layers)):
        for j in reversed(range(len(body))):
            add(f"b{i}_{j}", call(j), "backward", (last, f"f{i}_{j}"))
            last = f"b{i}_{j}"
        add(f"u{i}", (Frame("m.py", 51, "<lambda>"),), None, (last,))  # the update of this layer's weight
    return kernels, stacks


def test_a_loop_over_layers_is_one_group_per_layer_and_phase():
    kernels, stacks = _program(4, [31, 32, 33])
    groups = group_kernels(kernels, stacks)
    labels = [g.label for g in groups]
    assert labels == (["m.py:40 loss forward"] + [f"m.py:31-33 block #{i} forward" for i in range(4)]
                      + ["m.py:44 loss forward", "m.py:44 loss backward"]
                      + [f"m.py:31-33 block #{i} backward" for i in reversed(range(4))])
    of = {n: g for g in groups for n in g.kernels}
    assert all(of[f"f{i}_{j}"].repetition == i and of[f"b{i}_{j}"].repetition == i for i in range(4) for j in range(3))
    assert all(of[f"u{i}"] is of[f"b{i}_0"] for i in range(4))  # each update runs beside its layer's gradient: joins it
    assert {g.repetitions for g in groups if g.repetition is not None} == {4} and groups[1].site == "m.py:42 loss"


def test_one_lines_repeated_ops_are_not_a_loop_and_a_two_line_body_is():
    kernels, stacks = _program(1, [31, 32, 33])
    line = Frame("m.py", 46, "loss")
    for n in range(3):  # take_along_axis: one line, its two ops side by side, twice
        for op in ("a", "b"):
            k, s = _kernel(f"t{n}{op}", (line,), "forward")
            kernels.insert(1, k)
            stacks[k.name] = (Frame("m.py", 50, "step"),) + s
    assert not any(g.repetition is not None and "46" in g.label for g in group_kernels(kernels, stacks))
    kernels, stacks = _program(3, [31, 32, 61, 62], two_calls=True)
    forward = [g.label for g in group_kernels(kernels, stacks) if g.phase == "forward" and g.repetition is not None]
    assert forward == [f"m.py:42-43 loss #{i} forward" for i in range(3)]  # block() and mlp(): one loop


def test_a_loop_over_heads_inside_the_loop_over_layers_and_a_call_beside_it():
    """acganesh/tinyGPT's gpt2(): the layer loop's body loops over 4 heads (their ops occur 4x as
    often), and the embedding before it and the final norm after it run once, a few ops with one
    signature each (3 gathers): the loop is the layers', named by the block's lines."""
    top, call = Frame("m.py", 22, "loss"), Frame("g.py", 84, "gpt2")
    kernels, stacks, last = [], {}, None

    def add(name, stack):
        nonlocal last
        k, s = _kernel(name, stack, "forward", (last,) if last else ())
        kernels.append(k)
        stacks[name] = (Frame("m.py", 28, "step"), top) + s
        last = name

    for j in range(3):
        add(f"embed{j}", (Frame("g.py", 81, "gpt2"),))
    for i in range(6):
        add(f"ln{i}", (call, Frame("g.py", 71, "block")))
        for h in range(4):
            add(f"att{i}_{h}", (call, Frame("g.py", 71, "block"), Frame("g.py", 40, "mha"), Frame("g.py", 30, "attention")))
        add(f"mlp{i}", (call, Frame("g.py", 75, "block")))
    for j in range(3):
        add(f"lnf{j}", (Frame("g.py", 91, "gpt2"),))
    groups = group_kernels(kernels, stacks)
    assert [g.label for g in groups] == (["g.py:81 gpt2 forward"] + [f"g.py:71-75 block #{i} forward" for i in range(6)]
                                         + ["g.py:91 gpt2 forward"])


def test_only_scopes_the_user_named_count_as_scopes():
    from inspector.hlo.graph_groups import users_scope

    def k(op_name):
        return dataclasses.replace(_kernel("k", (), "forward")[0], op_name=op_name)
    assert users_scope(k("jit(f)/jvp(layer3)/mul")) and users_scope(k("jit(f)/transpose(jvp(layer3))/attn/mul"))
    for made_by_jax in ("jit(f)/jvp(jit(take_along_axis))/gather", "jit(f)/jvp()/while/body/mul",
                        "jit(f)/transpose(jvp(btc,vc->btv))/dot_general", "jit(f)/sub", None):
        assert not users_scope(k(made_by_jax)), made_by_jax


def test_scopes_that_structure_the_program_still_win():
    kernels, stacks = _program(3, [31, 32, 33])
    scoped = []
    for k in kernels:
        m = re.match(r"[fb](\d+)_", k.name)
        layer = f"layer{m[1]}/" if m else ""
        scoped.append(dataclasses.replace(k, op_name=k.op_name.replace("(x)", f"({layer.rstrip('/')})") if layer else k.op_name,
                                          scope=f"jit(f)/{layer}".rstrip("/") if layer else None))
    labels = [g.label for g in group_kernels(scoped, stacks) if g.label.startswith("layer")]
    assert labels == ["layer0 forward", "layer1 forward", "layer2 forward", "layer2 backward", "layer1 backward", "layer0 backward"]


# ----------------------------------------------------------------------------- the 24-layer plain GPT-2


def test_plain_gpt2_has_one_forward_and_one_backward_group_per_layer_in_schedule_order(gpt2):
    block = _block_lines()
    looped = [g for g in gpt2.groups if g.repetition is not None]
    assert [g.label for g in looped] == ([f"{block} #{i} forward" for i in range(LAYERS)]
                                         + [f"{block} #{i} backward" for i in reversed(range(LAYERS))])
    assert all(g.site == f"{GPT2}:{line_of(GPT2, 'x = block(x, p)')} loss_fn" for g in looped)
    assert sum(len(g.kernels) for g in gpt2.groups) == len(gpt2.kernels)  # each kernel in exactly one group
    # honest: layer i is the layer whose weights it reads (or whose gradient its update writes)
    by = {k.name: k for k in gpt2.kernels}
    rep = {n: g.repetition for g in gpt2.groups for n in g.kernels}
    checked = 0
    for k in gpt2.kernels:
        layers = {m[1] for t in k.inputs if (m := re.match(r"params__blocks___(\d+)___", t.producer))}
        if len(layers) != 1:
            continue
        (layer,) = layers
        judged = [k] if rep[k.name] is not None else [by[t.producer] for t in k.inputs if t.producer in by]  # an update: its gradient
        for j in judged:
            if rep[j.name] is not None:
                assert rep[j.name] == int(layer), (k.name, j.name, j.group)
                checked += 1
    assert checked > 10 * LAYERS


def test_plain_gpt2_default_graph_fits_the_node_and_edge_budgets(gpt2):
    g, summary = build_dot(gpt2, "gpt2")
    kg = summary.graph
    titles = [n.title for n in kg.nodes]
    block = _block_lines()
    layer_nodes = [t for t in titles if t.startswith(block)]
    assert layer_nodes == ([f"{block} #{i} forward" for i in range(LAYERS)]
                           + [f"{block} #{i} backward" for i in reversed(range(LAYERS))])
    orders = [n.order for n in kg.nodes]
    assert orders == sorted(orders) and summary.nodes <= 200
    drawn_edges = len(kg.edges) + (len(kg.outputs) if kg.output_node else 0)
    assert drawn_edges <= 2 * summary.nodes
    assert sum(n.hbm_bytes for n in kg.nodes) == gpt2.totals["hbm_bytes"]  # nothing lost by grouping
    assert expand_example(kg) == "'block #0'"


def test_the_node_budget_holds_by_merging_a_loops_neighbours(gpt2):
    kg = build_graph(gpt2, "gpt2", max_nodes=20)
    assert len(kg.nodes) + (1 if kg.output_node else 0) <= 20
    assert sum(len(n.kernels) for n in kg.nodes) == len(gpt2.kernels)
    block = _block_lines()
    assert any(re.fullmatch(re.escape(block) + r" #\d+-\d+ (forward|backward)", n.title) for n in kg.nodes)
    assert kg.notes and "raise --max-nodes" in kg.notes[0]


def test_expand_names_a_source_group_and_a_wrong_name_lists_the_groups(gpt2):
    g, summary = build_dot(gpt2, "gpt2", expand=("block #7",))
    block = _block_lines()
    assert f"{block} #7 forward" not in summary.collapsed and f"{block} #7 backward" not in summary.collapsed
    assert f"{block} #8 forward" in summary.collapsed
    assert f'label="{block} #7 forward"' in g.source  # a cluster of its kernels
    with pytest.raises(UsageError, match=re.escape(f"{block} (forward) x24") + ".*" + re.escape(f"{block} (backward) x24")):
        build_dot(gpt2, "gpt2", expand=("layer7",))


def test_fusions_table_and_compare_use_the_same_groups(gpt2):
    from rich.console import Console

    from inspector.verbs.comparison import _pair
    from inspector.views.fusions import kernels_table

    console = Console(width=250, record=True, file=io.StringIO())
    console.print(kernels_table(gpt2, top=0))
    text = console.export_text()
    assert "group" in text and f"{_block_lines()} #7 backward" in text
    # B: the same program with one kernel of layer 3's forward gone; the rest still pair layer by layer
    gone = next(k for k in gpt2.kernels if k.group and k.group.endswith("#3 forward") and k.op_name)
    b = [k for k in gpt2.kernels if k is not gone]
    pairs, only_a, only_b = _pair(gpt2.kernels, b)
    same = lambda k: (k.group, k.kind, k.op_name, k.source)  # (a twin of it may be the one left over)
    assert [same(k) for k in only_a] == [same(gone)] and not only_b and all(ka.group == kb.group for ka, kb in pairs)


# ----------------------------------------------------------------------------- an export that finishes


@pytest.fixture
def slow_dot(tmp_path, monkeypatch):
    """A `dot` that never finishes, first on PATH."""
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return fake


def test_a_dot_that_hangs_costs_the_budget_and_our_own_layout_draws_it(gpt2, slow_dot):
    g, summary = build_dot(gpt2, "gpt2")
    started = time.perf_counter()
    lay = layout(summary.graph, g.source, budget_s=3)
    assert time.perf_counter() - started < 6
    assert lay.engine == "ranked" and "did not finish" in lay.note and "--layout-budget" in lay.note
    svg = lay.svg.decode()
    ids = set(re.findall(r'<g id="([^"]+)" class="node"', svg))
    assert {n.id for n in summary.graph.nodes} <= ids  # the HTML page finds every node by its id
    assert svg.count('class="edge"') == len(summary.graph.edges) + len(summary.graph.outputs)
    subs = {n.id: build_graph(gpt2, "x", max_nodes=300) for n in summary.graph.nodes[:2]}
    started = time.perf_counter()
    done, notes = layout_many(subs, budget_s=2)
    assert time.perf_counter() - started < 5
    assert {lay.engine for lay in done.values()} == {"ranked"} and notes and "2 of 2" in notes[0]


def test_the_ranked_layout_keeps_schedule_order_and_cannot_hang_on_every_kernel(gpt2):
    kg = build_graph(gpt2, "every kernel", max_nodes=100_000)
    started = time.perf_counter()
    svg = ranked_svg(kg).decode()
    assert time.perf_counter() - started < 20 and len(kg.nodes) > 1000
    ys = {m[1]: float(m[2]) for m in re.finditer(r'<g id="([^"]+)" class="node"><title>[^<]*</title><rect x="[^"]+" y="([^"]+)"', svg)}
    order = [n.id for n in kg.nodes if n.kind != "parameter" and n.id in ys]
    assert [ys[i] for i in order] == sorted(ys[i] for i in order)  # time runs down the page


@needs_dot
def test_export_of_the_plain_gpt2_finds_any_kernel_by_its_source_line(gpt2, tmp_path):
    from inspector.views.html_graph import graph_page

    drawing = draw(gpt2, "gpt2", groups=True, budget_s=60)
    assert drawing.svg and set(drawing.group_svgs) == {n.id for n in drawing.graph.nodes if n.kind == "group"}
    page = graph_page(drawing.graph, drawing.svg.decode(), drawing.group_svgs, drawing.notes, drawing.group_graphs)
    loop_line = line_of(GPT2, "x = block(x, p)")
    assert f"run 8 of 24 of the loop at {GPT2}:{loop_line} loss_fn" in html.unescape(page)  # #7's hover says where the loop is
    path = tmp_path / "g.html"
    path.write_text(page)
    browser = find_browser()
    if browser is None:
        pytest.skip("no headless browser (apt-get install chromium) to load the page in")
    # a line inside the loop's body: every layer's forward and backward; Enter opens the first
    softmax = line_of(GPT2, "jax.nn.softmax(att")
    # a kernel whose own source is another line but which fuses an op of this one is found too
    fused = next(k for k in gpt2.kernels if k.group.endswith("#0 forward") and f"gpt2_plain.py:{softmax}" in " ".join(k.sources)
                 and not (k.source or "").endswith(f":{softmax}"))
    dom = page_value(browser, f"file://{path}#q=gpt2_plain.py:{softmax}")
    assert re.search(rf'id="count">{2 * LAYERS} node\(s\)<', dom), dom[-1500:]
    hits = re.findall(r'<g id="([^"]+)" class="node hit"', dom)
    first = next(n for n in drawing.graph.nodes if n.title.endswith("#0 forward"))
    inner = next(n.id for n in drawing.group_graphs[first.id].nodes if fused.name in n.kernels)
    assert hits[:2 * LAYERS] != [] and first.id in hits and inner in hits  # opened, the kernel marked among its own
    # a line number matches itself, not the lines it begins: gpt2_plain.py:1 is not :12, :13, :14
    dom = page_value(browser, f"file://{path}#q=gpt2_plain.py:1")
    assert re.search(r'id="count">0 node\(s\)<', dom), dom[-1500:]


@pytest.mark.slow
@needs_dot
def test_cli_export_of_a_plain_model_on_the_cpu(cli_run, tmp_path):
    """The 4-layer variant (a CPU compile in seconds): SVG and HTML written, exit 0, one group per
    layer and phase, the advice names a group the program has."""
    svg, page, dot = tmp_path / "g.svg", tmp_path / "g.html", tmp_path / "g.dot"
    out = cli_run("export", f"{GPT2}:train_step_4", "--svg", str(svg), "--html", str(page), "--dot", str(dot),
                  "--max-nodes", "6", "--layout-budget", "20")
    assert out.returncode == 0, out.stderr
    assert "--expand 'block #0' to open one" in out.stdout and "SCOPE" not in out.stdout + out.stderr
    assert "neighbours merged" in out.stderr  # 6 nodes: it says what it simplified
    text = html.unescape(svg.read_text())
    assert "<svg" in text and re.search(r"gpt2_plain.py:\d+-\d+ block #\d", text)
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.dot", "g.html", "g.svg"]


def test_layout_budget_must_be_a_positive_number(cli_run, tmp_path):
    out = cli_run("export", f"{GPT2}:train_step_4", "--svg", str(tmp_path / "g.svg"), "--layout-budget", "0")
    assert out.returncode == 2 and "--layout-budget" in out.stderr and "seconds > 0" in out.stderr


@pytest.mark.libtpu
@pytest.mark.slow
@needs_dot
def test_cli_export_of_the_24_layer_plain_gpt2_on_tpu(cli_run, tmp_path):
    """A libtpu compile (about a minute), then the export again from the compile cache: both
    finish, the second within the 30 s the issue asks for on this 2-core machine (wall clock of
    the whole command: trace, lower, analysis, layout)."""
    args = ["export", f"{GPT2}:train_step", "--target", "tpu-v5e", "--json", str(tmp_path / "r.json")]
    assert cli_run(*args).returncode == 0
    started = time.perf_counter()
    out = cli_run("export", f"{GPT2}:train_step", "--target", "tpu-v5e", "--svg", str(tmp_path / "g.svg"),
                  "--html", str(tmp_path / "g.html"))
    seconds = time.perf_counter() - started
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert sum(1 for g in report["fusion_analysis"]["groups"] if g["repetition"] is not None) == 2 * LAYERS
    assert seconds < 30 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)), seconds  # other work on the machine slows it
