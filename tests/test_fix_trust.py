"""`inspector fix` must be safe to trust (issue 62): it never overwrites a file it did not write,
its patches apply where they say (the repository that holds the kernel, the file's own newline and
encoding), it never recommends a variant the grid walk calls wrong, and a patch of a shared kernel
holds at every input set the file names. Small kernels in tmp_path, one chip, few params."""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from inspector.base.chips import get_chip
from inspector.base.fix_model import Change, FixResult
from inspector.compilation.target import load_target

# A copy kernel over row blocks: bm=384 covers rows 0-767 of 1024 (the grid walk's error); the whole
# array in one block at INSPECT's rows needs more VMEM than at fewer (--args) rows.
KERNEL = '''\
import jax
from jax.experimental import pallas as pl


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def two(x, bm: int = 128):
    rows, cols = x.shape
    return pl.pallas_call(_double, grid=(rows // bm,), in_specs=[pl.BlockSpec((bm, cols), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((bm, cols), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


INSPECT = {"two": {"args": "f32[1024,128]", "params": {"bm": [128, 384]}},
           "whole": {"args": "f32[3072,1024]"}}


def whole(x):
    return two(x, bm=x.shape[0])
'''


def _repo(root: Path, text: str = KERNEL, name: str = "k.py", git: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if git:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    path = root / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _apply(diff: str | bytes, repo: Path, tmp: Path) -> subprocess.CompletedProcess:
    patch = tmp / "applied.diff"
    patch.write_bytes(diff.encode() if isinstance(diff, str) else diff)
    return subprocess.run(["git", "apply", str(patch)], cwd=repo, capture_output=True, text=True)


def _no_run(monkeypatch):
    """The fix's work, never reached: what is refused is refused before any compile."""
    import inspector.commands.verbs as verbs

    def never(*job, **kwargs):
        raise AssertionError("compiled although the command was refused")

    monkeypatch.setattr(verbs, "run", never)


def _done(monkeypatch, patch: str | None = "# written by inspector fix --patch\n--- a/k.py\n+++ b/k.py\n"):
    """The fix's work replaced by a result with (or without) a patch: the verb writes it."""
    import inspector.commands.verbs as verbs

    result = FixResult(target="k.py:two", chips=["tpu-v5e"], before=[], fixes=[], refused=[], best={}, not_tried=[],
                       ok=True, patch=patch, patch_note="a change")
    monkeypatch.setattr(verbs, "run", lambda *job, **kwargs: result)


# --- 1, 14: the patch's path ---------------------------------------------------------------------

def test_a_py_file_is_never_the_patch_refused_before_any_compile(cli, tmp_path, monkeypatch):
    path = _repo(tmp_path / "r")
    _no_run(monkeypatch)
    for extra in ((), ("--force",)):
        code, _, err = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", str(path), *extra)
        assert code == 2 and "a .py file is a target" in err and "Traceback" not in err
    assert path.read_text() == KERNEL


def test_a_file_fix_did_not_write_is_kept_unless_forced(cli, tmp_path, monkeypatch):
    path = _repo(tmp_path / "r")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    _no_run(monkeypatch)
    code, _, err = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", str(notes))
    assert code == 2 and "not a patch this tool wrote" in err and "--force" in err
    assert notes.read_text() == "mine\n"
    _done(monkeypatch)
    code, out, _ = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", str(notes), "--force")
    assert code == 0 and notes.read_text().startswith("# written by inspector fix")
    code, _, _ = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", str(notes))  # ours now: replaced
    assert code == 0


def test_an_empty_patch_name_is_refused(cli, tmp_path, monkeypatch):
    path = _repo(tmp_path / "r")
    _no_run(monkeypatch)
    code, _, err = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", "")
    assert code == 2 and "--patch" in err and len(err.strip().splitlines()) == 1


def test_the_patch_says_it_is_ours_and_git_apply_takes_it(tmp_path):
    from inspector.verbs.patching import is_our_patch, patch_text

    path = _repo(tmp_path / "r")
    change = Change(kind="vmem_limit", kernel="_double", call=0, value=32 << 20, source=f"{path}:12")
    patch = patch_text(change, str(path), "two")
    assert is_our_patch(patch.text.encode()) and not is_our_patch(b"--- a/k.py\n")
    assert _apply(patch.data, tmp_path / "r", tmp_path).returncode == 0
    assert "vmem_limit_bytes=33554432" in path.read_text()


# --- 5: paths relative to the repository that holds the file ------------------------------------

def test_paths_are_relative_to_the_files_repository_not_the_current_folder(tmp_path, monkeypatch):
    from inspector.verbs.patching import patch_text

    path = _repo(tmp_path / "repo", name="k.py")
    (tmp_path / "repo" / "sub").mkdir()
    moved = tmp_path / "repo" / "sub" / "k.py"
    path.rename(moved)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    change = Change(kind="vmem_limit", kernel="_double", call=0, value=32 << 20, source=f"{moved}:12")
    patch = patch_text(change, str(moved), "two")
    assert patch.path == "sub/k.py" and "+++ b/sub/k.py" in patch.text and "../" not in patch.text
    assert patch.repository == str(tmp_path / "repo")
    assert _apply(patch.data, tmp_path / "repo", tmp_path).returncode == 0


def test_a_file_in_no_repository_or_installed_is_said_not_patched(tmp_path):
    from inspector.base.errors import UsageError
    from inspector.verbs.patching import patch_text

    loose = _repo(tmp_path / "loose", git=False)
    change = Change(kind="vmem_limit", kernel="_double", call=0, value=32 << 20, source=f"{loose}:12")
    with pytest.raises(UsageError, match="in no git repository"):
        patch_text(change, str(loose), "two")
    installed = _repo(tmp_path / "repo" / "lib" / "site-packages" / "pkg", git=False)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "repo", check=True)
    change = dataclasses.replace(change, source=f"{installed}:12")
    with pytest.raises(UsageError, match="installed copy"):
        patch_text(change, str(installed), "two")


# --- 8: the file's newline and encoding ---------------------------------------------------------

@pytest.mark.parametrize("how", ["crlf", "latin-1", "bom", "no final newline"])
def test_the_patch_keeps_the_files_newline_and_encoding(tmp_path, how):
    from inspector.verbs.patching import patch_text

    text = KERNEL
    if how == "crlf":
        data = text.replace("\n", "\r\n").encode()
    elif how == "latin-1":
        data = ("# -*- coding: latin-1 -*-\n# café\n" + text).encode("latin-1")
    elif how == "bom":
        data = b"\xef\xbb\xbf" + text.encode()
    else:
        data = text.rstrip("\n").encode()
    path = _repo(tmp_path / "r", data)
    line = 14 if how == "latin-1" else 12
    patch = patch_text(Change(kind="vmem_limit", kernel="_double", call=0, value=32 << 20, source=f"{path}:{line}"),
                       str(path), "two")
    done = _apply(patch.data, tmp_path / "r", tmp_path)
    assert done.returncode == 0, done.stderr
    after = path.read_bytes()
    assert b"vmem_limit_bytes=33554432" in after and b"import tpu as pltpu" in after
    if how == "crlf":
        assert after.count(b"\n") == after.count(b"\r\n")
    if how == "latin-1":
        assert "café".encode("latin-1") in after
    if how == "bom":
        assert after.startswith(b"\xef\xbb\xbf")


def test_a_file_that_cannot_be_decoded_is_said_before_the_trials(cli, tmp_path, monkeypatch):
    path = _repo(tmp_path / "r", b"x = '\xff'\n" + KERNEL.encode())
    _no_run(monkeypatch)
    code, _, err = cli("fix", f"{path}:two", "--target", "tpu-v5e", "--patch", str(tmp_path / "fix.diff"))
    assert code == 2 and "cannot patch" in err and "utf-8" in err


# --- 9: v4 is megacore ----------------------------------------------------------------------------

def test_v4_gets_the_parallel_fix_as_the_table_and_jax_say():
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from inspector.pallas.discovery import read_program
    from inspector.pallas.fixes import semantics_changes

    for chip in (get_chip("tpu-v4"), get_chip("tpu-v5p"), get_chip("tpu-v5e"), get_chip("tpu-7x")):
        assert chip.megacore == pltpu.ChipVersion(chip.jax_chip_version).supports_megacore, chip.name
    target = load_target("tests/data/heldout10/keras_matmul_relu.py:keras_matmul_relu")
    calls = read_program(jax.make_jaxpr(target.call)(*target.args))[0]
    changes, _ = semantics_changes(calls, get_chip("tpu-v4"))
    assert [c.value for c in changes] == [["parallel", "arbitrary"], ["parallel", "parallel"]]
    assert "tpu-v4's 2 TensorCores" in changes[0].why
    assert semantics_changes(calls, get_chip("tpu-7x")) == ([], [])  # a device per TensorCore


# --- 7: a variant the grid walk calls wrong -----------------------------------------------------

@pytest.fixture(scope="module")
def rows_fix(tmp_path_factory):
    """bm=384 against the unfixed bm=128, timed, no numerics (as --no-numerics)."""
    from inspector.verbs.fixing import run_fix

    path = _repo(tmp_path_factory.mktemp("rows") / "r")
    target = load_target(f"{path}:two")
    target = dataclasses.replace(target, param_choices={"bm": [384]})
    return run_fix(target, [get_chip("tpu-v5e")], numerics=False, use_cache=False)


@pytest.mark.libtpu
def test_a_variant_with_an_error_finding_is_never_recommended(rows_fix):
    fix, = [f for f in rows_fix.fixes if f.change.kind == "params"]
    trial, = fix.trials
    assert trial.compiles and fix.recommended == [] and "tpu-v5e" not in rows_fix.best
    assert fix.wrong["tpu-v5e"].startswith("output-not-written: o_ref: 1 of 3 output blocks are never written")


# --- 11: a patch of a shared kernel holds at every input set ------------------------------------

@pytest.mark.libtpu
def test_a_vmem_patch_holds_at_inspects_args_too(cli, run_cli, tmp_path):
    """--args with fewer rows needs a smaller vmem_limit_bytes than INSPECT's own args: the patch
    writes one that compiles at both, and says so."""
    path = _repo(tmp_path / "r")
    patch = tmp_path / "fix.diff"
    code, out, err = cli("fix", f"{path}:whole", "--target", "tpu-v5e", "--args", "f32[2560,1024]", "--no-numerics",
                         "--no-time", "--patch", str(patch))
    assert code == 0, out + err
    assert "holds at --args and INSPECT's args" in out
    assert _apply(patch.read_bytes(), tmp_path / "r", tmp_path).returncode == 0
    for args in ((), ("--args", "f32[2560,1024]")):  # a process of its own: this one imported the file unpatched
        done = run_cli("check", f"{path}:whole", "--target", "tpu-v5e", *args)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.libtpu
def test_a_variant_that_clears_an_error_finding_is_recommended_slower_or_not(tmp_path):
    """--set bm=384 leaves rows unwritten: bm=128 clears that (it is the fix, whatever its time),
    and fix's verdict is not ok while the program as it is has an error finding and no fix."""
    from inspector.verbs.fixing import run_fix

    path = _repo(tmp_path / "r")
    target = dataclasses.replace(load_target(f"{path}:two", sets=["bm=384"]), param_choices={"bm": [128]})
    result = run_fix(target, [get_chip("tpu-v5e")], numerics=False, time=False, fixed=("bm",))
    fix, = result.fixes
    assert fix.recommended == ["tpu-v5e"] and fix.clears == {"tpu-v5e": "output-not-written"}
    assert result.ok and result.command_line["tpu-v5e"] == "change --set bm=384 to --set bm=128"
    result.fixes[0].recommended.clear()
    from inspector.verbs.fixing import choose

    again = dataclasses.replace(result, best={}, best_in_source={}, in_source={}, command_line={})
    choose(again, {"bm": 384}, ("bm",))
    assert not again.ok  # as it is: compiles, with an error finding, and nothing recommended


def test_odd_patch_paths_are_said_before_any_compile(cli, tmp_path, monkeypatch):
    """A folder, a missing folder, a link to the source, --force alone: one line each, exit 2."""
    path = _repo(tmp_path / "r")
    (tmp_path / "adir").mkdir()
    (tmp_path / "link").symlink_to(path)
    _no_run(monkeypatch)
    for args, said in ((("--patch", str(tmp_path / "adir")), "it is a folder"),
                       (("--patch", str(tmp_path / "none" / "x.diff")), "does not exist"),
                       (("--patch", str(tmp_path / "link")), "not a patch this tool wrote"),
                       (("--force",), "give --patch FILE too")):
        code, _, err = cli("fix", f"{path}:two", "--target", "tpu-v5e", *args)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, (args, err)
    assert path.read_text() == KERNEL
