"""`inspector baseline save|diff` and `inspector check --baseline`: the performance gate.

A small Pallas matmul (its block sizes on lines of their own) is copied into a folder per edit:
the baseline is saved for tpu-v5e and tpu-v6e from the first copy; a copy whose block halves
(twice the HBM reads of b) and one whose block no longer fits v5e's scoped VMEM are checked
against it. The compiles are shared by the module (each folder compiled once per chip, then the
compile cache)."""
from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from inspector.base.errors import UsageError
from inspector.baseline.compare import DEFAULT_TOLERANCES, Tolerance, compare, figure_change, parse_tolerances
from inspector.baseline.record import SCHEMA, Baseline, kernel_keys, load, new_baseline, stem
from inspector.baseline.targets import expand

GATE = '''"""A small Pallas matmul for the baseline tests."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM = 128
BN = 256


def _kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def mm(a, b):
    (m, k), n = a.shape, b.shape[1]
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // BM, n // BN),
        in_specs=[pl.BlockSpec((BM, k), lambda i, j: (i, 0)), pl.BlockSpec((k, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        name="mm",
    )(a, b)


def scaled(x):
    return jnp.tanh(x) * 2.0 + 1.0


INSPECT = {
    "mm": {"args": "f32[2048,2048] f32[2048,512]"},
    "scaled": {"args": "f32[256,256]"},
}
'''
CALL_LINE = "gate.py:16"  # the pallas_call: the kernel's source line


def inspector(folder: Path, *argv: str) -> tuple[int, str, str]:
    """The CLI in this process, run in ``folder``: (exit code, stdout, stderr)."""
    from inspector.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        mp.setenv("NO_COLOR", "1")
        mp.setenv("COLUMNS", "160")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv), isolate=False)
    return code, out.getvalue(), err.getvalue()


def _copy(root: Path, name: str, edit: tuple[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir()
    text = GATE if edit is None else GATE.replace(*edit)
    assert edit is None or text != GATE
    (folder / "gate.py").write_text(text)
    return folder


# ---------------------------------------------------------------- no compiles


def test_tolerances_parse_and_refuse():
    found = parse_tolerances(["time=5%,hbm_bytes=1024", "spills=0"])
    assert found["time"] == Tolerance(relative=0.05) and found["hbm_bytes"] == Tolerance(absolute=1024)
    assert parse_tolerances([]) == DEFAULT_TOLERANCES
    for bad, said in (("wibble=2%", "no figure 'wibble'"), ("compiled=1", "compared exactly"),
                      ("time=abc", "give a share"), ("time=-1%", "not negative"), ("time", "FIGURE=N%")):
        with pytest.raises(UsageError, match=said):
            parse_tolerances([bad])


def test_a_floor_compares_as_a_floor_and_kinds_are_reported():
    t = DEFAULT_TOLERANCES["time"]
    est = {"seconds": 1e-4, "kind": "estimate", "high_seconds": None}
    assert figure_change("time", est, dict(est, seconds=1.01e-4), t) is None  # within 2%
    assert figure_change("time", est, dict(est, seconds=1.1e-4), t) == ("+10.0%", "worse")
    floor = dict(est, kind="floor")
    assert figure_change("time", floor, dict(floor, seconds=2e-4), t) == ("+100.0% (floor)", "worse")
    assert figure_change("time", est, floor, t) == ("estimate -> floor", "changed")
    low = {"seconds": 1e-4, "kind": "range", "high_seconds": 2e-4}
    words, what = figure_change("time", low, dict(low, high_seconds=3e-4), t)
    assert what == "worse" and "top +50.0%" in words
    assert figure_change("hbm_bytes", 100, 100, Tolerance()) is None
    assert figure_change("hbm_bytes", 100, 101, Tolerance()) == ("+1.0%", "worse")
    assert figure_change("vmem_fits", True, None, Tolerance()) == ("fits -> undecided", "worse")
    assert figure_change("findings", ["a"], ["a", "b"], Tolerance()) == ("+b", "worse")


def test_kernels_are_keyed_by_what_survives_edits():
    assert stem("fusion.12") == "fusion" and stem("matmul.1") == "matmul" and stem("copy") == "copy"
    keys = kernel_keys([("fusion:loop", "fusion.3", "a.py:4"), ("fusion:loop", "fusion.7", "a.py:4"),
                        ("custom-call:pallas", "mm.1", "a.py:9")])
    assert keys == ["fusion:loop fusion a.py:4", "fusion:loop fusion a.py:4 #2", "custom-call:pallas mm a.py:9"]


def _doc(kernels: dict, program: dict | None = None, versions: dict | None = None) -> Baseline:
    chip = {"program": {"compiled": True, "hbm_bytes": 10, **(program or {})}, "kernels": kernels}
    data = new_baseline(["tpu-v5e"], False, {"k.py:f": {"spec": "k.py:f", "sets": [], "chips": {"tpu-v5e": chip}}}).data
    if versions:
        data["versions"].update(versions)
    return Baseline(data)


def _kernel(source: str, hbm: int = 10, name: str = "mm.1") -> dict:
    return {"name": name, "kind": "custom-call:pallas", "source": source, "hbm_bytes": hbm, "flops": 4.0}


def test_new_removed_and_moved_kernels_and_a_chip_that_stopped_compiling():
    before = _doc({"custom-call:pallas mm k.py:9": _kernel("k.py:9"), "custom-call:pallas add k.py:20": _kernel("k.py:20", name="add")})
    moved = _doc({"custom-call:pallas mm k.py:11": _kernel("k.py:11"),  # two lines added above: the same kernel
                  "custom-call:pallas add k.py:22": _kernel("k.py:22", name="add")})
    assert compare(before, moved, DEFAULT_TOLERANCES).ok
    after = _doc({"custom-call:pallas mm k.py:9": _kernel("k.py:9", hbm=20), "custom-call:pallas mul k.py:30": _kernel("k.py:30", name="mul")})
    result = compare(before, after, DEFAULT_TOLERANCES)
    rows = {(c.kernel, c.figure): c for c in result.changes}
    assert rows[("mm", "hbm_bytes")].change == "+100.0%" and rows[("mm", "hbm_bytes")].source == "k.py:9"
    assert rows[("add", "kernel")].change == "kernel removed" and rows[("mul", "kernel")].change == "new kernel"
    assert ("(program)", "hbm_bytes") not in rows  # the kernel's row says it
    refused = _doc({}, {"compiled": False, "error_kind": "compile-vmem-oom", "error_kernel": "mm", "error_source": "k.py:9"})
    [row] = compare(before, refused, DEFAULT_TOLERANCES).changes
    assert (row.kernel, row.source, row.change) == ("mm", "k.py:9", "stopped compiling (compile-vmem-oom)")


def test_versions_head_a_diff(tmp_path):
    a, b = _doc({}), _doc({}, {"hbm_bytes": 12}, versions={"jax": "0.10.1", "libtpu": "0.0.40"})
    (tmp_path / "a.json").write_text(a.text())
    (tmp_path / "b.json").write_text(b.text())
    code, out, _ = inspector(tmp_path, "baseline", "diff", "a.json", "b.json")
    assert code == 1
    assert out.startswith("baseline diff a.json b.json\n  A: jax ") and "  B: jax 0.10.1, " in out and "libtpu 0.0.40" in out
    assert "hbm_bytes" in out and "+20.0%" in out and "note: versions differ" in out
    code, out, _ = inspector(tmp_path, "baseline", "diff", "a.json", "a.json", "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_targets_expand_folders_globs_and_files(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "one.py").write_text('INSPECT = {"f": {}, "g": {}}\n')
    (tmp_path / "pkg" / "two.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "built.py").write_text("INSPECT = dict(f={})\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        assert expand(["pkg/one.py"]).specs == ["pkg/one.py:f", "pkg/one.py:g"]
        assert expand(["pkg/one.py:g", "./pkg/one.py:g"]).specs == ["pkg/one.py:g"]
        assert expand(["pkg/o*.py"]).specs == ["pkg/one.py:f", "pkg/one.py:g"]
        assert expand(["pkg/one.py:g"]).files == []  # one function: its file's other entries were not asked for
        with pytest.raises(UsageError, match="not a dict written out"):
            expand(["pkg"])
        (tmp_path / "pkg" / "built.py").unlink()
        assert expand(["pkg"]).files == ["pkg/one.py"]
        for bad, said in (("pkg/two.py", "has no INSPECT"), ("nope.py", "no such file"), ("nope.py:f", "no such file"),
                          ("pkg/*.txt", "holds no file")):
            with pytest.raises(UsageError, match=said):
                expand([bad])


def test_bad_baselines_are_one_line_errors(tmp_path):
    (tmp_path / "gate.py").write_text(GATE)
    (tmp_path / "text.json").write_text("not json")
    (tmp_path / "other.json").write_text('{"schema": "something/2"}')
    (tmp_path / "list.json").write_text("[1, 2]")
    ok = _doc({})
    data = json.loads(ok.text())
    data["targets"]["k.py:f"]["chips"]["tpu-v5e"]["program"]["speed"] = 1
    (tmp_path / "unknown.json").write_text(json.dumps(data))
    for name, said in (("missing.json", "no such file: make one with `inspector baseline save missing.json"),
                       ("text.json", "not JSON"), ("other.json", f"schema: is 'something/2', not '{SCHEMA}'"),
                       ("list.json", "not an object"), ("unknown.json", "program.speed: is no figure")):
        for argv in (("check", "gate.py", "--baseline", name), ("baseline", "diff", name, name)):
            code, out, err = inspector(tmp_path, *argv)
            assert code == 2 and out == "", (argv, out)
            assert len(err.strip().splitlines()) == 1 and said in err and "Traceback" not in err, (argv, err)
    for argv, said in ((("check", "gate.py:mm", "--tolerance", "time=5%"), "--tolerance applies to --baseline"),
                       (("check", "gate.py:mm", "gate.py:scaled"), "several with --baseline"),
                       (("check", "gate.py", "--baseline", "x.json", "--estimate-only"), "--estimate-only does not go"),
                       (("baseline",), "baseline needs an action"),
                       (("baseline", "save", "out.json", "gate.py", "--target", "cpu"), "not cpu"),
                       (("baseline", "save", "out.json", "gate.py", "--time-budget", "30"), "give --time too"),
                       (("baseline", "save", "no/such/folder/out.json", "gate.py"), "no/such/folder"),
                       (("baseline", "save", "out.json", "nope.py"), "no such file")):
        code, out, err = inspector(tmp_path, *argv)
        assert code == 2 and said in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "out.json").exists()


def test_loading_what_was_saved(tmp_path):
    path = tmp_path / "b.json"
    from inspector.baseline.record import save

    save(_doc({"custom-call:pallas mm k.py:9": _kernel("k.py:9")}), str(path))
    text = path.read_text()
    assert text == load(str(path)).text()  # stable: sorted keys, read back as written
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # no temporary file left


# ---------------------------------------------------------------- libtpu compiles


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """The baseline of the unchanged copy for tpu-v5e and tpu-v6e, and the copies to check."""
    root = tmp_path_factory.mktemp("gate")
    cache = root / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSPECTOR_CACHE_DIR", str(cache))
        base = _copy(root, "base")
        code, out, err = inspector(base, "baseline", "save", "perf.json", "gate.py", "--target", "tpu-v5e,tpu-v6e")
        assert code == 0, out + err
        yield {"root": root, "base": base, "saved": out,
               "hbm": _copy(root, "hbm", ("BM = 128", "BM = 64")),  # b re-read twice as often
               "vmem": _copy(root, "vmem", ("BM = 128", "BM = 1024")),  # 23 MiB of blocks: over v5e's 16, under v6e's 32
               "cache": cache}


def _check(gate, folder: Path, *more: str) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSPECTOR_CACHE_DIR", str(gate["cache"]))
        return inspector(folder, "check", "gate.py", "--baseline", str(gate["base"] / "perf.json"), *more)


@pytest.mark.libtpu
def test_save_writes_every_entry_per_chip(gate):
    assert "wrote perf.json: 2 targets on tpu-v5e, tpu-v6e" in gate["saved"]
    data = json.loads((gate["base"] / "perf.json").read_text())
    assert set(data["targets"]) == {"gate.py:mm", "gate.py:scaled"} and data["chips"] == ["tpu-v5e", "tpu-v6e"]
    assert set(data["versions"]) == {"inspector", "jax", "jaxlib", "libtpu"} and data["versions"]["libtpu"]
    kernels = data["targets"]["gate.py:mm"]["chips"]["tpu-v5e"]["kernels"]
    assert list(kernels) == [f"custom-call:pallas mm {CALL_LINE}"]
    mm = kernels[f"custom-call:pallas mm {CALL_LINE}"]
    assert mm["hbm_bytes"] > 0 and mm["flops"] == 2 * 2048 * 2048 * 512 and mm["vmem_estimate"] > 0
    program = data["targets"]["gate.py:mm"]["chips"]["tpu-v5e"]["program"]
    assert program["compiled"] is True and program["vmem_fits"] is True and program["compiler_fits"] is True
    assert (gate["base"] / "perf.json").read_text() == json.dumps(data, indent=2, sort_keys=True) + "\n"


@pytest.mark.libtpu
def test_unchanged_code_passes_twice_from_the_cache(gate):
    """In this process the lowered module's locations hold the caller's frames too, so both checks
    are made from one line: the second finds every compile of the first in the cache."""
    import inspector.compilation.compile_cache as compile_cache

    runs = []
    for _ in range(2):
        runs.append(_check(gate, gate["base"]))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("INSPECTOR_CACHE_DIR", str(gate["cache"]))
            runs[-1] += (compile_cache.info().entries,)
    for code, out, err, _ in runs:
        assert code == 0, out + err
        assert "nothing moved past its tolerance: 2 targets on tpu-v5e, tpu-v6e, 4 kernels compared" in out
    assert "compiles: 4, 4 from the compile cache" in runs[1][1]
    assert runs[1][3] == runs[0][3]  # nothing compiled again


@pytest.mark.libtpu
def test_the_command_line_checks_from_the_cache(tmp_path, run_cli):
    """The CLI as CI runs it: each target in a process of its own, the second run's compiles from the cache."""
    (tmp_path / "gate.py").write_text(GATE)
    env = {"INSPECTOR_CACHE_DIR": str(tmp_path / "cache")}
    done = run_cli("baseline", "save", "perf.json", "gate.py:scaled", env=env, cwd=tmp_path)
    assert done.returncode == 0 and "wrote perf.json: 1 target on tpu-v5e" in done.stdout, done.stderr
    done = run_cli("check", "gate.py:scaled", "--baseline", "perf.json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing moved past its tolerance" in done.stdout and "compiles: 1, 1 from the compile cache" in done.stdout


@pytest.mark.libtpu
def test_twice_the_hbm_traffic_names_the_kernel_line_and_figure(gate):
    code, out, err = _check(gate, gate["hbm"])
    assert code == 1, out + err
    lines = out.splitlines()
    rows = [(line.split(), lines[i + 1].split()) for i, line in enumerate(lines) if "hbm_bytes" in line]
    assert "gate.py:mm" in lines and len(rows) == 2, out  # the target's title, a row per chip
    for (chip, kernel, figure, *_, change), (source,) in rows:
        assert (kernel, figure, change, source) == ("mm", "hbm_bytes", "+76.2%", CALL_LINE), out
    assert {r[0][0] for r in rows} == {"tpu-v5e", "tpu-v6e"}, out
    code, out, err = _check(gate, gate["hbm"], "--json", "--tolerance", "hbm_bytes=80%,vmem_estimate=20%,compiler_vmem=20%")
    assert code == 0, out  # within the tolerances given
    code, out, err = _check(gate, gate["hbm"], "--json")
    found = json.loads(out)
    assert code == 1 and found["ok"] is False
    row = next(c for c in found["changes"] if c["figure"] == "hbm_bytes" and c["chip"] == "tpu-v5e")
    assert (row["kernel"], row["source"], row["what"]) == ("mm", CALL_LINE, "worse") and row["after"] > row["before"]


@pytest.mark.libtpu
def test_a_block_over_v5e_vmem_says_the_chip_stopped_compiling(gate):
    code, out, err = _check(gate, gate["vmem"])
    assert code == 1, out + err
    lines = out.splitlines()
    stopped = [i for i, line in enumerate(lines) if "stopped compiling" in line]
    assert len(stopped) == 1 and lines[stopped[0]].split()[:3] == ["tpu-v5e", "mm", "compiled"], out
    assert lines[stopped[0] + 1].split()[0] == CALL_LINE and "compile-vmem-oom" in out, out
    found = json.loads(_check(gate, gate["vmem"], "--json")[1])
    [row] = [c for c in found["changes"] if c["figure"] == "compiled"]
    assert (row["chip"], row["kernel"], row["source"], row["what"]) == ("tpu-v5e", "mm", CALL_LINE, "stopped")
    assert row["change"] == "stopped compiling (compile-vmem-oom)"
    assert "fits -> does not fit" in out
    assert not any("tpu-v6e" in line and "compiled" in line for line in out.splitlines())


@pytest.mark.libtpu
def test_baseline_diff_lists_what_changed(gate):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSPECTOR_CACHE_DIR", str(gate["cache"]))
        code, out, err = inspector(gate["hbm"], "baseline", "save", "perf.json", "gate.py", "--target", "tpu-v5e,tpu-v6e")
        assert code == 0, out + err
        code, out, err = inspector(gate["root"], "baseline", "diff", "base/perf.json", "hbm/perf.json")
    assert code == 1 and out.startswith("baseline diff base/perf.json hbm/perf.json\n  A: jax ") and "  B: jax " in out
    assert "hbm_bytes" in out and "+76.2%" in out and "note:" not in out


@pytest.mark.libtpu
def test_time_is_recorded_and_the_same_every_run(gate):
    folder = gate["base"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSPECTOR_CACHE_DIR", str(gate["cache"]))
        for name in ("t1.json", "t2.json"):  # --no-cache: libtpu simulates again
            code, out, err = inspector(folder, "baseline", "save", name, "gate.py:scaled", "--target", "tpu-v5e", "--time",
                                       "--no-cache")
            assert code == 0, out + err
        code, out, err = inspector(folder, "baseline", "diff", "t1.json", "t2.json")
        assert code == 0, out
        kernel = next(iter(load(str(folder / "t1.json")).targets["gate.py:scaled"]["chips"]["tpu-v5e"]["kernels"].values()))
        assert kernel["time"]["seconds"] > 0 and kernel["time"]["kind"] == "estimate" and kernel["bundles"] > 0
        code, out, err = inspector(folder, "check", "gate.py:scaled", "--baseline", "t1.json")
        assert code == 0, out + err
    os.remove(folder / "t2.json")


@pytest.mark.libtpu
@pytest.mark.asyncio
async def test_the_terminal_ui_shows_the_baseline_beside_the_report(gate, monkeypatch):
    from conftest import loaded
    from rich.console import Console
    from textual.widgets import Static

    from inspector.session import Session
    from inspector.views.tui.app import InspectorApp

    monkeypatch.chdir(gate["hbm"])
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(gate["cache"]))
    baseline = load(str(gate["base"] / "perf.json"))

    def shown(app) -> str:
        console = Console(width=160, record=True, file=io.StringIO())
        console.print(app.query_one("#overview-baseline", Static).content)
        return console.export_text()

    app = InspectorApp(Session("gate.py:mm", "tpu-v5e"), baseline=baseline)
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(pilot)
        text = shown(app)
    assert "changes past the tolerance" in text and "hbm_bytes" in text and "+76.2%" in text and CALL_LINE in text, text
    assert "tpu-v6e" not in text  # this chip only


def test_the_committed_baselines_of_two_jax_versions_differ_kernel_by_kernel():
    """docs/baselines/: samples/matmul.py saved with --time under jax 0.10.1 (libtpu 0.0.41) and
    0.10.2 (libtpu 0.0.42.1); what the newer compiler changed, with the versions in the heading."""
    from conftest import ROOT

    old = load(str(ROOT / "docs/baselines/matmul-jax-0.10.1.json"))
    new = load(str(ROOT / "docs/baselines/matmul-jax-0.10.2.json"))
    assert (old.versions["jax"], new.versions["jax"]) == ("0.10.1", "0.10.2")
    result = compare(old, new, {})
    moved = {(c.target, c.chip, c.kernel, c.figure): c for c in result.changes}
    assert moved[("samples/matmul.py:tiled", "tpu-v6e", "matmul", "time")].change == "floor -> estimate"
    assert moved[("samples/matmul.py:tiled", "tpu-v5e", "matmul", "time")].source == "inspector/kernels/matmul.py:53"
    assert not any(c.figure in ("hbm_bytes", "flops", "compiled") for c in result.changes)  # the same program
    assert result.notes and "libtpu 0.0.41 -> 0.0.42.1" in result.notes[0]
