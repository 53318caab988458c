"""The kernel graph: DOT structure, collapsing by scope, refusal past the limits, SVG export."""
import html
import json
import re

import pytest

from conftest import DATA
from inspector.backends import Backend
from inspector.chips import get_chip
from inspector.errors import UsageError
from inspector.hlo.fusions import analyse_fusions
from inspector.hlo.graph import SVG_NODE_LIMIT, build_dot, dot_available, render_svg
from inspector.stages import capture
from inspector.target import load_target

HLO = DATA / "hlo"


def _nodes(source: str) -> set[str]:
    return set(re.findall(r'^\s*"?([^"\s\[]+)"? \[label=', source, re.M))


def test_small_graph_has_every_kernel_parameter_and_edge():
    a = analyse_fusions((HLO / "cpu_small.hlo").read_text(), get_chip("h100"), None)
    g, summary = build_dot(a, "small")
    assert summary.collapsed == [] and summary.kernels == 2
    assert {"dot_fusion", "reduce_fusion", "x", "w", "__output__"} <= _nodes(g.source)
    assert "subgraph cluster_scope_layer0" in g.source  # op_name scope becomes a cluster
    assert re.search(r'x -> dot_fusion \[label="f32\[8,16\]', g.source)
    assert "reduce_fusion -> __output__" in g.source
    assert "legend" in g.source and 'label=small' in g.source


@pytest.fixture(scope="module")
def step_analysis():
    stages = capture(load_target("samples/transformer.py:train_step"), Backend(get_chip("cpu"))).stages
    return analyse_fusions(stages.hlo, get_chip("tpu-v5e"), stages.cost)


def test_large_program_collapses_layers(step_analysis):
    g, summary = build_dot(step_analysis, "step", max_nodes=200)
    layers = [f"layer{i}" for i in range(12)]
    assert set(layers) <= set(summary.collapsed)
    assert summary.nodes <= 200 and summary.kernels == len(step_analysis.kernels)
    nodes = _nodes(g.source)
    assert {f"scope_layer{i}" for i in range(12)} <= nodes
    assert "parameters" in nodes  # 75 parameters grouped into one node


def test_expand_opens_one_scope(step_analysis):
    g, summary = build_dot(step_analysis, "step", max_nodes=400, expand=("layer3",))
    assert "layer3" not in summary.collapsed and "layer4" in summary.collapsed
    assert "subgraph cluster_scope_layer3" in g.source and "scope_layer3 [" not in g.source


def test_too_many_nodes_is_refused_with_the_count_and_the_flags(step_analysis):
    with pytest.raises(UsageError, match=r"has \d+ nodes.*--max-nodes.*--expand"):
        build_dot(step_analysis, "step", max_nodes=5)
    g, summary = build_dot(step_analysis, "step", max_nodes=100_000)
    assert summary.nodes > SVG_NODE_LIMIT
    with pytest.raises(UsageError, match=rf"{summary.nodes} nodes.*--expand SCOPE.*--dot PATH"):
        render_svg(g, summary.nodes)


@pytest.mark.tpu
@pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed (.ci/setup installs it)")
def test_export_svg_is_a_self_contained_picture(run_cli, tmp_path):
    svg, dot = tmp_path / "naive.svg", tmp_path / "naive.dot"
    out = run_cli("export", "samples/attention.py:naive", "--args", "f32[2,256,64] f32[2,256,64] f32[2,256,64]",
                  "--target", "tpu-v5e", "--svg", str(svg), "--dot", str(dot))
    assert out.returncode == 0, out.stderr
    assert f"wrote {svg}" in out.stdout
    text = html.unescape(svg.read_text())
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "samples/attention.py:naive on tpu-v5e" in text and "legend" in text
    assert "<title>samples/attention.py:naive on tpu-v5e" in text  # the picture's title, for viewers and tabs
    assert "xlink:href" not in text and "<image" not in text  # opens offline
    assert sorted(p.name for p in tmp_path.iterdir()) == ["naive.dot", "naive.svg"]  # no temporary files left


def test_export_without_dot_says_how_to_install(run_cli, tmp_path):
    out = run_cli("export", "samples/attention.py:naive", "--svg", str(tmp_path / "x.svg"), env={"PATH": "/nonexistent"})
    assert out.returncode == 2 and "apt-get install graphviz" in out.stderr and "--dot PATH" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_export_json_is_the_whole_report(run_cli, tmp_path):
    path = tmp_path / "r.json"
    out = run_cli("export", "samples/attention.py:naive", "--args", "f32[1,128,32] f32[1,128,32] f32[1,128,32]",
                  "--json", str(path))
    assert out.returncode == 0, out.stderr
    report = json.loads(path.read_text())
    assert {"kernels", "totals", "xla_cost", "findings", "stages", "inputs"} <= set(report)
    assert report["stages"]["hlo"].startswith("HloModule") and "jaxpr" in report["stages"]
    k = report["kernels"][0]
    assert {"name", "kind", "bytes_read", "bytes_written", "flops", "source"} <= set(k)
    assert report["totals"]["bytes"] > 0 and report["totals"]["flops"] > 0


def test_export_needs_an_output(run_cli):
    out = run_cli("export", "samples/attention.py:naive")
    assert out.returncode == 2 and "--svg PATH" in out.stderr
