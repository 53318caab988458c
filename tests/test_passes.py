"""What each compiler pass did (--view passes, --pass) and two variants side by side (compare)."""
import io
import json
import os
import tempfile
from pathlib import Path

import pytest

from conftest import DATA
from inspector.hlo.passes import FINAL, FIRST, UnknownPass, diff_steps, index_dumps, parse_range, read_dumps

CHAIN = f"{DATA / 'passes_funcs.py'}:chain"
SCALED = f"{DATA / 'passes_funcs.py'}:scaled"
FLASH = "samples/attention.py:flash"
FLASH_ARGS = ["--args", "bf16[2,512,128] bf16[2,512,128] bf16[2,512,128]", "--set", "block_k=128"]


@pytest.fixture
def cli(cli, monkeypatch, tmp_path):
    """conftest's in-process CLI, with a private temporary folder and no compile memoized by
    another test (the pass dumps are written per compile): (code, stdout, stderr)."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    from inspector.compilation import stages

    monkeypatch.setattr(stages, "_MEMO", {})
    cli.tmp = tmp_path
    return cli


# ----------------------------------------------------------------------------- the dump reader, on files


def _module(*instrs: str) -> str:
    body = "\n".join(f"  {'ROOT ' if i == len(instrs) - 1 else ''}{line}" for i, line in enumerate(instrs))
    return f"HloModule jit_f\n\nENTRY %main (p: f32[4]) -> f32[4] {{\n{body}\n}}\n"


def _write_dumps(d):
    files = {
        "module_0000.jit_f.before_optimizations.txt": _module("%p = f32[4]{0} parameter(0)", "%x = f32[4]{0} tanh(%p)"),
        "module_0000.jit_f.0000.simp.after_pipeline-start.before_algsimp.txt":
            _module("%p = f32[4]{0} parameter(0)", "%x = f32[4]{0} tanh(%p)"),
        "module_0000.jit_f.0001.simp.after_algsimp.before_dce.txt": _module("%p = f32[4]{0} parameter(0)", "%y = f32[4]{0} sine(%p)"),
        "module_0000.jit_f.0002.main.after_fusion.before_pipeline-end.txt":
            _module("%p = f32[4]{0} parameter(0)", "%x = f32[4]{0} fusion(%p), kind=kLoop, calls=%fc",
                    "%c = (f32[4]{0}, s32[]) custom-call(%x), custom_call_target=\"foo\""),
        "module_0000.jit_f.after_optimizations.txt":
            _module("%p = f32[4]{0} parameter(0)", "%x = f32[4]{0} fusion(%p), kind=kLoop, calls=%fc",
                    "%c = (f32[4]{0}, s32[]) custom-call(%x), custom_call_target=\"foo\""),
        "module_0001.jit_other.0000.simp.after_pipeline-start.before_algsimp.txt": _module("%q = f32[4]{0} parameter(0)"),
        "module_0000.jit_f.after_optimizations-buffer-assignment.txt": "not a module",
    }
    for name, text in files.items():
        (d / name).write_text(text)


def test_read_dumps_orders_counts_and_finds_origins(tmp_path):
    _write_dumps(tmp_path)
    log = read_dumps(str(tmp_path), module="jit_f")
    assert log.module == "jit_f"
    assert [(s.pipeline, s.name) for s in log.steps] == [
        ("", FIRST), ("simp", "pipeline-start"), ("simp", "algsimp"), ("main", "fusion"), ("", FINAL)]
    assert [s.changed for s in log.steps] == [True, False, True, True, False]
    assert [s.instructions for s in log.steps] == [2, 2, 2, 3, 3]
    assert [s.delta for s in log.steps] == [2, 0, 0, 1, 0]
    assert [(s.fusions, s.custom_calls) for s in log.steps][-1] == (1, 1)  # a tuple-shaped custom call counts
    assert log.steps[1].next == "algsimp"
    # %x was made before optimizations, deleted by algsimp and made again by fusion: the fusion made it
    assert log.origins == {"p": 0, "x": 3, "c": 3}
    assert log.made_by("x") == "#3 fusion (main)"
    assert log.steps[3].made == 2


def test_pass_selectors_and_diff(tmp_path):
    _write_dumps(tmp_path)
    log = read_dumps(str(tmp_path), module="jit_f")
    assert parse_range(log, "fusion") == (3, 3)
    assert parse_range(log, "ALGSIMP") == (2, 2)
    assert parse_range(log, "2") == (2, 2) and parse_range(log, "-1") == (4, 4)
    assert parse_range(log, "algsimp..fusion") == (2, 3) and parse_range(log, "..1") == (0, 1)
    for bad in ("nosuchpass", "99", "fusion..algsimp"):
        with pytest.raises(UnknownPass):
            parse_range(log, bad)
    diff = diff_steps(log, 3, 3)
    assert "+  %x = f32[4]{0} fusion(%p)" in diff.text and "-  ROOT %y = f32[4]{0} sine(%p)" in diff.text
    assert (diff.added, diff.removed) == (2, 1)
    assert diff_steps(log, 1, 1).text == ""  # a pipeline start changes nothing


def test_read_dumps_takes_the_compiled_text_when_xla_wrote_no_final_dump(tmp_path):
    _write_dumps(tmp_path)
    (tmp_path / "module_0000.jit_f.after_optimizations.txt").unlink()
    (tmp_path / "module_0000.jit_f.0003.main.after_empty.before_pipeline-end.txt").write_text("")  # nothing in it
    final = _module("%p = f32[4]{0} parameter(0)", "%z = f32[4]{0} fusion(%p), kind=kLoop, calls=%fc")
    log = read_dumps(str(tmp_path), module="jit_f", final_hlo=final)
    assert [s.name for s in log.steps] == [FIRST, "pipeline-start", "algsimp", "fusion", "empty", FINAL]
    assert (log.steps[4].instructions, log.steps[4].delta, log.steps[4].changed) == (0, -3, True)
    assert (log.steps[-1].instructions, log.steps[-1].fusions, log.steps[-1].custom_calls) == (2, 1, 0)
    assert log.origins == {"p": 5, "z": 5}  # the empty dump broke every run of appearances
    diff = diff_steps(log, 5, 5)  # the final step's text is the one given
    assert "+  ROOT %z = f32[4]{0} fusion(%p)" in diff.text and diff.removed == 0


# ----------------------------------------------------------------------------- --view passes, compiled


def _dumps_seen(monkeypatch) -> list[tuple[list[str], bytes]]:
    """What each compile with pass dumps wrote, read as the index is made: (file names, texts joined)."""
    from inspector.compilation import pass_dumps as passes

    seen = []

    def spy(directory, *args, **kwargs):
        dumps = index_dumps(directory, kwargs.get("module"))[1]  # the module's dumps, not XLA's other files
        seen.append(([Path(d.path).name for d in dumps], b"".join(Path(d.path).read_bytes() for d in dumps)))
        return read_dumps(directory, *args, **kwargs)

    monkeypatch.setattr(passes, "read_dumps", spy)
    return seen


def test_the_pass_list_is_dumped_without_metadata_and_a_diff_with_it(cli, monkeypatch):
    seen = _dumps_seen(monkeypatch)
    code, out, err = cli("show", CHAIN, "--view", "passes", "--json")
    assert code == 0, err
    listed = json.loads(out)["passes"]
    names, texts = seen[0]
    assert any(".after_fusion." in n for n in names) and b"metadata={" not in texts  # counted only
    code, out, err = cli("show", CHAIN, "--pass", "fusion", "--json")
    assert code == 0, err
    assert len(seen[1][0]) == len(names) and b"metadata={" in seen[1][1]
    report = json.loads(out)
    assert 'op_name="jit(chain)/tanh"' in report["pass_diff"]["text"]  # the diff still names the jax op
    # the same steps with the same counts either way (on this function no pass changes metadata alone)
    without_file = lambda steps: [{k: v for k, v in s.items() if k != "file"} for s in steps]  # noqa: E731
    assert without_file(report["passes"]) == without_file(listed)




def test_passes_view_on_cpu(cli):
    code, out, err = cli("show", CHAIN, "--view", "passes", "--json")
    assert code == 0, err
    report = json.loads(out)
    passes = report["passes"]
    assert passes[0]["name"] == FIRST and passes[-1]["name"] == FINAL
    for p in passes:
        assert {"name", "pipeline", "changed", "instructions", "fusions", "delta"} <= set(p)
    fusion = next(p for p in passes if p["name"] == "fusion")
    assert fusion["changed"] and fusion["fusions_delta"] >= 1 and fusion["pipeline"]
    assert sum(p["delta"] for p in passes) == passes[-1]["instructions"]
    assert passes[-1]["instructions"] == sum(report["stages"]["op_counts"]["hlo"].values())
    # every instruction of the final HLO has the step that made it
    assert set(report["origins"]) and all(0 <= i < len(passes) for i in report["origins"].values())
    # the dumps are gone, and the compile with dump options stored nothing in the cache
    assert os.listdir(cli.tmp / "tmp") == []
    assert not (cli.tmp / "cache").exists() or not list((cli.tmp / "cache").glob("*.json"))


def test_fusion_pass_diff_shows_what_it_fused(cli):
    code, out, err = cli("show", CHAIN, "--pass", "fusion")
    assert code == 0, err
    assert out.startswith("#") and "fusion" in out.splitlines()[0]
    added = [l for l in out.splitlines() if l.startswith("+") and not l.startswith("+++")]
    removed = [l for l in out.splitlines() if l.startswith("-") and not l.startswith("---")]
    # the elementwise ops leave the entry computation and come back inside a fused computation,
    # called by one new fusion instruction
    for op in (" tanh(", " multiply(", " add("):
        assert any(op in l for l in removed), op
        assert any(op in l for l in added), op
    assert any(" fusion(" in l and "calls=%fused_computation" in l for l in added)
    assert "\x1b[" not in out  # plain in a pipe


def test_fusions_view_names_the_pass_that_made_each_kernel(cli):
    code, out, err = cli("show", CHAIN, "--view", "fusions", "--passes", "--json")
    assert code == 0, err
    kernels = json.loads(out)["kernels"]
    made = {k["name"]: k["made_by"] for k in kernels}
    assert all(made.values()), made
    loop = next(k for k in kernels if k["kind"] == "fusion:loop")
    assert " fusion (" in loop["made_by"]  # the fusion pass, not a later one
    code, out, err = cli("show", CHAIN, "--view", "fusions", "--passes")
    assert code == 0 and "made by pass" in out


def test_pass_usage_errors(cli):
    code, out, err = cli("show", CHAIN, "--pass", "nosuchpass")
    assert code == 2 and "matches no pass" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("show", CHAIN, "--view", "hlo", "--pass", "fusion")
    assert code == 2 and "--pass is for the passes view" in err


@pytest.mark.libtpu
def test_passes_view_on_tpu(cli):
    code, out, err = cli("show", CHAIN, "--view", "passes", "--target", "tpu-v5e", "--json")
    assert code == 0, err
    report = json.loads(out)
    passes = report["passes"]
    names = [p["name"] for p in passes]
    assert names[0] == FIRST and names[-1] == FINAL and "tpu_fusion" in names
    made = next(p for p in passes if p["name"] == "tpu_fusion" and p["changed"])
    assert made["fusions_delta"] >= 1
    # memory-space assignment runs after the last per-pass dump: the final step still changes the module
    assert passes[-1]["instructions"] == sum(report["stages"]["op_counts"]["hlo"].values())
    code, out, err = cli("show", CHAIN, "--target", "tpu-v5e", "--view", "fusions", "--passes", "--json")
    fusion = next(k for k in json.loads(out)["kernels"] if k["kind"].startswith("fusion"))
    assert "tpu_fusion" in fusion["made_by"]


# ----------------------------------------------------------------------------- compare


def test_compare_two_parameter_sets_on_cpu(cli):
    code, out, err = cli("compare", SCALED, "--set-a", "factor=1", "--set-b", "factor=2", "--json")
    assert code == 0, err
    c = json.loads(out)
    assert c["a"]["params"] == {"factor": 1} and c["b"]["params"] == {"factor": 2}
    totals = {t["name"]: t for t in c["totals"]}
    assert totals["HBM bytes"]["ratio"] > 1.4  # twice the output, the same input
    assert totals["kernels"]["a"] >= 1
    code, out, err = cli("compare", SCALED, "--set-a", "factor=1", "--set-b", "factor=2")
    assert code == 0 and "totals (ratio: B / A)" in out and "HBM bytes" in out


def test_compare_needs_two_variants(cli):
    code, out, err = cli("compare", SCALED)
    assert code == 2 and "two different variants" in err
    code, out, err = cli("compare", SCALED, "--set-a", "factor=1", "--set", "factor=1")
    assert code == 2


@pytest.mark.libtpu
def test_compare_flash_block_sizes_matches_the_fusions_view(cli):
    alone = {}
    for block in (128, 256):
        code, out, err = cli("show", FLASH, *FLASH_ARGS, "--set", f"block_q={block}", "--target", "tpu-v5e",
                             "--view", "fusions", "--json")
        assert code == 0, err
        kernels = json.loads(out)["kernels"]
        alone[block] = next(k["hbm_bytes_read"] + k["hbm_bytes_written"] for k in kernels if k["kind"] == "custom-call:pallas")
    assert alone[128] != alone[256]
    code, out, err = cli("compare", FLASH, *FLASH_ARGS, "--set-a", "block_q=128", "--set-b", "block_q=256",
                         "--target", "tpu-v5e", "--json")
    assert code == 0, err
    c = json.loads(out)
    change = next(ch for ch in c["changed"] if ch["a"]["kind"] == "custom-call:pallas")
    assert (change["a"]["hbm_bytes"], change["b"]["hbm_bytes"]) == (alone[128], alone[256])
    assert change["bytes_delta"] == alone[256] - alone[128]
    assert c["only_a"] == [] and c["only_b"] == []
    vmem = c["vmem"][0]
    assert vmem["kernel"] == "flash_attention_fwd" and vmem["estimate_b"] > vmem["estimate_a"]
    assert vmem["compiler_a"] and vmem["compiler_b"]  # libtpu's own figure for the custom call


# ----------------------------------------------------------------------------- printing


def test_print_fitting_lays_a_table_out_once_to_print_it():
    """The check that a table fits and the print are one layout (the pass list and the fusions of
    a big program cost a layout each), and what is printed is what print would have printed."""
    from rich.console import Console
    from rich.table import Table

    from inspector.views.printer import print_fitting

    layouts = []

    class Counted(Table):
        def __rich_console__(self, console, options):
            layouts.append(options.max_width)
            yield from super().__rich_console__(console, options)

    def table():
        t = Counted(title="a title longer than the table is wide, which wraps")
        for name in ("step", "pass"):
            t.add_column(name)
        t.add_row("1", "simplification_after_layout_assignment")
        return t

    out = io.StringIO()
    print_fitting(Console(file=out, width=30, color_system=None), table())
    assert len(layouts) == 1 and layouts[0] >= len("simplification_after_layout_assignment")
    plain = io.StringIO()
    Console(file=plain, width=layouts[0], color_system=None).print(table())
    unpadded = "\n".join(line.rstrip() for line in plain.getvalue().split("\n"))  # a file: no padding at line ends
    assert out.getvalue() == unpadded and "simplification_after_layout_assignment" in out.getvalue()


def test_the_ui_worker_keeps_one_compile_of_dumps_for_its_diffs(cli, monkeypatch):
    """Enter on a step (Session.pass_diff): the first diff compiles with dumps, the next ones for
    the same module read the kept folder; another module's dumps replace them; stale folders go."""
    from inspector.compilation import pass_dumps as passes, stages
    from inspector.session import Session

    stale = cli.tmp / "tmp" / "inspector-passes-killed"
    stale.mkdir()
    os.utime(stale, (0, 0))
    compiles = []
    real = stages.capture
    monkeypatch.setattr(passes, "capture", lambda *a, **k: (compiles.append(k["compile"]), real(*a, **k))[1])
    session = Session(CHAIN)
    first = session.pass_diff("1")
    folder, log = passes._KEPT.folder, passes._KEPT.value
    assert compiles.count(True) == 1 and not stale.exists() and os.path.isdir(folder)
    changed = next(s.index for s in log.steps if s.changed and s.index > 1)
    second = session.pass_diff(str(changed))
    assert compiles.count(True) == 1 and (first.first, second.first) == (1, changed) and second.text
    Session(SCALED).pass_diff("1")
    assert compiles.count(True) == 2 and not os.path.isdir(folder) and os.path.isdir(passes._KEPT.folder)
    passes._KEPT.forget()
    assert passes._KEPT.folder is None and not list((cli.tmp / "tmp").glob("inspector-passes-*"))
