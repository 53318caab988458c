"""The CLI end to end, as a subprocess: views, JSON, exit codes, one-line errors."""
import json

import pytest

from conftest import DATA, line_of

FUNCS = str(DATA / "funcs.py")
NAIVE = "samples/attention.py:naive"
SMALL = ["--args", "f32[2,128,32] f32[2,128,32] f32[2,128,32]"]


def test_overview_json_shape(cli_run):
    out = cli_run("show", NAIVE, *SMALL, "--view", "overview", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is True
    assert report["target"]["function"] == "naive"
    assert [i["name"] for i in report["inputs"]] == ["q", "k", "v"]
    assert report["inputs"][0]["type"] == "f32[2,128,32]"
    stages = report["stages"]
    assert stages["backend"] == "cpu"
    assert stages["cost"]["flops"] > 2 * 2 * 128 * 128 * 32  # two batched matmuls at least
    assert stages["memory"]["argument_size_in_bytes"] == 3 * 2 * 128 * 32 * 4
    assert set(stages["op_counts"]) == {"jaxpr", "stablehlo", "hlo"}
    assert "hlo" not in stages and "jaxpr" not in stages  # texts only for their views
    assert report["findings"] == []


@pytest.mark.parametrize("view, needle", [
    ("jaxpr", "dot_general"),
    ("stablehlo", "stablehlo.dot_general"),
    ("hlo", "HloModule jit_naive"),
])
def test_text_views_print_plain_when_piped(cli_run, view, needle):
    out = cli_run("show", NAIVE, *SMALL, "--view", view)
    assert out.returncode == 0, out.stderr
    assert needle in out.stdout
    assert "\x1b[" not in out.stdout  # no colour codes in a pipe
    if view == "jaxpr":
        scores = line_of("samples/attention.py", 'jnp.einsum("bqd,bkd->bqk"')
        assert f"samples/attention.py:{scores}" in out.stdout  # each equation's source line


def test_inspect_defaults_and_set(cli_run):
    out = cli_run("show", "samples/attention.py:flash", "--set", "block_q=256", "--view", "jaxpr")
    assert out.returncode == 0, out.stderr
    assert "pallas_call" in out.stdout and "bf16[4,4096,128]" in out.stdout
    assert "256" in out.stdout


def test_bare_target_prints_the_overview(cli_run):
    out = cli_run(NAIVE, *SMALL)
    assert out.returncode == 0, out.stderr
    assert "naive" in out.stdout and "XLA cost" in out.stdout


def test_chips_lists_every_target(cli_run):
    out = cli_run("chips")
    assert out.returncode == 0
    for name in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "a100", "h100", "h200", "b200"):
        assert name in out.stdout
    rows = json.loads(cli_run("chips", "--json").stdout)
    v5e = next(r for r in rows if r["name"] == "tpu-v5e")
    assert v5e["scoped_vmem_bytes"] == 16 * 2**20 and v5e["sources"]["scoped_vmem_bytes"].startswith("measured")


@pytest.mark.parametrize("args, code, needle", [
    (["show", "missing.py:f"], 2, "no such file"),
    (["show", f"{FUNCS}:nope"], 2, "no function named"),
    (["show", NAIVE, "--args", "f32[2,x]"], 2, "bad dimension 'x'"),
    (["show", NAIVE, "--args", "zz[2]"], 2, "unknown dtype 'zz'"),
    (["show", NAIVE, "--args", "f32[2,8,4]"], 2, "needs 3 inputs"),
    (["show", NAIVE, "--set", "nope=1"], 2, "takes no parameter 'nope'"),
    (["show", NAIVE, "--view", "nope"], 2, "invalid choice"),
    (["show", NAIVE, "--target", "tpu-v9"], 2, "unknown target"),
    (["show", f"{FUNCS}:raises_in_trace"], 1, "funcs.py:23"),
    ([], 2, "give a target"),
])
def test_bad_input_is_one_line_and_an_exit_code(cli_run, args, code, needle):
    out = cli_run(*args)
    assert out.returncode == code, out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(cli_run):
    out = cli_run("--debug", "show", f"{FUNCS}:raises_in_trace")
    assert out.returncode != 0 and "Traceback" in out.stderr


@pytest.mark.libtpu
def test_the_pallas_view_names_the_error_that_makes_show_exit_1(cli_run, tmp_path):
    """A kernel Mosaic cannot lower: the error is the report's, not a kernel's; the pallas view
    shows it instead of "no findings" beside exit 1."""
    f = tmp_path / "mixed.py"
    f.write_text(
        "import jax\nfrom jax.experimental import pallas as pl\n"
        "def mixed(x):\n"
        "    def kernel(x_ref, o_ref):\n        o_ref[...] = x_ref[pl.ds(0, 8), :]\n"
        "    return pl.pallas_call(kernel, grid=(8,), in_specs=[pl.BlockSpec((pl.Element(16), 128), lambda i: (i * 8, 0))],\n"
        "        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)\n"
        "INSPECT = {'mixed': {'args': 'f32[72,128]'}}\n")
    out = cli_run("show", f"{f}:mixed", "--target", "tpu-v5e", "--view", "pallas")
    assert out.returncode == 1, out.stderr
    # a Pallas TPU lowering failure of no known kind: the compiler's words, at the pallas_call's line
    assert "mosaic-error" in out.stdout and "All block dimensions must be Elements" in out.stdout


def _every_parser(parser):
    """The parser and every subparser under it, however deep."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)


def test_no_parser_takes_an_abbreviated_option():
    """`tune --time` once meant --time-budget (argparse's prefix matching): every parser refuses prefixes."""
    from inspector.commands.parser import build_parser

    parsers = list(_every_parser(build_parser()))
    assert len(parsers) > 10
    assert [p.prog for p in parsers if p.allow_abbrev] == []


@pytest.mark.parametrize("args", [["tune", "samples/matmul.py:tiled", "--target", "tpu-v5e", "--time"],
                                  ["tune", "samples/matmul.py:tiled", "--target", "tpu-v5e", "--time", "5"],
                                  ["show", NAIVE, "--vie", "hlo"], ["check", NAIVE, "--estimate"]])
def test_an_abbreviated_option_is_refused_in_one_line(cli, args):
    code, out, err = cli(*args)
    assert code == 2 and "unrecognized arguments: --" in err and len(err.strip().splitlines()) == 1, err


def test_tune_measure_without_a_tpu_advises_what_tune_has(monkeypatch, cli):
    import inspector.base.environment as environment

    monkeypatch.setattr(environment, "tpu_attached", lambda: False)
    code, out, err = cli("tune", "samples/matmul.py:tiled", "--target", "tpu-v5e", "--measure")
    assert code == 2 and "without --measure, tune ranks by libtpu's estimate" in err and "--time" not in err, err


def test_tune_measure_top_zero_times_every_candidate(monkeypatch):
    """--top 0 means all, for the tables and for --measure alike; no --top times MEASURE_TOP."""
    import inspector.tuning.measured as measured
    from inspector.tuning.model import RANKED, TuneResult, TuneRow
    from inspector.tuning.rank import rank_all

    rows = [TuneRow(shape="f32[8]", chip="tpu-v5e", params={"bm": bm}, status=RANKED, estimated_seconds=bm * 1e-3)
            for bm in range(1, 12)]
    swept = TuneResult(target="k.py:mm", swept=["bm"], fixed={}, defaults={"bm": 1},
                       shapes=rank_all(["f32[8]"], ["tpu-v5e"], rows), counts={})
    timed = []
    monkeypatch.setattr(measured, "run_isolated", lambda fn, spec, chip, jobs, env=None: timed.append(len(jobs)) or [1e-3] * len(jobs))
    monkeypatch.setattr(measured.environment, "chip_env", lambda: {})
    for top in (None, 0, 3):
        measured.measure_rankings(swept, "k.py:mm", {"f32[8]": None}, {}, measured.measure_count(top), "tpu-v5e")
    assert timed == [measured.MEASURE_TOP, 11, 3]


@pytest.mark.parametrize("argv", [["check", "samples/bugs.py:dropped_tail", "--estimate-only"], ["chips"],
                                  ["show", NAIVE, *SMALL, "--view", "fusions"]], ids=lambda a: a[0])
def test_tables_in_a_pipe_end_no_line_in_spaces(cli_run, argv):
    out = cli_run(*argv)
    assert out.returncode in (0, 1), out.stderr
    assert [line for line in out.stdout.splitlines() if line != line.rstrip()] == []


def test_doctor_in_a_pipe_ends_no_line_in_spaces(monkeypatch):
    """doctor's table (its compiles stubbed: the table is the point)."""
    import io

    from inspector.commands.doctor import Check, Checkup
    from inspector.views.doctor import doctor_view
    from inspector.views.printer import make_console, print_fitting

    out = io.StringIO()
    checkup = Checkup([Check("python", "info", "3.11"), Check("dot (Graphviz)", "warn", "not found: " + "long words " * 20)])
    print_fitting(make_console(out), doctor_view(checkup))
    lines = out.getvalue().splitlines()
    assert len(lines) > 2 and [line for line in lines if line != line.rstrip()] == []
