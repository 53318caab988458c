"""What `inspector baseline` and `check --baseline` trust, and what they refuse (issue 62): a file the
tool did not write is never overwritten; a baseline is read only when every field of it is as
`baseline save` writes it; a usage error is never recorded as a target's figures, and a check that
compared nothing is no pass; a kernel's key is the same in every checkout of the same code.

Most of these need no compile (each refusal comes before one); the two that compile run the CLI
in subprocesses, one tiny Pallas kernel each."""
from __future__ import annotations

import json
import pathlib
import re
import shutil

import pytest

from inspector.base.errors import UsageError
from inspector.baseline.compare import DEFAULT_TOLERANCES, compare
from inspector.baseline.record import Baseline, load, new_baseline

KERNEL_KEY = "custom-call:pallas mm k.py:9"
TARGET = '''import jax.numpy as jnp


def f(x, bm: int = 128):
    return jnp.tanh(x) * bm


def boom(x):
    raise ValueError("boom")


INSPECT = {"f": {"args": "f32[8,128]"}, "boom": {"args": "f32[8,128]"}}
'''


def valid() -> dict:
    """A baseline as `baseline save` writes it (one target, one chip, one kernel), made by hand."""
    program = {"compiled": True, "error_kind": None, "vmem_estimate": 1024, "vmem_fits": True, "compiler_vmem": 2048,
               "compiler_fits": True, "hbm_device": 4096, "hbm_fits": True, "hbm_bytes": 10, "flops": 4.0,
               "time": {"seconds": 1e-5, "kind": "estimate", "high_seconds": None}, "findings": ["libtpu-guarded-steps"]}
    kernel = {"name": "mm.1", "kind": "custom-call:pallas", "source": "k.py:9", "hbm_bytes": 10, "flops": 4.0,
              "vmem_estimate": 1024, "time": {"seconds": 1e-5, "kind": "estimate", "high_seconds": None}, "bundles": 5,
              "spills": 0}
    chip = {"program": program, "kernels": {KERNEL_KEY: kernel}}
    return new_baseline(["tpu-v5e"], True, {"k.py:f": {"spec": "k.py:f", "sets": [], "chips": {"tpu-v5e": chip}}}).data


def _at(data: dict, *path):
    for key in path:
        data = data[key]
    return data


PROGRAM = ("targets", "k.py:f", "chips", "tpu-v5e", "program")
KERNEL = ("targets", "k.py:f", "chips", "tpu-v5e", "kernels", KERNEL_KEY)


def _set(path: tuple, key: str, value):
    def edit(data: dict) -> None:
        _at(data, *path)[key] = value
    return edit


def _text(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text
        return text.replace(old, new, 1)
    return _on_text(edit)


def _on_text(edit):
    edit.on_text = True  # an edit of the file's text, not of the document
    return edit


# (what, an edit of the document or of its text, words the one-line refusal says)
HAND_EDITS = [
    ("NaN", _text('"hbm_bytes": 10', '"hbm_bytes": NaN'), "NaN is not JSON"),
    ("Infinity", _text('"flops": 4.0', '"flops": Infinity'), "Infinity is not JSON"),
    ("a key twice", _text('"hbm_bytes": 10', '"hbm_bytes": 10, "hbm_bytes": 11'), "'hbm_bytes' given twice"),
    ("a string figure", _set(PROGRAM, "hbm_bytes", "135 MiB"), "program.hbm_bytes: is a str, not a number"),
    ("a bool figure", _set(KERNEL, "flops", True), "flops: is a bool, not a number"),
    ("a negative figure", _set(KERNEL, "bundles", -1), "bundles: is -1, not a number >= 0"),
    ("time a number", _set(PROGRAM, "time", 5), "program.time: is an int, not an object"),
    ("a time of no kind", _set(PROGRAM, "time", {"seconds": 1.0, "kind": "guess", "high_seconds": None}),
     "time.kind: is 'guess'"),
    ("the top's time a number", _set((), "time", 5), "time: is an int, not true or false"),
    ("findings a number", _set(PROGRAM, "findings", 7), "program.findings: is not a list"),
    ("kernels a list", _set(("targets", "k.py:f", "chips", "tpu-v5e"), "kernels", [1]), "kernels: is a list, not an object"),
    ("chips [5]", _set((), "chips", [5]), "chips[0]: is an int, not a string"),
    ("chips [cpu]", _set((), "chips", ["cpu"]), "'cpu' is not a chip a baseline records"),
    ("chips [tpu-v99]", _set((), "chips", ["tpu-v99"]), "'tpu-v99' is no chip the inspector knows"),
    ("chips []", _set((), "chips", []), "chips: is empty"),
    ("a chip twice", _set((), "chips", ["tpu-v5e", "tpu-v5e"]), "names a chip twice"),
    ("time_budget_s -5", _set((), "time_budget_s", -5), "time_budget_s: is -5"),
    ("time_budget_s abc", _set((), "time_budget_s", "abc"), "time_budget_s: is a str"),
    ("compiled yes", _set(PROGRAM, "compiled", "yes"), "program.compiled: is a str, not true or false"),
    ("no compiled", lambda d: _at(d, *PROGRAM).pop("compiled"), "program: has no 'compiled'"),
    ("no targets", _set((), "targets", {}), "targets: is empty"),
    ("a label not its spec's", lambda d: d["targets"].update({"other.py:f": d["targets"].pop("k.py:f")}),
     "is not the label of its spec and sets ('k.py:f')"),
    ("a key not its kernel's", _set(KERNEL, "source", "k.py:99"), "is not the key of its kind, name and source"),
    ("a chip the file does not list", lambda d: _at(d, "targets", "k.py:f", "chips").update(
        {"tpu-v6e": _at(d, "targets", "k.py:f", "chips", "tpu-v5e")}), "is not one of the baseline's chips"),
    ("a chip the target lacks", _set((), "chips", ["tpu-v5e", "tpu-v6e"]), "chips: has no entry for tpu-v6e"),
    ("an unknown top key", _set((), "extra", 1), "has unknown keys ['extra']"),
    ("no versions", lambda d: d.pop("versions"), "has no 'versions'"),
    ("sets not NAME=VALUE", _set(("targets", "k.py:f"), "sets", [5]), "sets: is not a list of NAME=VALUE"),
    ("a figure nobody knows", _set(PROGRAM, "speed", 1), "program.speed: is no figure"),
    ("truncated", _on_text(lambda t: t[: len(t) // 2]), "not JSON"),
    ("binary", _on_text(lambda t: "\x00\udcff" + t), "not JSON"),
    ("a JSON list", _on_text(lambda t: "[1]"), "the JSON is a list, not an object"),
]


def _write(folder: pathlib.Path, what: str, edit) -> pathlib.Path:
    doc = valid()
    if getattr(edit, "on_text", False):
        text = edit(Baseline(doc).text())
    else:
        edit(doc)
        text = json.dumps(doc, indent=2, sort_keys=True)
    path = folder / f"{what.replace(' ', '-')}.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def test_a_valid_baseline_loads_with_crlf_and_a_bom(tmp_path):
    text = Baseline(valid()).text()
    (tmp_path / "crlf.json").write_bytes(("\ufeff" + text).replace("\n", "\r\n").encode())
    assert load(tmp_path / "crlf.json").data == valid()  # a pathlib.Path too


@pytest.mark.parametrize("what, edit, said", HAND_EDITS, ids=[h[0] for h in HAND_EDITS])
def test_a_hand_edited_baseline_is_refused_naming_the_field(what, edit, said, tmp_path, cli, monkeypatch):
    path = _write(tmp_path, what, edit)
    (tmp_path / "k.py").write_text(TARGET)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="not (JSON|an inspector baseline)") as err:
        load(str(path))
    assert said in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
    for argv in (("check", "k.py", "--baseline", path.name), ("baseline", "diff", path.name, path.name),
                 ("k.py:f", "--baseline", path.name)):  # the terminal UI's loader (in a pipe here)
        code, out, err_text = cli(*argv)
        assert code == 2 and out == "" and said in err_text, (argv, err_text)
        assert len(err_text.strip().splitlines()) == 1 and "Traceback" not in err_text and "internal error" not in err_text

    import inspector

    with pytest.raises(UsageError, match=re.escape(said)):
        inspector.check("k.py", baseline=path)


def test_a_python_file_or_a_foreign_file_is_never_overwritten(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(TARGET)
    (tmp_path / "notes.json").write_text('{"mine": 1}\n')
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "old.json").write_text(Baseline(valid()).text())
    for argv, said in ((("baseline", "save", "k.py", "other.py", "--target", "tpu-v5e"), "a .py file is a target, never"),
                       (("baseline", "save", "k.py", "other.py", "--force"), "a .py file is a target, never"),
                       (("baseline", "save", "notes.json", "k.py:f"), "notes.json exists and is not a baseline")):
        code, out, err = cli(*argv)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert (tmp_path / "k.py").read_text() == TARGET and (tmp_path / "notes.json").read_text() == '{"mine": 1}\n'
    # forced, empty or a baseline already: the guard lets it by (and the missing target is what is refused)
    for name, more in (("notes.json", ("--force",)), ("empty.json", ()), ("old.json", ())):
        code, out, err = cli("baseline", "save", name, "nope.py", *more)
        assert code == 2 and "nope.py: no such file" in err, (name, err)


def test_a_name_set_twice_is_refused_by_every_verb(cli):
    for argv in (("check", "samples/matmul.py:tiled", "--set", "bm=256", "--set", "bm=512"),
                 ("baseline", "save", "x.json", "samples/matmul.py:tiled", "--set", "bm=256", "--set", "bm=512"),
                 ("show", "samples/matmul.py:tiled", "--set", "bm=256", "--set", "bm=512"),
                 ("tune", "samples/matmul.py:tiled", "--set", "bm=256", "--set", "bm=512"),
                 ("compare", "samples/matmul.py:tiled", "--set-a", "bm=256", "--set-a", "bm=512")):
        code, out, err = cli(*argv)
        assert code == 2 and "bm given twice" in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_a_removed_target_of_a_path_with_a_space_is_reported():
    chip = {"program": {"compiled": True, "hbm_bytes": 10}, "kernels": {}}
    entry = {"spec": "sub dir/k.py:f", "sets": [], "chips": {"tpu-v5e": chip}}
    before = new_baseline(["tpu-v5e"], False, {"sub dir/k.py:f": entry, "sub dir/k.py:g": {**entry, "spec": "sub dir/k.py:g"}})
    now = new_baseline(["tpu-v5e"], False, {"sub dir/k.py:f": entry})
    [row] = compare(before, now, DEFAULT_TOLERANCES, covered=["sub dir/k.py"]).changes
    assert (row.target, row.change) == ("sub dir/k.py:g", "target removed (not found now)")


def test_the_api_says_its_own_words_for_bad_types(tmp_path):
    import inspector

    path = tmp_path / "b.json"
    path.write_text(Baseline(valid()).text())
    for kw, said in ((dict(tolerance=5), "tolerance must be"), (dict(tolerance={"time": None}), "tolerance must be"),
                     (dict(targets=5), "targets must be chip names"), (dict(targets=[]), "targets is empty"),
                     (dict(baseline=5), "baseline must be the path")):
        with pytest.raises(UsageError, match=said):
            inspector.check("k.py", **{"baseline": str(path), **kw})
    with pytest.raises(UsageError, match="no such file"):  # a Path is a path, not a bad target spec
        inspector.check("k.py", baseline=tmp_path / "missing.json")
    with pytest.raises(UsageError, match="time_budget='abc'"):
        inspector.inspect("k.py:f", time=True, time_budget="abc")


def test_a_usage_error_is_refused_not_recorded(tmp_path, cli, monkeypatch):
    """What check refuses, save refuses (exit 2, no file); a check of a target that raised both
    times compared nothing, and says so (exit 2, not a pass)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(TARGET)
    for argv, said in ((("k.py:nosuchfn",), "no function named 'nosuchfn'"), (("k.py:f", "--set", "bm=abc"), "bm takes an int"),
                       (("k.py:f", "--set", "zz=1"), "no parameter 'zz'"),
                       (("k.py:boom",), "nothing to record in typo.json: no target traced")):
        code, out, err = cli("baseline", "save", "typo.json", *argv, "--target", "tpu-v5e")
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert not (tmp_path / "typo.json").exists()
    raised = {"spec": "k.py:boom", "sets": [], "chips": {"tpu-v5e": {"error": "k.py:9: ValueError: boom"}}}
    (tmp_path / "raised.json").write_text(new_baseline(["tpu-v5e"], False, {"k.py:boom": raised}).text())
    code, out, err = cli("check", "k.py:boom", "--baseline", "raised.json")
    assert code == 2 and "nothing compared" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = cli("check", "k.py:nosuchfn", "--baseline", "raised.json")
    assert code == 2 and "no function named 'nosuchfn'" in err, err
    code, out, err = cli("baseline", "diff", "raised.json", "raised.json")
    assert code == 2 and "nothing compared" in err, err


# ---------------------------------------------------------------- libtpu compiles (subprocesses)

KERN = '''import jax
from jax.experimental import pallas as pl


def _body(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def add_one(x):
    return pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), name="add_one")(x)
'''
BENCH = '''from tinylib.kern import add_one


def f(x):
    return add_one(x)


INSPECT = {"f": {"args": "f32[8,128]"}}
'''


def _checkout(root: pathlib.Path) -> pathlib.Path:
    """A project whose kernel is in a package (src/tinylib) imported from PYTHONPATH, its gate in bench/."""
    (root / "src" / "tinylib").mkdir(parents=True)
    (root / "src" / "tinylib" / "__init__.py").write_text("")
    (root / "src" / "tinylib" / "kern.py").write_text(KERN)
    (root / "bench").mkdir()
    (root / "bench" / "gate.py").write_text(BENCH)
    return root


@pytest.mark.libtpu
def test_a_baseline_of_one_checkout_passes_in_another(tmp_path, run_cli):
    """The same code in two folders (two clones, two CI runners): the kernel of the package is keyed
    by its module, not by where the package lies, so the second passes the first's baseline."""
    one = _checkout(tmp_path / "one")
    two = tmp_path / "two"
    shutil.copytree(one, two)

    def env(root: pathlib.Path) -> dict:
        return {"PYTHONPATH": str(root / "src"), "INSPECTOR_CACHE_DIR": str(tmp_path / "cache")}

    done = run_cli("baseline", "save", "perf.json", "gate.py", "--target", "tpu-v5e", env=env(one), cwd=one / "bench")
    assert done.returncode == 0, done.stdout + done.stderr
    kernels = json.loads((one / "bench" / "perf.json").read_text())["targets"]["gate.py:f"]["chips"]["tpu-v5e"]["kernels"]
    assert [k["source"] for k in kernels.values()] == ["tinylib/kern.py:10"], kernels
    shutil.copy(one / "bench" / "perf.json", two / "bench" / "perf.json")
    (one / "src" / "tinylib" / "kern.py").unlink()  # the second checkout's files are the ones read
    done = run_cli("check", "gate.py", "--baseline", "perf.json", env=env(two), cwd=two / "bench")
    assert done.returncode == 0 and "nothing moved past its tolerance: 1 target" in done.stdout, done.stdout + done.stderr


@pytest.mark.libtpu
def test_a_baseline_saved_to_stdout_is_json_alone(tmp_path, run_cli):
    (tmp_path / "k.py").write_text(TARGET)
    done = run_cli("baseline", "save", "/dev/stdout", "k.py:f", "--target", "tpu-v5e", cwd=tmp_path,
                   env={"INSPECTOR_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["targets"]) == {"k.py:f"}  # the JSON alone: the table went to stderr
    assert "k.py:f" in done.stderr and "1 kernel" in done.stderr
    assert not list(tmp_path.glob("*.json"))  # nothing else written


@pytest.mark.libtpu
def test_the_committed_baselines_key_kernels_as_a_save_does_now(cli, tmp_path):
    """docs/baselines/ were saved under jax 0.10.1 and 0.10.2 with the kernels' file relative to the
    checkout (kernels/matmul.py); their keys were migrated to the module's name. A save now (the
    jax installed here, no --time) keys the same kernels alike."""
    from conftest import ROOT

    code, out, err = cli("baseline", "save", str(tmp_path / "now.json"), "samples/matmul.py", "--target", "tpu-v5e")
    assert code == 0, out + err
    now = load(str(tmp_path / "now.json"))
    for name in ("matmul-jax-0.10.1.json", "matmul-jax-0.10.2.json"):
        committed = load(str(ROOT / "docs" / "baselines" / name))
        for label, entry in now.targets.items():
            keys = list(entry["chips"]["tpu-v5e"]["kernels"])
            assert list(committed.targets[label]["chips"]["tpu-v5e"]["kernels"]) == keys, (name, label)
    assert "custom-call:pallas matmul inspector/kernels/matmul.py:53" in now.targets["samples/matmul.py:tiled"]["chips"]["tpu-v5e"]["kernels"]


def test_what_the_audit_found_is_refused_in_words(tmp_path, cli, monkeypatch):
    """AUDIT-baseline.md: an empty --target was taken as the default chip; a folder as FILE said
    "cannot read it"; --tolerance time=abc said "not negative"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(TARGET)
    (tmp_path / "adir.json").mkdir()
    (tmp_path / "b.json").write_text(Baseline(valid()).text())
    for argv, said in ((("baseline", "save", "x.json", "k.py:f", "--target", ""), "--target is empty"),
                       (("baseline", "save", "adir.json", "k.py:f"), "cannot write adir.json: it is a folder; give a file name"),
                       (("check", "k.py:f", "--baseline", "b.json", "--tolerance", "time=abc"), "'abc' is not a number")):
        code, out, err = cli(*argv)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "x.json").exists()


@pytest.mark.libtpu
def test_a_baseline_saved_with_time_matches_an_untimed_report_of_the_same_code():
    """The terminal UI compares a report without libtpu's time (until T) with a baseline saved with
    --time: the timed figures are left out, and so are the findings the time estimate adds (a baseline
    of unchanged code once said "findings -libtpu-guarded-steps")."""
    import copy

    from inspector.base.chips import get_chip
    from inspector.base.findings import CODES, TIME_CODES
    from inspector.baseline.record import new_baseline
    from inspector.baseline.work import against_report, chip_entry
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target
    from inspector.results.report import build_report

    assert TIME_CODES <= set(CODES)
    spec = "samples/matmul.py:tiled"
    target = load_target(spec, args="bf16[256,512] bf16[512,256]")
    chip = get_chip("tpu-v5e")
    report = build_report(target, chip, capture(target, Backend(chip)), fusions=True, pallas=True)
    assert report.time is None
    entry = copy.deepcopy(chip_entry(report, False))
    timed_codes = ["libtpu-guarded-steps", "time-extrapolated"]  # what a timed save of a guarded kernel records
    entry["program"]["findings"] = sorted(entry["program"]["findings"] + timed_codes)
    entry["program"]["time"] = {"seconds": 1e-5, "kind": "estimate", "high_seconds": None}
    label = "samples/matmul.py:tiled"
    saved = new_baseline(["tpu-v5e"], True, {label: {"spec": spec, "sets": [], "chips": {"tpu-v5e": entry}}})
    result = against_report(saved, report, spec, [])
    assert not isinstance(result, str), result
    assert result.changes == [], [(c.figure, c.change) for c in result.changes]
