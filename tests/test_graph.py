"""The kernel graph: schedule order, forward/backward groups, folded parameters and zero-traffic
kernels, the edge budget, colours and ranks, refusal past the limits, SVG and HTML export."""
import html
import json
import re
import subprocess

import pytest

from browser import find_browser, page_value
from conftest import DATA
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.base.errors import UsageError
from inspector.hlo.fusions import analyse_fusions
from inspector.hlo.graph import build_dot, dot_available
from inspector.hlo.graph_model import build_graph
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

HLO = DATA / "hlo"
LAYERS = [f"layer{i}" for i in range(12)]
needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed (.ci/setup installs it)")


def _nodes(source: str) -> set[str]:
    return set(re.findall(r'^\s*"?([^"\s\[]+)"? \[label=', source, re.M))


def test_small_graph_has_every_kernel_parameter_and_edge():
    a = analyse_fusions((HLO / "cpu_small.hlo").read_text(), get_chip("h100"), None)
    g, summary = build_dot(a, "small")
    assert summary.collapsed == [] and summary.kernels == 2
    assert {"k_dot_fusion", "k_reduce_fusion", "p_x", "p_w", "__output__"} <= _nodes(g.source)
    assert re.search(r"subgraph cluster_g_layer0", g.source)  # op_name scope becomes a cluster
    assert re.search(r'p_x -> k_dot_fusion \[label="f32\[8,16\]', g.source)
    assert "k_reduce_fusion -> __output__" in g.source
    assert "legend" in g.source and 'label=small' in g.source


def test_zero_traffic_starts_fold_into_their_reader():
    a = analyse_fusions((HLO / "tpu_small.hlo").read_text(), get_chip("tpu-v5e"), None)
    kg = build_graph(a, "small")
    held = {n.title: n.folded for n in kg.nodes}
    assert held["scores"] == ["copy-start"] and held["kernel"] == ["slice-start"]
    assert "copy-start" not in held and "slice-start" not in held
    g, _ = build_dot(a, "small")
    assert "holds 1 folded: copy-start" in g.source


@pytest.fixture(scope="module")
def step_analysis():
    stages = capture(load_target("samples/transformer.py:train_step"), Backend(get_chip("cpu"))).stages
    return analyse_fusions(stages.hlo, get_chip("tpu-v5e"), stages.cost)


def test_step_groups_follow_the_schedule_forward_down_backward_up(step_analysis):
    g, summary = build_dot(step_analysis, "step", max_nodes=200)
    kg = summary.graph
    orders = [n.order for n in kg.nodes]
    assert orders == sorted(orders)  # nodes in schedule order
    layer_nodes = [n.title for n in kg.nodes if n.title.split()[0] in LAYERS]
    assert layer_nodes == [f"{l} forward" for l in LAYERS] + [f"{l} backward" for l in reversed(LAYERS)]
    assert summary.nodes <= 200 and summary.kernels == len(step_analysis.kernels)
    # the DOT keeps that order: an invisible chain through the nodes, first kernel first
    chain = re.findall(r"^\s*(\S+) -> (\S+) \[style=invis weight=20\]", g.source, re.M)
    ids = [n.id for n in kg.nodes if n.kind != "parameter"]
    assert chain == list(zip(ids, ids[1:]))



@needs_dot
def test_step_renders_as_a_tall_png(step_analysis, tmp_path):
    """The picture to look at (kept under pytest's tmp_path): time runs down the page."""
    import struct
    g, summary = build_dot(step_analysis, "step")
    png = subprocess.run(["dot", "-Tpng"], input=g.source.encode(), capture_output=True, timeout=120).stdout
    (tmp_path / "train_step.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert height > 2 * width  # 24 layer groups and the rest, one under the other


def test_parameters_are_figures_and_edges_stay_within_budget(step_analysis):
    g, summary = build_dot(step_analysis, "step")
    kg = summary.graph
    assert not any(n.kind == "parameter" for n in kg.nodes) and "parameters" not in _nodes(g.source)
    layer0 = next(n for n in kg.nodes if n.title == "layer0 forward")
    assert layer0.param_count == 6 and "of parameters (6)" in g.source
    assert sum(n.param_count for n in kg.nodes) >= len(step_analysis.parameters) - 1
    assert len(kg.edges) / len(kg.nodes) <= 2
    assert not kg.output_node and sum(n.output_count for n in kg.nodes) > 0  # outputs: a figure on the node
    assert max(sum(1 for e in kg.edges if n.id in (e.src, e.dst)) for n in kg.nodes) <= 8  # no hub to every layer


def test_colour_and_rank(step_analysis):
    fills = {}
    for color in ("roofline", "bytes", "bound"):
        g, summary = build_dot(step_analysis, "step", color=color)
        fills[color] = re.findall(r"fillcolor=\"?(#[0-9a-f]{6})", g.source)
    assert fills["roofline"] != fills["bound"] and "#f6c177" in fills["bound"]
    kg = summary.graph
    assert [t.rank for t in kg.top] == list(range(1, 11))
    times = [t.time_s for t in kg.top]
    assert times == sorted(times, reverse=True)
    assert re.search(r'label="#1[ ,]', g.source)
    with pytest.raises(ValueError):
        build_graph(step_analysis, "step", color="rainbow")


def test_expand_opens_one_scope(step_analysis):
    g, summary = build_dot(step_analysis, "step", max_nodes=400, expand=("layer3",))
    assert "layer3 forward" not in summary.collapsed and "layer4 forward" in summary.collapsed
    assert "subgraph cluster_g_layer3_forward" in g.source and "subgraph cluster_g_layer3_backward" in g.source
    assert "g_layer3_forward [" not in g.source
    g, summary = build_dot(step_analysis, "step", max_nodes=400, expand=("layer10",))
    assert "layer1 forward" in summary.collapsed and "layer10 forward" not in summary.collapsed  # a prefix is not a scope
    with pytest.raises(UsageError, match=r"--expand layr3: no such scope.*layer0, .*layer3"):
        build_dot(step_analysis, "step", expand=("layr3",))


def test_a_graph_past_the_node_budget_merges_neighbours_never_refuses(step_analysis):
    g, summary = build_dot(step_analysis, "step", max_nodes=12)
    kg = summary.graph
    assert summary.nodes <= 12 and sum(len(n.kernels) for n in kg.nodes) == len(step_analysis.kernels)
    merged = [gr for gr in kg.groups if gr.members]
    assert merged and kg.notes and "raise --max-nodes" in kg.notes[0]
    assert any(re.fullmatch(r"layer\d+ \.\. layer\d+ forward", gr.label) for gr in merged)  # one phase's layers merge among themselves
    orders = [n.order for n in kg.nodes]
    assert orders == sorted(orders)


@pytest.mark.parametrize("graphviz", [pytest.param("dot", marks=needs_dot), "hidden"])
def test_html_page_is_self_contained_and_search_finds_a_kernel(step_analysis, tmp_path, monkeypatch, graphviz):
    """The page works offline, with dot's SVG inline or, where dot is hidden (not installed), laid
    out in the page by the vendored Graphviz as WebAssembly."""
    from inspector.hlo.graph import dot_available
    from inspector.hlo.graph_render import draw
    from inspector.views.html_graph import graph_page

    browser = find_browser()
    if graphviz == "hidden":
        monkeypatch.setenv("PATH", str(tmp_path / "no-dot-here"))
        assert not dot_available()
    drawing = draw(step_analysis, "step", groups=True, in_page=graphviz == "hidden")
    summary = drawing
    groups = drawing.group_svgs
    page = graph_page(summary.graph, drawing.svg.decode(), groups, drawing.notes, drawing.group_graphs, dots=drawing.dots)
    assert "<script>" in page
    if graphviz == "dot":
        assert set(groups) == {n.id for n in summary.graph.nodes if n.kind == "group"}
        assert "<svg" in page and 'id="g_layer3_forward"' in page
        assert '<template id="t_g_layer3_forward"><svg' in page  # its kernels, opened on click
    else:
        assert "<svg " not in page and set(drawing.dots["groups"]) == {n.id for n in summary.graph.nodes if n.kind == "group"}
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)  # nothing from the network
    target = summary.graph.top[0]
    assert f'data-node="{target.node}"' in page
    path = tmp_path / "g.html"
    path.write_text(page)
    if browser is None:
        pytest.skip("no headless browser (apt-get install chromium) to load the page in")
    # read once the page is ready: laid out, in the page where it has no SVG of its own
    dom = page_value(browser, f"file://{path}#q={target.name}")
    hits = re.findall(r'<g id="([^"]+)" class="node hit"', dom)
    # the group holding the kernel stands out, and opens with the kernel marked among its own
    assert hits == [target.node, "k_" + re.sub(r"\W", "_", target.name)], dom[-2000:]
    assert re.search(r'id="count">1 node\(s\)<', dom) and re.search(r'id="detail" style="display: flex;"', dom)
    assert f"<td>{target.source.rsplit('/', 1)[-1]}</td>" in page  # the top table names its source line

    # what a hand does: wheel, drag, hover, a click that moves a pixel, a row of the table
    # run once the page is ready (laid out in the page where it has no SVG of its own)
    probe = """<pre id="result"></pre><script>window.inspectorReady.then(() => {
      const out = {}, svg = document.querySelector('#graph > svg');
      const vb = () => { const b = svg.viewBox.baseVal; return [b.x, b.y, b.width, b.height]; }, home = vb();
      const at = (g, dx) => { const r = g.getBoundingClientRect(); return {clientX: r.left + r.width / 2 + dx, clientY: r.top + r.height / 2 + dx, bubbles: true}; };
      svg.dispatchEvent(new WheelEvent('wheel', Object.assign(at(svg, 0), {deltaY: -100, cancelable: true}))); out.zoomed = vb()[2] < home[2];
      svg.dispatchEvent(new MouseEvent('mousedown', at(svg, 0))); window.dispatchEvent(new MouseEvent('mousemove', at(svg, 60)));
      window.dispatchEvent(new MouseEvent('mouseup', at(svg, 60))); out.panned = vb()[0] !== home[0];
      document.getElementById('reset').click();
      const g = document.getElementById('g_layer5_forward'); g.dispatchEvent(new MouseEvent('mouseenter'));
      out.hover = document.getElementById('info').textContent;
      g.dispatchEvent(new MouseEvent('mousedown', at(g, 0))); window.dispatchEvent(new MouseEvent('mousemove', at(g, 1)));
      window.dispatchEvent(new MouseEvent('mouseup', at(g, 1))); g.dispatchEvent(new MouseEvent('click', at(g, 1)));
      out.opened = document.querySelector('#detail .title').textContent; out.kernels = document.querySelectorAll('#detail svg g.node').length;
      const k = document.querySelector('#detail svg g.node[id^="k_"]'); k.dispatchEvent(new MouseEvent('mouseenter'));
      out.inner = [k.querySelector('title').textContent, document.getElementById('info').textContent];
      document.querySelector('#detail .title').click(); out.closed = getComputedStyle(document.getElementById('detail')).display;
      document.querySelector('tr.top').click(); out.row = [...document.querySelectorAll('g.node.hit')].map(g => g.id);
      document.getElementById('result').textContent = JSON.stringify(out); });</script>"""
    path.write_text(page.replace("</body>", probe + "</body>"))
    out = json.loads(page_value(browser, f"file://{path}", "window.inspectorReady.then(() => document.getElementById('result').textContent)"))
    assert out["zoomed"] and out["panned"] and out["closed"] == "none"
    assert out["hover"].startswith("layer5 forward") and "HBM" in out["hover"] and "kernels:" in out["hover"]
    assert out["opened"].startswith("layer5 forward") and out["kernels"] > 5  # a click, though the hand moved a pixel
    title, info = out["inner"]  # a kernel of the open group: its figures, not Graphviz's node id
    assert "HBM" in info and title not in info.splitlines()
    assert out["row"] == [target.node, "k_" + re.sub(r"\W", "_", target.name)]


def test_export_without_dot_says_how_to_install(cli_run, tmp_path):
    out = cli_run("export", "samples/attention.py:naive", "--svg", str(tmp_path / "x.svg"), env={"PATH": "/nonexistent"})
    assert out.returncode == 2 and "apt-get install graphviz" in out.stderr and "--dot PATH" in out.stderr
    assert list(tmp_path.iterdir()) == []


@needs_dot
def test_export_html_and_svg(cli_run, tmp_path):
    page, svg = tmp_path / "g.html", tmp_path / "g.svg"
    out = cli_run("export", "samples/attention.py:naive", "--args", "f32[1,128,32] f32[1,128,32] f32[1,128,32]",
                  "--html", str(page), "--svg", str(svg), "--color", "bound")
    assert out.returncode == 0, out.stderr
    assert f"wrote {page}" in out.stdout and f"wrote {svg}" in out.stdout
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "memory-bound" in html.unescape(text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.html", "g.svg"]  # no temporary files left


@pytest.mark.libtpu
@needs_dot
def test_export_svg_is_a_self_contained_picture(cli_run, tmp_path):
    svg, dot = tmp_path / "naive.svg", tmp_path / "naive.dot"
    out = cli_run("export", "samples/attention.py:naive", "--args", "f32[2,256,64] f32[2,256,64] f32[2,256,64]",
                  "--target", "tpu-v5e", "--svg", str(svg), "--dot", str(dot))
    assert out.returncode == 0, out.stderr
    assert f"wrote {svg}" in out.stdout
    text = html.unescape(svg.read_text())
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "samples/attention.py:naive on tpu-v5e" in text and "legend" in text
    assert "<title>samples/attention.py:naive on tpu-v5e" in text  # the picture's title, for viewers and tabs
    assert "xlink:href" not in text and "<image" not in text  # opens offline
    assert sorted(p.name for p in tmp_path.iterdir()) == ["naive.dot", "naive.svg"]  # no temporary files left


def test_export_json_is_the_whole_report(cli_run, tmp_path):
    path = tmp_path / "r.json"
    out = cli_run("export", "samples/attention.py:naive", "--args", "f32[1,128,32] f32[1,128,32] f32[1,128,32]",
                  "--json", str(path))
    assert out.returncode == 0, out.stderr
    report = json.loads(path.read_text())
    assert {"kernels", "totals", "xla_cost", "findings", "stages", "inputs"} <= set(report)
    assert report["stages"]["hlo"].startswith("HloModule") and "jaxpr" in report["stages"]
    k = report["kernels"][0]
    assert {"name", "kind", "bytes_read", "bytes_written", "flops", "source"} <= set(k)
    assert report["totals"]["bytes"] > 0 and report["totals"]["flops"] > 0


def test_export_needs_an_output(cli_run):
    out = cli_run("export", "samples/attention.py:naive")
    assert out.returncode == 2 and "--svg PATH" in out.stderr


def _tpu_step3():
    """train_step with 3 layers, compiled by libtpu for v5e (tests/data/hlo/tpu_step3.hlo.gz): XLA
    offloads forward activations with unnamed copy-starts, slices the embedding with unnamed
    slice-starts, delays weight gradients and recomputes forward ops inside the backward."""
    import gzip
    return analyse_fusions(gzip.decompress((HLO / "tpu_step3.hlo.gz").read_bytes()).decode(), get_chip("tpu-v5e"), None)


def test_unnamed_copies_and_slices_join_a_named_group():
    a = _tpu_step3()
    named = {k.name for k in a.kernels if k.op_name}
    kg = build_graph(a, "step3", max_nodes=20)
    assert all(set(n.kernels) & named for n in kg.nodes if n.kind == "group")  # no group of stray slice-starts
    layers = [n.title for n in kg.nodes if n.title.startswith("layer")]
    assert layers == ["layer0 forward", "layer1 forward", "layer2 forward", "layer2 backward", "layer1 backward", "layer0 backward"]
    # an activation copied out during layer1's forward (read back in its backward) is layer1 forward's
    by = {k.name: k for k in a.kernels}
    fwd = next(n for n in kg.nodes if n.title == "layer1 forward")
    copies = [x for x in fwd.kernels if by[x].opcode == "copy-start" and not by[x].op_name]
    assert copies and len(kg.edges) <= 1.5 * len(kg.nodes)


def test_an_open_group_box_holds_one_stretch_of_the_schedule():
    a = _tpu_step3()
    from inspector.hlo.graph import dot_of
    kg = build_graph(a, "step3", max_nodes=20, expand=("layer1",))
    g = dot_of(kg)
    for gid in ("g_layer1_forward", "g_layer1_backward"):
        box = [n.order for n in kg.nodes if n.group == gid and n.kind == "kernel" and not n.away]
        others = [n.order for n in kg.nodes if n.group != gid and not n.away and n.kind != "parameter"]
        assert box and not [o for o in others if min(box) < o < max(box)], gid  # nothing else inside its box
    away = [n for n in kg.nodes if n.away]
    assert away and all(n.away.startswith("layer1") for n in away)
    cluster = g.source[g.source.index("subgraph cluster_g_layer1_backward"):]
    cluster = cluster[:cluster.index("\n\t}")]
    assert all(f"\t\t{n.id} [" not in cluster for n in away) and "scheduled apart" in g.source


@pytest.fixture(scope="module")
def programs():
    def analysis(name):
        stages = capture(load_target(f"{DATA}/graph_programs.py:{name}"), Backend(get_chip("cpu"))).stages
        return analyse_fusions(stages.hlo, get_chip("tpu-v5e"), stages.cost)
    return analysis


def test_a_hand_written_adam_step_reads_forward_down_backward_up(programs):
    a = programs("mlp_adam_step")
    kg = build_graph(a, "mlp", max_nodes=10)
    dense = [n.title.split(" (+")[0] for n in kg.nodes if n.title.startswith("dense")]  # small runs beside them merged in: (+1 groups)
    assert dense == ["dense0 forward", "dense1 forward", "dense2 forward", "dense2 backward", "dense1 backward", "dense0 backward"]
    assert len(kg.edges) <= 1.5 * len(kg.nodes)
    # honest: the drawing's figures are the fusions view's
    assert sum(n.hbm_bytes for n in kg.nodes) == a.totals["hbm_bytes"]
    assert sum(n.time_s or 0 for n in kg.nodes) == pytest.approx(a.totals["roofline_s"])
    assert kg.top[0].name == max(a.kernels, key=lambda k: k.roofline_s * k.repeat).name


def test_a_scan_loop_is_linked_to_what_it_reads_and_what_reads_it(programs):
    a = programs("scan_step")
    params = {p.producer for p in a.parameters}
    looped = [k for k in a.kernels if k.repeat == 4]
    assert looped and any(t.producer in params for k in looped for t in k.inputs)  # w1, w2 flow into the body
    kernels = {k.name for k in a.kernels}
    assert a.results and set(a.results) <= kernels  # the gradients come out of the backward loop's kernels
    kg = build_graph(a, "scan")
    node_of = {x: n.id for n in kg.nodes for x in n.kernels}
    assert any(e.src.startswith("p_") and e.dst in {node_of[k.name] for k in looped} for e in kg.edges)


def test_the_vendored_graphviz_is_the_build_its_readme_names():
    import hashlib

    from inspector.views.html_graph import GRAPHVIZ_WASM, GRAPHVIZ_WASM_SHA256, GRAPHVIZ_WASM_VERSION

    assert hashlib.sha256(GRAPHVIZ_WASM.read_bytes()).hexdigest() == GRAPHVIZ_WASM_SHA256
    readme = (GRAPHVIZ_WASM.parent / "README.md").read_text()
    assert GRAPHVIZ_WASM_SHA256 in readme and "1.29.2" in readme and "16.1.0" in GRAPHVIZ_WASM_VERSION
    assert "Apache License" in (GRAPHVIZ_WASM.parent / "LICENSE").read_text()


def test_export_html_without_dot_lays_the_graph_out_in_the_page(cli_run, tmp_path):
    page, svg = tmp_path / "g.html", tmp_path / "g.svg"
    args = ["export", "samples/attention.py:naive", "--args", "f32[1,128,32] f32[1,128,32] f32[1,128,32]"]
    out = cli_run(*args, "--html", str(page), env={"PATH": str(tmp_path / "no-dot-here")})
    assert out.returncode == 0, out.stderr
    assert "lays the graph out itself" in out.stderr and "id='graphviz'" in page.read_text()
    refused = cli_run(*args, "--html", str(page), "--svg", str(svg), env={"PATH": str(tmp_path / "no-dot-here")})
    assert refused.returncode == 2 and "no --svg" in refused.stderr and "--html lays its graph out" in refused.stderr
