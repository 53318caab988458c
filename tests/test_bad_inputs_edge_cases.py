"""Bad inputs and faults at the edges (issue 30's audit, "trust at the edges, round two"): each
defect the audit found, as a test that fails
without its fix (a false claim about a UTF-8 file name, dump folders left by signals, a mesh axis
used twice, exports that widen permissions, doctor on a slice, a cache that cannot store, a cached
HLO that does not parse), and the temporary-folder mechanism every dump goes through. Also here:
the CPU compile's options, usage messages made clearer, and the time estimate, bundles and Mosaic
views at their edges.

Signals and locales need real processes (``python -m inspector`` in a subprocess, small targets);
the rest runs in this process.
"""
from __future__ import annotations

import json
import contextlib
import os
import pickle
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT


FUNCS = str(DATA / "funcs.py")
HOSTILE = str(DATA / "hostile.py")


def one_line(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inspector: ") and needle in lines[0], err
    assert "Traceback" not in err


def _env(**extra) -> dict:
    return dict(os.environ, NO_COLOR="1", COLUMNS="100", **extra)


# ----------------------------------------------------------------------------- 1. a UTF-8 name in the C locale

_UTF8_DIR = "fx/\u00fcn\u00ef"  # fx/ünï
_UTF8_FILE = "m\u00f3dulo_\u03bb.py"  # módulo_λ.py
_UTF8_FUNC = "funci\u00f3n"  # función
_C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}


@pytest.fixture
def utf8_target(tmp_path) -> Path:
    folder = tmp_path / _UTF8_DIR
    folder.mkdir(parents=True)
    (folder / _UTF8_FILE).write_text(f"import jax.numpy as jnp\ndef {_UTF8_FUNC}(x):\n    return jnp.sin(x) * 2\n"
                                     f"INSPECT = {{{_UTF8_FUNC!r}: {{'args': 'f32[8]'}}}}\n", encoding="utf-8")
    return tmp_path


def test_a_utf8_file_name_opens_in_the_c_locale(utf8_target):
    """LC_ALL=C reads the name as ASCII; it is valid UTF-8, so it opens (the command runs again in
    Python's UTF-8 mode) and jax's locations name it as it is. It was refused as "not valid UTF-8"."""
    spec = os.fsencode(f"{_UTF8_DIR}/{_UTF8_FILE}:{_UTF8_FUNC}")
    out = subprocess.run([sys.executable, "-m", "inspector", "show", spec], capture_output=True,
                         cwd=utf8_target, env=_env(**_C_LOCALE), timeout=300)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stderr == b""
    shown = out.stdout.decode("utf-8")  # the terminal gets the bytes it gave
    assert f"{_UTF8_FUNC}  ({_UTF8_DIR}/{_UTF8_FILE}:2)" in shown and "hlo ops" in shown  # traced, lowered, compiled


def test_the_c_locale_is_named_where_a_name_cannot_be_opened(utf8_target):
    """In a process that is already running in the C locale (the Python API, `main()`), the
    message says the locale is at fault and how to fix it, for a name from the command line
    (surrogates) and for one given as text; a name that is not UTF-8 at all is still that."""
    script = (
        "import os, sys, inspector\n"
        "from inspector.cli import main\n"
        f"text = {f'{_UTF8_DIR}/{_UTF8_FILE}:{_UTF8_FUNC}'!a}\n"
        "given = os.fsdecode(text.encode('utf-8'))\n"
        "for spec in (text, given):\n"
        "    try:\n"
        "        inspector.inspect(spec)\n"
        "    except inspector.UsageError as err:\n"
        "        print('API', err)\n"
        "print('CLI', main(['show', given], isolate=False))\n"
        "print('CLI', main(['show', os.fsdecode(b'caf\\xe9.py') + ':f'], isolate=False))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=utf8_target,
                         env=_env(**_C_LOCALE), timeout=300)
    lines = out.stdout.splitlines() + out.stderr.splitlines()
    assert sum("LC_ALL=C" in line and "PYTHONUTF8=1" in line for line in lines) == 3, out
    assert not any("not valid UTF-8" in line for line in lines[:3]), out
    assert "is not valid UTF-8: rename" in out.stderr  # the Latin-1 name: that one really is not UTF-8


# ----------------------------------------------------------------------------- 2. no temporary folder survives


def _ours(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("inspector-"))


def _wait_until(predicate, proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "never got there"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]


# (view, the folder the compile writes, how it ends): slow_compile traces at once and compiles for seconds
SIGNAL_CASES = {
    "passes view, Ctrl-C": ("passes", "inspector-passes-", signal.SIGINT),
    "passes view, SIGTERM": ("passes", "inspector-passes-", signal.SIGTERM),
    "memory view (buffer dump), SIGTERM": ("memory", "inspector-dump-", signal.SIGTERM),
    "passes view, the child killed": ("passes", "inspector-passes-", signal.SIGKILL),
}


@pytest.mark.parametrize("case", SIGNAL_CASES)
def test_no_dump_folder_survives_a_signal(tmp_path, case):
    """The dump folder exists (the compile is writing into it) when the signal comes; the child
    is killed (SIGKILL: it runs no cleanup), so the parent must sweep what it owned."""
    view, prefix, sig = SIGNAL_CASES[case]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "inspector", "show", f"{HOSTILE}:slow_compile", "--view", view,
                             "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=_env(TMPDIR=str(tmp), INSPECTOR_CACHE_DIR=str(tmp_path / "cache")), start_new_session=True)
    try:
        _wait_until(lambda: any(n.startswith(prefix) for n in _ours(tmp)), proc)
        time.sleep(0.5)
        if sig == signal.SIGKILL:
            for child in _children(proc.pid):
                os.kill(child, signal.SIGKILL)
        else:
            os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: 1}[sig], err
    assert _ours(tmp) == [], err


def test_a_folder_of_a_killed_process_is_swept_and_a_live_ones_is_not(tmp_path, monkeypatch):
    from inspector.base import tempdirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    make = ("import sys, time; from inspector.base.tempdirs import new_folder; f = new_folder('llo'); "
            "open(f + '/bundles.txt', 'w').write('x'); print(f, flush=True); time.sleep(600)")
    procs = [subprocess.Popen([sys.executable, "-c", make], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, TMPDIR=str(tmp_path))) for _ in range(2)]
    folders = [Path(p.stdout.readline().strip()) for p in procs]
    try:
        assert all(f.is_dir() and f.parent.parent == tmp_path for f in folders)
        procs[0].kill()
        procs[0].wait()
        assert tempdirs.sweep() == 1
        assert not folders[0].parent.exists() and (folders[1] / "bundles.txt").exists()
    finally:
        procs[1].kill()
        procs[1].wait()
    assert tempdirs.sweep() == 1 and _ours(tmp_path) == []


class _Dumper:
    """Stands in for the terminal UI's Session: a call that writes a dump folder, then works on."""

    def dump_and_wait(self, mark: str) -> None:
        from inspector.base.tempdirs import new_folder

        Path(mark).write_text(new_folder("mosaic"))
        time.sleep(600)


def test_a_cancel_in_the_terminal_ui_sweeps_the_killed_workers_folders(tmp_path, monkeypatch):
    import threading

    from inspector.remote import Remote

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mark = tmp_path / "mark"
    remote = Remote()
    caller = threading.Thread(target=lambda: pytest.raises(Exception, remote.call, _Dumper(), "dump_and_wait", str(mark)),
                              daemon=True)
    caller.start()
    end = time.monotonic() + 120
    while not mark.exists() or not mark.read_text():
        assert time.monotonic() < end, "the worker never made its folder"
        time.sleep(0.05)
    assert Path(mark.read_text()).is_dir()
    assert remote.cancel(wait=True)
    caller.join(timeout=30)
    remote.close()
    assert _ours(tmp_path) == []


def test_temp_folder_is_removed_on_every_path(tmp_path, monkeypatch):
    from inspector.base import tempdirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = tempdirs.owned()  # this process's own (the libtpu log folder)
    with tempdirs.temp_folder("mosaic") as folder:
        Path(folder, "post-apply-vector-layout.mlir").write_text("module {}")
        assert os.listdir(folder) == ["post-apply-vector-layout.mlir"]  # the lock is beside it, not in it
        assert tempdirs.owned() == before + [folder]
    for error in (KeyboardInterrupt, RuntimeError):
        with pytest.raises(error):
            with tempdirs.temp_folder("profile"):
                raise error()
    kept = tempdirs.new_folder("passes")
    tempdirs.remove(kept)
    tempdirs.remove(kept)  # twice is fine
    assert _ours(tmp_path) == [] and tempdirs.owned() == before
    old = tmp_path / "inspector-dump-from-an-old-version"
    old.mkdir()
    os.utime(old, (0, 0))
    assert tempdirs.sweep() == 1 and not old.exists()


def test_libtpu_log_folder_goes_with_its_process(tmp_path):
    """The folder TPU_LOG_DIR points at (made when the inspector is imported) is removed at exit,
    and a process killed outright leaves one that the next import sweeps."""
    env = {k: v for k, v in os.environ.items() if k != "TPU_LOG_DIR"}
    env["TMPDIR"] = str(tmp_path)
    code = "import os, inspector; print(os.environ['TPU_LOG_DIR'], flush=True)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().startswith(str(tmp_path / "inspector-tpu-logs-"))
    assert _ours(tmp_path) == []
    killed = subprocess.run([sys.executable, "-c", code + "; os.kill(os.getpid(), 9)"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert killed.returncode == -9 and len(_ours(tmp_path)) == 1
    subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120, check=True)
    assert _ours(tmp_path) == []


# ----------------------------------------------------------------------------- 3. a mesh axis used twice


@pytest.mark.parametrize("shard", ["P('data','data') P()", "P(('data','model'),'data') P()"])
def test_a_mesh_axis_used_twice_is_a_usage_line(cli, shard):
    code, out, err = cli("show", f"{FUNCS}:matmul", "--target", "tpu-v5e:2x2", "--mesh", "data=2,model=2",
                         "--args", "f32[8,16] f32[16,4]", "--shard", shard)
    assert code == 2 and out == ""
    one_line(err, "mesh axis 'data' is used twice")


@pytest.mark.libtpu
def test_the_api_refuses_a_mesh_axis_used_twice():
    import inspector
    from jax.sharding import PartitionSpec as P

    with pytest.raises(inspector.UsageError, match="used twice"):
        inspector.inspect(lambda x: x * 2, "f32[8,8]", target="tpu-v5e:2x2", mesh={"data": 4},
                          shardings=[P("data", "data")])
    with pytest.raises(inspector.UsageError, match="used twice"):
        inspector.inspect(lambda x: x * 2, "f32[8,8]", target="tpu-v5e:2x2", mesh={"data": 4},
                          shardings="P('data','data')")


class _HoldsADevice(ValueError):
    """Like jax's DuplicateSpecError: its state cannot be pickled."""

    def __init__(self, text):
        super().__init__(text)
        self.device = lambda: None


def _raise_unpicklable():
    raise _HoldsADevice("mesh axis 'data' is used twice")


def test_an_exception_that_cannot_be_pickled_still_reaches_the_parent_with_its_message():
    from inspector.base.child_process import run_isolated

    with pytest.raises(ValueError) as caught:  # the nearest built-in class, with the message
        run_isolated(_raise_unpicklable)
    assert "_HoldsADevice: mesh axis 'data' is used twice" in str(caught.value)
    assert "could not be sent back" not in str(caught.value)


def test_our_own_errors_cross_as_themselves():
    from inspector.base.errors import UsageError
    from inspector.base.child_process import _picklable

    again = _picklable(UsageError("a line"))
    assert type(again) is UsageError and str(pickle.loads(pickle.dumps(again))) == "a line"


# ----------------------------------------------------------------------------- 4. exports keep a file's mode


def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    from inspector.base.atomic import write_atomic

    private = tmp_path / "priv.json"
    private.write_text("{}")
    private.chmod(0o600)
    write_atomic(private, "{\"new\": 1}")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text() == "{\"new\": 1}"
    shared = tmp_path / "shared.dot"
    shared.write_text("")
    shared.chmod(0o664)
    write_atomic(shared, "digraph {}")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o664
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.svg", "<svg/>")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.svg").stat().st_mode) == 0o644


def test_export_over_a_private_file_keeps_it_private(cli, tmp_path):
    out_json, out_dot = tmp_path / "priv.json", tmp_path / "priv.dot"
    for path in (out_json, out_dot):
        path.write_text("old")
        path.chmod(0o600)
    code, out, err = cli("export", f"{FUNCS}:matmul", "--json", str(out_json), "--dot", str(out_dot))
    assert code == 0, err
    assert [stat.S_IMODE(p.stat().st_mode) for p in (out_json, out_dot)] == [0o600, 0o600]
    assert json.loads(out_json.read_text())["target"]["function"] == "matmul"


# ----------------------------------------------------------------------------- 5. doctor on a slice


@pytest.mark.libtpu
def test_doctor_compiles_a_pallas_kernel_on_a_slice(cli):
    code, out, err = cli("doctor", "--target", "tpu-v5e:4x4", "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["compile tpu-v5e:4x4"]["state"] == "ok", checks["compile tpu-v5e:4x4"]
    assert "16 devices" in checks["compile tpu-v5e:4x4"]["detail"]
    assert code == 0, out + err


# ----------------------------------------------------------------------------- 6. a cache that cannot store


def test_a_cache_path_that_is_a_file_is_said_by_cache_and_doctor(cli, tmp_path, monkeypatch):
    from inspector.commands import doctor

    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    for where, needle in ((blocker, "is a file, not a folder"), (blocker / "cache", "cannot be made: ")):
        monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(where))
        code, out, err = cli("cache")
        assert code == 0 and err == "" and needle in out and "not created yet" not in out, out
        check = doctor._cache()
        assert check.state == doctor.WARN and needle in check.detail
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(blocker))
    code, out, err = cli("cache", "clear")
    assert code == 2 and out == "" and blocker.read_text() == "not a folder"
    one_line(err, "it is a file, not a folder; nothing was removed")


@pytest.mark.parametrize("errno_, needle", [(30, "is read-only"), (28, "its disk is full")])
def test_a_read_only_or_full_cache_folder_is_said(cli, tmp_path, monkeypatch, errno_, needle):
    """The probe write meets what a store would meet: EROFS (a read-only mount; root ignores a
    folder's mode bits, so the error is injected at the write) or ENOSPC."""
    from inspector.compilation import compile_cache
    from inspector.commands import doctor

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    assert compile_cache.info().problem is None and doctor._cache().state == doctor.INFO
    real_write = os.write

    def refuse(fd, data):
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(os, "write", refuse)
    try:
        found = compile_cache.info()
        check = doctor._cache()
    finally:
        monkeypatch.setattr(os, "write", real_write)
    assert needle in found.problem and "every run compiles again" in found.problem
    assert check.state == doctor.WARN and needle in check.detail
    assert list((tmp_path / "cache").iterdir()) == []  # the probe left nothing


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_cache_folder_is_said(cli, tmp_path, monkeypatch):
    from inspector.compilation import compile_cache

    folder = tmp_path / "cache"
    folder.mkdir()
    folder.chmod(0o555)
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(folder))
    try:
        assert "is read-only" in compile_cache.info().problem
    finally:
        folder.chmod(0o755)


# ----------------------------------------------------------------------------- 7. a cached HLO that does not parse

_HLO = ("HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n"
        "ENTRY %main.3 (Arg_0.1: f32[4]) -> f32[4] {\n  %Arg_0.1 = f32[4]{0} parameter(0)\n"
        "  ROOT %add.2 = f32[4]{0} add(f32[4]{0} %Arg_0.1, f32[4]{0} %Arg_0.1)\n}\n\n")
BAD_HLO = {
    "no module header": "garbage",
    "a header only": "HloModule m",
    "no ENTRY": _HLO.replace("ENTRY ", ""),
    "cut before the ROOT": _HLO[:_HLO.index("  ROOT")],
    "no closing brace": _HLO.rstrip().removesuffix("}"),
}


@pytest.mark.parametrize("case", BAD_HLO)
def test_a_cached_hlo_that_does_not_parse_is_a_miss(tmp_path, monkeypatch, case):
    from inspector.compilation import compile_cache
    from inspector.hlo.module import parse_hlo

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    good = {"hlo": _HLO, "cost": {"flops": 4.0}, "memory": {"temp_size_in_bytes": 0}, "error": None}
    assert parse_hlo(_HLO).entry == "main.3" and compile_cache.store("a" * 64, good) and compile_cache.load("a" * 64) == good
    entry = tmp_path / ("a" * 64 + ".json")
    stored = json.loads(entry.read_text())
    stored["result"]["hlo"] = BAD_HLO[case]
    entry.write_text(json.dumps(stored))
    assert compile_cache.load("a" * 64) is None


def test_a_cache_entry_whose_hlo_does_not_parse_is_compiled_again_and_replaced(tmp_path):
    env = _env(INSPECTOR_CACHE_DIR=str(tmp_path / "cache"))
    show = [sys.executable, "-m", "inspector", "show", f"{FUNCS}:matmul"]
    first = subprocess.run(show, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    [entry] = (tmp_path / "cache").glob("*.json")
    stored = json.loads(entry.read_text())
    stored["result"]["hlo"] = "HloModule jit_matmul\nthis is not HLO\n"
    entry.write_text(json.dumps(stored))
    second = subprocess.run(show, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert second.returncode == 0 and second.stderr == "", second.stderr
    assert "(compile from cache)" not in second.stdout and "analysis-failed" not in second.stdout
    assert "ENTRY" in json.loads(entry.read_text())["result"]["hlo"]  # replaced by the fresh compile
    third = subprocess.run(show, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert "(compile from cache)" in third.stdout and "analysis-failed" not in third.stdout


# ----------------------------------------------------------------------------- the CPU compile's machine code


CPU_PROGRAMS = ["samples/transformer.py:train_step", "samples/attention.py:flash", "samples/moe.py:experts",
                f"{FUNCS}:matmul"]


@pytest.mark.slow
@pytest.mark.parametrize("spec", CPU_PROGRAMS)
def test_the_cpu_compile_without_llvm_optimization_gives_the_same_hlo_cost_and_memory(spec):
    """xla_compile.machine_code_options: what the inspector reads of a CPU compile (the optimized HLO,
    XLA's cost and memory analyses, the buffer assignment) is the same as JAX's own compile's."""

    from inspector.compilation import stages, xla_compile
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target

    target = load_target(spec)
    backend = Backend(get_chip("cpu"))
    lowered = stages._lower(target, backend, jaxpr_text=False, memo=False).lowered
    assert xla_compile.machine_code_options(backend) == {"xla_backend_optimization_level": 0}
    with stages._interpret_context(backend):
        ours, _ = xla_compile.compile_lowered(lowered, backend, use_cache=False, buffers=True)
        plain = lowered.compile()
        with xla_compile.dump_folder(True) as folder:
            dumped = lowered.compile(xla_compile.buffer_dump_options(folder))
            from inspector.hlo.buffers import read_dump
            buffers = read_dump(folder)
    assert ours["hlo"] == plain.as_text() == dumped.as_text()
    assert ours["cost"] == xla_compile.cost_dict(plain.cost_analysis())
    assert ours["memory"] == xla_compile.memory_dict(plain.memory_analysis())
    assert ours["buffers"] == buffers


def test_the_stages_say_which_compile_options_changed_the_machine_code(tmp_path, monkeypatch):
    from inspector.compilation import stages
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(stages, "_MEMO", {})
    # one call site: jax's locations hold the caller's frames too, and they are part of the key
    fresh, cached = [stages.capture(load_target(f"{FUNCS}:matmul"), Backend(get_chip("cpu")), memo=False).stages
                     for _ in range(2)]
    assert fresh.compile_options == {"xla_backend_optimization_level": 0} and not fresh.compile_cached
    assert cached.compile_cached and cached.compile_options == {} and cached.hlo == fresh.hlo


# ----------------------------------------------------------------------------- also made clear

ALSO = ("import time\nimport jax.numpy as jnp\n"
        "def f(x, block: int = 128, scale: float = 1.0):\n    return x * scale\n"
        "def tokens(ids, x):\n    return x[ids % 4]\n"
        "def nan(x):\n    return x * jnp.nan\n"
        "def empty(x):\n    return x[:0]\n"
        "def slow(x):\n    time.sleep(1.0)\n    return x * 2\n"
        "INSPECT = {\n"
        "    'f': {'args': 'f32[8]'},\n"
        "    'empty_list': {'args': 'f32[8]', 'params': {'block': []}},\n"
        "    'wrong_kind': {'args': 'f32[8]', 'params': {'block': [128, 'big']}},\n"
        "    'mixed_numbers': {'args': 'f32[8]', 'params': {'scale': [1, 0.5]}},\n"
        "    'float_range': {'args': 's32[4] f32[4]', 'int_ranges': {'x': (0, 4)}},\n"
        "    'past_dtype': {'args': 's8[4] f32[4]', 'int_ranges': {'ids': (-200, 4)}},\n"
        "    'fits_dtype': {'args': 'u8[4] f32[4]', 'int_ranges': {'ids': (0, 256)}},\n"
        "    'nan': {'args': 'f32[8,128]', 'reference': 'nan'},\n"
        "    'empty': {'args': 'f32[8,128]', 'reference': 'empty'},\n"
        "    'slow': {'args': 'f32[4]'},\n"
        "}\n"
        "empty_list = wrong_kind = mixed_numbers = f\n"
        "float_range = past_dtype = fits_dtype = tokens\n")


@pytest.fixture
def also(tmp_path) -> str:
    (tmp_path / "also.py").write_text(ALSO)
    return str(tmp_path / "also.py")


@pytest.mark.parametrize("argv, needle", [
    (["--set-a", "block=abc", "--set-b", "block=256"], "--set-a block=abc: block takes an int (like 128), e.g. --set-a block=128"),
    (["--set-a", "block=64", "--set-b", "novalue"], "--set-b 'novalue': write --set-b name=value"),
    (["--set-a", "nope=1", "--set-b", "block=256"], "--set-a nope=... but the function takes no parameter 'nope'"),
    (["--set", "block=x", "--set-b", "block=256"], "--set block=x: block takes an int"),
])
def test_messages_name_the_flag_given(cli, also, argv, needle):
    code, out, err = cli("compare", f"{also}:f", *argv)
    assert code == 2 and out == ""
    one_line(err, needle)


@pytest.mark.parametrize("select", ["1..2..3", "..", "", " "])
def test_a_pass_that_is_no_step_is_refused_with_the_grammar_at_once(cli, select, monkeypatch):
    from inspector.commands import verbs

    monkeypatch.setattr(verbs, "run", lambda *job, **kwargs: pytest.fail("compiled before refusing"))
    code, out, err = cli("show", f"{FUNCS}:matmul", "--pass", select)
    assert code == 2 and out == ""
    one_line(err, "give a step (a pass name, part of one, or its index")


def test_passes_outside_the_fusions_view_says_so(cli, monkeypatch):
    from inspector.commands import verbs

    monkeypatch.setattr(verbs, "run", lambda *job, **kwargs: pytest.fail("compiled before refusing"))
    code, out, err = cli("show", f"{FUNCS}:matmul", "--view", "hlo", "--passes")
    assert code == 2
    one_line(err, "--passes names the pass that made each kernel in the fusions view: add --view fusions")


@pytest.mark.parametrize("entry, needle", [
    ("empty_list", "[\"params\"]['block'] is an empty list: give the values to try"),
    ("wrong_kind", "holds 'big' (a str) but block takes an int (like 128)"),
    ("float_range", "names 'x', a float32 input: int_ranges sets the values of integer inputs"),
    ("past_dtype", "['ids'] = (-200, 4) does not fit int8 (-128 to 127)"),
])
def test_inspect_params_and_int_ranges_are_checked(cli, also, entry, needle):
    code, out, err = cli("show", f"{also}:{entry}", "--view", "jaxpr")
    assert code == 2 and out == ""
    one_line(err, needle)


@pytest.mark.parametrize("entry", ["mixed_numbers", "fits_dtype"])
def test_inspect_params_and_int_ranges_that_are_fine(cli, also, entry):
    code, out, err = cli("show", f"{also}:{entry}", "--view", "jaxpr")
    assert code == 0 and err == "", err


@pytest.mark.parametrize("entry, severity, code_, needle", [
    ("nan", "warning", "all-nan", "all 1024 elements are NaN in the kernel and in the reference"),
    ("empty", "info", "no-elements", "output: no elements (float32[0, 128]): nothing to compare"),
])
def test_diff_says_when_nothing_was_compared(cli, also, entry, severity, code_, needle):
    code, out, err = cli("diff", f"{also}:{entry}", "--runs", "0", "--json")
    result = json.loads(out)
    [finding] = [f for f in result["findings"] if f["code"] == code_]
    assert finding["severity"] == severity and needle in finding["message"] and code == 0
    if entry == "empty":
        code, out, err = cli("diff", f"{also}:{entry}", "--runs", "0")
        assert "no elements" in out.split("findings")[0] and "() 0 vs 0" not in out


def test_a_slow_trace_says_what_it_is_doing(also, monkeypatch):
    """The CLI's child names a stream (base.child_process.child_main); past SLOW_AFTER_S the trace says so."""
    import io

    from inspector.base import progress
    from inspector.compilation import stages
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target

    told = io.StringIO()
    monkeypatch.setattr(progress, "SLOW_AFTER_S", 0.3)
    monkeypatch.setattr(progress, "_stream", told)
    stages.capture(load_target(f"{also}:slow"), Backend(get_chip("cpu")), compile=False, memo=False)
    assert told.getvalue().startswith("inspector: still tracing slow (jax runs the Python function once) (0 s so far)")
    progress.report_to(None)
    quiet = io.StringIO()
    stages.capture(load_target(f"{also}:slow"), Backend(get_chip("cpu")), compile=False, memo=False)
    assert quiet.getvalue() == ""


def test_compare_pairs_the_kernels_of_a_copy(cli, tmp_path):
    """B a copy of A in another file: the same kernels at the same lines of another file pair up."""
    copy = tmp_path / "attention_copy.py"
    copy.write_text((ROOT / "samples" / "attention.py").read_text())
    code, out, err = cli("compare", "samples/attention.py:naive", f"{copy}:naive", "--json")
    result = json.loads(out)
    assert code == 0 and result["paired"] == 3 and result["only_a"] == [] and result["only_b"] == []


@pytest.mark.libtpu
def test_a_huge_input_on_a_tpu_is_an_hbm_finding(cli, also):
    code, out, err = cli("show", f"{also}:f", "--target", "tpu-v5e", "--args", "f32[65536,65536]", "--json")
    codes = {f["code"]: f for f in json.loads(out)["findings"]}
    assert "hbm-over-capacity" in codes and "compile-error" not in codes and code == 1


# ------------------------------------------------ the audit of the new surfaces (time, bundles, Mosaic)

def _fake_libtpu(monkeypatch, outcome, records=()):
    """libtpu's dump session faked (nothing compiles): every compile ends as ``outcome``, and the
    program lowers to ``records`` (its Pallas grids)."""

    from inspector.libtpu import estimate as est
    from inspector.libtpu import programs

    class Session:
        def run(self, request, seconds, memory_bytes):
            return outcome

    monkeypatch.setattr(est, "open_session", lambda *a, **k: contextlib.nullcontext(Session()))
    monkeypatch.setattr(est, "open_sessions", lambda *a, count=1, **k: contextlib.nullcontext([Session()] * count))
    monkeypatch.setattr(programs.Program, "request", lambda self, grids=None, force=None: (object(), list(records)))
    monkeypatch.setattr(programs.Program, "values", lambda self: [(None, None)] * len(records))
    monkeypatch.setattr(est, "alone_program", lambda program, kernels: None)  # no program of kernels alone


def _stopped_run(monkeypatch, grid, status="time-limit"):
    """An estimate whose every libtpu compile is stopped (a fake session: nothing compiles)."""
    from types import SimpleNamespace

    from inspector.base.chips import get_chip
    from inspector.libtpu import estimate as est
    from inspector.libtpu.runner import Outcome

    record = SimpleNamespace(name="k", grid=grid, used=grid, guard=None, semantics=("arbitrary",) * len(grid))
    _fake_libtpu(monkeypatch, Outcome(status, 1.0, None, detail="stopped (the time budget)"), [record])
    kernel = SimpleNamespace(name="k.1", kind="custom-call:pallas", compiler_cycles=None, roofline_s=1e-6, repeat=1)
    budget = est.Budget(seconds=1.0)  # the least a budget may be (the compile is stopped all the same, here)
    return est._Run(None, None, get_chip("tpu-v5e"), [kernel], budget).run()


@pytest.mark.parametrize("grid", [(2, 2), (64, 64)])
def test_a_budget_that_stops_libtpu_is_said(monkeypatch, grid):
    """`--time-budget 1e-9`: libtpu's compile was stopped; the roofline figures came without a word
    of why ("roofline (libtpu gave none)"). A time-budget finding says the budget stopped it."""
    estimate = _stopped_run(monkeypatch, grid)
    assert [t.estimate_source for t in estimate.kernels] == ["roofline"]
    notes = [f for f in estimate.findings if f.code == "time-budget"]
    assert notes and "passed its time limit" in notes[0].message, estimate.findings


def test_untimed_kernels_is_a_count(monkeypatch):
    """JSON `time_estimate.totals.untimed_kernels` read 155.0: a count of kernels is an integer."""
    estimate = _stopped_run(monkeypatch, (2, 2))
    untimed = estimate.totals["untimed_kernels"]
    assert isinstance(untimed, int) and json.dumps(untimed) == "0"


@pytest.mark.parametrize("argv, needle", [
    (("show", "{f}", "--view", "jaxpr", "--time"), "--view jaxpr does not show it"),
    (("show", "{f}", "--view", "mosaic", "--time"), "--view mosaic does not show it"),
    (("show", "{f}", "--time-budget", "5"), "add --time"),
    (("show", "{f}", "--view", "hlo", "--time-budget", "5"), "add --time"),
    (("compare", "{f}", "--set-a", "n=1", "--set-b", "n=2", "--time-budget", "5"), "add --time"),
    (("export", "{f}", "--json", "{tmp}/x.json", "--time-budget", "5"), "add --time"),
    (("show", "{f}", "--time-memory", "8"), "add --time"),
    (("show", "{f}", "--time", "--time-memory", "0"), "give a number of GiB > 0"),
    (("show", "{f}", "--time", "--time-memory", "lots"), "is not a number of GiB"),
])
def test_time_options_where_they_do_nothing_are_refused(cli, monkeypatch, tmp_path, argv, needle):
    """`--time --view jaxpr` ran libtpu's compiles (up to a minute) and showed nothing of them;
    `--time-budget` without `--time` was silently ignored. Both are usage errors, before any compile."""
    from inspector.commands import verbs

    monkeypatch.setattr(verbs, "run", lambda *job, **kwargs: pytest.fail("compiled before refusing"))
    code, out, err = cli(*(a.format(f=f"{FUNCS}:matmul", tmp=tmp_path) for a in argv))
    assert code == 2, err
    one_line(err, needle)


def test_time_memory_reaches_the_estimate(cli, monkeypatch):
    """`--time-memory`: the memory libtpu's simulation may use (a program such as attention's
    reference needs 10.6 GiB, past the default 4); the seconds keep their default."""
    import inspector.results.report as report

    seen = {}

    def make_report(*args, time_budget=None, **kwargs):
        seen["budget"] = time_budget
        raise SystemExit(0)

    monkeypatch.setattr(report, "make_report", make_report)
    cli("show", f"{FUNCS}:matmul", "--target", "tpu-v5e", "--time", "--time-memory", "12.5")
    assert seen["budget"].memory_bytes == int(12.5 * 2**30) and seen["budget"].seconds == 60


def test_xla_ops_past_the_memory_budget_say_how_to_give_more():
    """A program whose XLA ops are too costly to simulate in one compile is not simulated whole,
    and the note names the budget's memory; with enough memory it is."""
    from types import SimpleNamespace

    from inspector.libtpu.budget import Budget
    from inspector.libtpu.plan import make_plan

    # 14.5M cycles by the compiler's estimate: about 5.8 GB to simulate at the budget's rates
    fusion = SimpleNamespace(name="fusion.3", kind="fusion:loop", compiler_cycles=14_500_000, compiler_gave_up=False, repeat=1)
    small = make_plan([fusion], {}, [], Budget(seconds=1000.0), cores=1)
    assert "whole" not in [j.label for j in small.jobs] and "4 GiB" in small.notes[0]
    large = make_plan([fusion], {}, [], Budget(seconds=1000.0, memory_bytes=16 * 2**30), cores=1)
    assert [j.label for j in large.jobs] == ["whole"]


def test_time_with_a_view_that_shows_it_is_not_refused():
    from inspector.verbs.rules import check_time_options

    for view in ("overview", "fusions", "bundles"):
        check_time_options(True, 5.0, view)
    check_time_options(True, None, "jaxpr", json=True)  # JSON carries kernels[].estimated_*
    check_time_options(False, 5.0, "bundles")  # the bundles view estimates anyway


@pytest.mark.parametrize("kwargs", [{"seconds": float("nan")}, {"seconds": float("inf")}, {"seconds": 0},
                                    {"seconds": -5}, {"memory_bytes": -1}, {"memory_bytes": 0}])
def test_a_budget_that_cannot_be_kept_is_refused_in_python(kwargs):
    """`estimate_times(budget=Budget(seconds=nan))` handed nan to the compile's hard stop as its
    timeout, inf none at all; the CLI refused these, the Python API did not."""
    import inspector
    from inspector.libtpu import Budget

    with pytest.raises(inspector.UsageError, match="Budget"):
        Budget(**kwargs)


@pytest.mark.libtpu
def test_the_mosaic_view_of_a_kernel_that_fails_exits_1(cli):
    """`show --view mosaic` on a kernel Mosaic refuses printed "the compile failed" and exited 0
    (the overview of the same kernel exits 1): the failure is its error finding, once."""
    code, out, err = cli("show", "samples/mosaic_errors.py:unaligned_rows", "--target", "tpu-v5e", "--view", "mosaic",
                         "--json")
    assert code == 1, err
    found = [f for f in json.loads(out)["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in found] == ["mosaic-unproven-alignment"], found
    assert found[0]["data"]["source"] == "samples/mosaic_errors.py:36"


def test_a_function_of_no_inputs_needs_no_args(cli, tmp_path):
    """`def table(): return jnp.arange(8.0)` was refused ("no example inputs. Give them with
    --args ..."), and `--args ""` is an empty shape spec: a function of no inputs could not be shown."""
    (tmp_path / "consts.py").write_text("import jax.numpy as jnp\n\ndef table(scale: float = 2.0):\n"
                                        "    return jnp.arange(8.0) * scale\n")
    code, out, err = cli("show", f"{tmp_path}/consts.py:table", "--view", "jaxpr")
    assert code == 0, err
    assert "iota" in out


def test_figures_libtpu_did_not_simulate_are_not_called_libtpus(monkeypatch):
    """v4: libtpu's simulation refuses the chip ("Dma latency model ... only supported on
    VF/VL/GF/GL"), and the overview said "(libtpu)" all the same; its words for each method never
    matched the method names, so none was ever shown. Every kernel is a floor (the compiler's own
    cycles are no bound). Nor is the refusal a budget problem: one warning says it, nothing is simulated."""
    from types import SimpleNamespace

    from inspector.base.chips import get_chip
    from inspector.libtpu import estimate as est
    from inspector.libtpu.runner import Outcome
    from inspector.views.printer import _estimate_line

    _fake_libtpu(monkeypatch, Outcome("ok", 1.0, None))
    fusions = [SimpleNamespace(name=f"tanh_multiply_fusion.{i}", kind="loop", compiler_cycles=619, roofline_s=1e-8, repeat=1)
               for i in range(3)]
    estimate = est._Run(None, None, get_chip("tpu-v4"), fusions, est.Budget()).run()
    assert [(t.estimate_source, t.estimate_kind, t.estimated_seconds) for t in estimate.kernels] == [("roofline", "floor", 1e-8)] * 3
    assert [j.label for j in estimate.jobs] == ["bundles"]  # the bundles only: no simulation libtpu would refuse
    (refused,) = [f for f in estimate.findings if f.code == "libtpu-refused"]
    assert refused.severity == "warning" and "--time-budget" in refused.message and "tpu-v4" in refused.message
    assert not [f for f in estimate.findings if f.code == "time-budget"]
    assert estimate.method == "roofline"
    line = _estimate_line(SimpleNamespace(time=estimate))
    assert line.startswith(">= ") and "(roofline: libtpu gave none" in line, line


def test_compare_never_puts_a_simulation_against_a_roofline():
    """`compare --target-a tpu-v5e --target-b tpu-v4 --time`: "estimated time (libtpu) 4.79 us 1.07 us
    0.22x", though v4's figure is the roofline (libtpu does not simulate v4). Each side's method is
    named and unlike figures get no ratio."""
    from types import SimpleNamespace

    from inspector.verbs.comparison import _totals

    def report(seconds, method):
        return SimpleNamespace(fusions=SimpleNamespace(totals={"estimated_seconds": seconds, "hbm_bytes": 1},
                                                       kernels=[]),
                               stages=SimpleNamespace(memory={}, timings={}), time=SimpleNamespace(method=method))

    row = next(t for t in _totals(report(4.79e-6, "libtpu"), report(1.07e-6, "roofline")) if t.name.startswith("estim"))
    assert row.name == "estimated time (A libtpu, B roofline)" and row.ratio is None, row
    same = next(t for t in _totals(report(4e-6, "libtpu"), report(2e-6, "libtpu")) if t.name.startswith("estim"))
    assert same.name == "estimated time (libtpu)" and same.ratio == pytest.approx(0.5), same


def test_the_fusions_totals_name_where_the_estimate_came_from():
    """The fusions view's totals said "estimated time (libtpu)" whatever made the figures (on v4
    the compiler's cost model, with a budget spent the roofline)."""
    from types import SimpleNamespace

    from rich.console import Console

    from inspector.views.fusions import totals_table

    kernels = [SimpleNamespace(estimate_source="libtpu-extrapolated"), SimpleNamespace(estimate_source="roofline")]
    totals = {"flops": 1, "bytes": 1, "transcendentals": 0, "hbm_bytes": 1, "roofline_s": 1e-6, "estimated_seconds": 2e-6}
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    console.print(totals_table(SimpleNamespace(totals=totals, xla_cost=None, agreement={}, kernels=kernels)))
    text = console.export_text()
    assert "estimated time (libtpu-extrapolated, roofline)" in text and "(libtpu)" not in text, text


def test_a_collective_libtpu_gives_0_cycles_is_not_timed_by_libtpu(monkeypatch):
    """`--target tpu-v5e:2x2 --mesh data=2,model=2 --time`: libtpu's one-chip simulation lists the
    all-gathers and all-reduce at 0 cycles, shown as "0 ns" from libtpu. Not simulated is not free."""
    from types import SimpleNamespace

    from inspector.base.chips import get_chip
    from inspector.libtpu import estimate as est
    from inspector.libtpu.runner import Outcome

    _fake_libtpu(monkeypatch, Outcome("ok", 1.0, None, cycles={"all-reduce": 0, "fusion.3": 300}))
    kernels = [SimpleNamespace(name="all-reduce", kind="collective", compiler_cycles=None, compiler_gave_up=False,
                               roofline_s=None, repeat=1),
               SimpleNamespace(name="fusion.3", kind="loop", compiler_cycles=280, compiler_gave_up=False, roofline_s=1e-8,
                               repeat=1)]
    estimate = est._Run(None, None, get_chip("tpu-v5e"), kernels, est.Budget()).run()
    by_name = {t.name: t for t in estimate.kernels}
    assert by_name["fusion.3"].estimate_source == "libtpu" and by_name["fusion.3"].estimated_cycles == 300
    assert by_name["all-reduce"].estimate_source != "libtpu" and by_name["all-reduce"].estimated_seconds is None


@pytest.mark.parametrize("paired, said", [
    (0, "no kernel is on both sides: each side's own are listed below"),
    (1, "the one kernel on both sides moves the same HBM bytes"),
    (3, "the 3 kernels on both sides move the same HBM bytes"),
])
def test_compare_says_when_no_kernel_pairs_up(paired, said):
    """compare.md's naive against flash printed "the 0 kernels on both sides move the same HBM bytes"."""
    from types import SimpleNamespace

    from inspector.views.compare import changed_table

    assert changed_table(SimpleNamespace(changed=[], paired=paired), 10).plain == said
