"""Bad input and faults: every one is one line on stderr, the right exit code and no traceback.

Most cases run the CLI in this process (``main(argv, isolate=False)``: same parsing, messages and
codes, no child process to start); what needs a real process (a closed stdout, signals, a child
that dies, the cache across runs) runs ``python -m inspector`` in a subprocess.
"""
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT

from inspector.cli import main

FUNCS = str(DATA / "funcs.py")
HOSTILE = str(DATA / "hostile.py")
NAIVE = "samples/attention.py:naive"
LONG = "x" * 300

BAD_FILES = {
    "syntax.py": "def f(x):\n    return x +\n",
    "import_raises.py": "x = 1 / 0\n",
    "inspect_list.py": "INSPECT = [1]\ndef f(x):\n    return x\n",
    "plain.py": "def f(x):\n    return x\n",
    "module_exit0.py": "import sys\nsys.exit(0)\ndef f(x):\n    return x\n",
    "module_exit3.py": "import sys\nsys.exit(3)\ndef f(x):\n    return x\n",
    "module_keyboard.py": "raise SystemExit('stop here')\ndef f(x):\n    return x\n",
    "module_interrupt.py": "raise KeyboardInterrupt\ndef f(x):\n    return x\n",
    "diffs.py": ("import jax.numpy as jnp\n"
                 "def inf(x):\n    return x * 0 + jnp.inf\n"
                 "def none(x):\n    return None\n"
                 "def ident(x):\n    return x\n"
                 "def cplx(x):\n    return x.astype(jnp.complex64) * (1 + 1j)\n"
                 "def cplx_conj(x):\n    return jnp.conj(cplx(x))\n"
                 "def ref_raises(x):\n    raise ValueError('the reference broke')\n"
                 "INSPECT = {n: {'args': 'f32[4]'} for n in ('inf', 'none', 'ident', 'cplx')}\n"),
    "inspect_bad.py": ("def f(x):\n    return x\n"
                       "INSPECT = {'entry_str': 'f32[4]', 'params_str': {'args': 'f32[4]', 'params': 'block=8'},\n"
                       "           'args_int': {'args': 5}, 'args_none': {'args': lambda: None},\n"
                       "           'args_text': {'args': lambda: 'f32[4]'}, 'args_text_in_tuple': {'args': lambda: ('f32[4]',)},\n"
                       "           'key_typo': {'args': 'f32[4]', 'parms': {'scale': [1, 2]}}, 'entry_tpyo': {'args': 'f32[4]'},\n"
                       "           'ranges_list': {'args': 's32[4]', 'int_ranges': [-8, 8]},\n"
                       "           'ranges_typo': {'args': 's32[4]', 'int_ranges': {'y': (-8, 8)}},\n"
                       "           'ranges_empty': {'args': 's32[4]', 'int_ranges': {'x': (8, 8)}}}\n"
                       "entry_str = params_str = args_int = args_none = args_text = args_text_in_tuple = key_typo = f\n"
                       "ranges_list = ranges_typo = ranges_empty = f\n"
                       "def entry_typo(x):\n    return x\n"),
}


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    for name, text in BAD_FILES.items():
        (d / name).write_text(text)
    (d / "data.bin").write_bytes(b"\x00\x01\xffELF\x00")
    (d / "binary_link.py").symlink_to(d / "data.bin")
    (d / "folder.py").mkdir()
    (d / "folder_link.py").symlink_to(d / "folder.py")
    (d / "loop.py").symlink_to(d / "loop.py")
    (d / "dangling.json").symlink_to(d / "gone" / "x.json")
    return d


# (argv, exit code, a piece of the one line). {d}: a folder of bad files, {funcs}, {hostile}: data files.
USAGE = {
    "no arguments": ([], 2, "give a target"),
    "verb without target": (["show"], 2, "required: target"),
    "missing file": (["show", "missing.py:f"], 2, "no such file"),
    "bare missing file": (["missing.py:f"], 2, "no such file"),
    "tui verb, missing file": (["tui", "missing.py:f"], 2, "no such file"),
    "no colon": (["show", "{funcs}"], 2, "must be path/to/file.py:function"),
    "empty file part": (["show", ":f"], 2, "must be path/to/file.py:function"),
    "empty function part": (["show", "{funcs}:"], 2, "must be path/to/file.py:function"),
    "unknown function": (["show", "{funcs}:nope"], 2, "no function named 'nope'"),
    "not callable": (["show", "{funcs}:NOT_CALLABLE"], 2, "not a function"),
    "not a .py file": (["show", "README.md:f"], 2, "not a Python file"),
    "a folder named .py": (["show", "{d}/folder.py:f"], 2, "is not a file"),
    "300-character name": (["show", "{d}/" + LONG + ".py:f"], 2, "File name too long"),
    "non-UTF-8 path": (["show", "{d}/caf\udce9.py:f"], 2, "not valid UTF-8"),
    "link to a binary": (["show", "{d}/binary_link.py:f"], 2, "not Python source"),
    "link to a folder": (["show", "{d}/folder_link.py:f"], 2, "is not a file"),
    "link loop": (["show", "{d}/loop.py:f"], 2, "loop.py"),
    "syntax error": (["show", "{d}/syntax.py:f"], 2, "SyntaxError"),
    "import raises": (["show", "{d}/import_raises.py:f"], 2, "ZeroDivisionError"),
    "INSPECT not a dict": (["show", "{d}/inspect_list.py:f"], 2, "INSPECT must be a dict"),
    "no inputs": (["show", "{d}/plain.py:f"], 2, "no example inputs"),
    "INSPECT entry not a dict": (["show", "{d}/inspect_bad.py:entry_str"], 2, "INSPECT['entry_str'] must be a dict"),
    "INSPECT params not a dict": (["show", "{d}/inspect_bad.py:params_str"], 2, "[\"params\"] must be a dict"),
    "--set of the wrong kind": (["show", "samples/attention.py:flash", "--set", "causal=maybe"], 2,
                                "causal takes a bool (like True)"),
    "--set int as a float": (["show", "samples/attention.py:flash", "--set", "block_q=128.5"], 2, "block_q takes an int"),
    "INSPECT key mistyped": (["show", "{d}/inspect_bad.py:key_typo"], 2, "unknown key 'parms' (did you mean 'params'?)"),
    "INSPECT entry mistyped": (["show", "{d}/inspect_bad.py:entry_typo"], 2, "is 'entry_tpyo' meant to be it?"),
    "INSPECT int_ranges a list": (["diff", "{d}/inspect_bad.py:ranges_list"], 2, "[\"int_ranges\"] must be a dict of input name"),
    "INSPECT int_ranges mistyped": (["show", "{d}/inspect_bad.py:ranges_typo"], 2, "names 'y', which is no input of ranges_typo"),
    "INSPECT int_ranges empty": (["show", "{d}/inspect_bad.py:ranges_empty"], 2, "['x'] must be two integers (low, high)"),
    "INSPECT args an int": (["show", "{d}/inspect_bad.py:args_int"], 2, "INSPECT args must be a shape spec string"),
    "INSPECT args returns None": (["show", "{d}/inspect_bad.py:args_none"], 2, "INSPECT args returned None"),
    "INSPECT args returns text": (["show", "{d}/inspect_bad.py:args_text"], 2, "INSPECT args returned the text"),
    "INSPECT args returns a tuple of text": (["show", "{d}/inspect_bad.py:args_text_in_tuple"], 2, "a tuple holding text"),
    "unknown module": (["show", "nosuchpkg_xyz.mod:f"], 2, "cannot import module"),
    "INSPECT args raise": (["show", "{hostile}:args_raise"], 2, "RuntimeError: no inputs today"),
    "spec: letter dim": (["show", NAIVE, "--args", "f32[2,x]"], 2, "bad dimension 'x'"),
    "spec: unknown dtype": (["show", NAIVE, "--args", "zz[2]"], 2, "unknown dtype 'zz'"),
    "spec: superscript dim": (["show", NAIVE, "--args", "f32[\u00b2]"], 2, "bad dimension"),
    "spec: Arabic-Indic dim": (["show", NAIVE, "--args", "f32[\u0663]"], 2, "bad dimension"),
    "spec: dim past int64": (["show", NAIVE, "--args", "f32[99999999999999999999]"], 2, "too large"),
    "spec: bytes past int64": (["show", NAIVE, "--args", "f32[4611686018427387904]"], 2, "too large"),
    "spec: product past int64": (["show", NAIVE, "--args", "f32[4294967296,4294967296]"], 2, "too large"),
    "spec: duplicate keyword": (["show", "{funcs}:kw_only", "--args", "f32[4] bias=f32[4] bias=f32[8]"], 2, "given twice"),
    "spec: positional after keyword": (["show", NAIVE, "--args", "q=f32[4] f32[4]"], 2, "comes after a keyword"),
    "spec: empty": (["show", NAIVE, "--args", ""], 2, "empty shape spec"),
    "spec: unclosed": (["show", NAIVE, "--args", "f32[4"], 2, "bad shape spec"),
    "spec: negative dim": (["show", NAIVE, "--args", "f32[-1]"], 2, "bad dimension"),
    "spec: fractional dim": (["show", NAIVE, "--args", "f32[1.5]"], 2, "bad dimension"),
    "spec: no dtype": (["show", NAIVE, "--args", "[4]"], 2, "bad shape spec"),
    "spec: empty name": (["show", NAIVE, "--args", "=f32[4]"], 2, "bad shape spec"),
    "spec: bad name": (["show", NAIVE, "--args", "1x=f32[4]"], 2, "bad shape spec"),
    "wrong arity": (["show", NAIVE, "--args", "f32[2,8,4]"], 2, "needs 3 inputs"),
    "unknown --set": (["show", NAIVE, "--set", "nope=1"], 2, "takes no parameter 'nope'"),
    "--set without =": (["show", NAIVE, "--set", "novalue"], 2, "write --set name=value"),
    "--set without name": (["show", NAIVE, "--set", "=3"], 2, "write --set name=value"),
    "unknown view": (["show", NAIVE, "--view", "nope"], 2, "invalid choice"),
    "unknown chip": (["show", NAIVE, "--target", "tpu-v9"], 2, "unknown target 'tpu-v9'"),
    "empty chip": (["show", NAIVE, "--target", ""], 2, "unknown target ''"),
    "negative --top": (["show", NAIVE, "--top", "-1"], 2, "negative"),
    "non-number --top": (["show", NAIVE, "--top", "x"], 2, "not a whole number"),
    "unknown --sort": (["show", NAIVE, "--sort", "nope"], 2, "invalid choice"),
    "unknown roofline chip": (["show", NAIVE, "--roofline", "nope"], 2, "unknown target 'nope'"),
    "unknown flag": (["show", NAIVE, "--bogus"], 2, "unrecognized arguments"),
    "flag without value": (["show", NAIVE, "--args"], 2, "expected one argument"),
    "unknown --ref": (["show", NAIVE, "--ref", "nope"], 2, "no function named 'nope'"),
    "missing --ref file": (["show", NAIVE, "--ref", "missing.py:f"], 2, "no such file"),
    "diff: negative --runs": (["diff", NAIVE, "--runs", "-1"], 2, "negative"),
    "diff: negative --atol": (["diff", NAIVE, "--atol", "-1"], 2, "finite number >= 0"),
    "diff: nan --rtol": (["diff", NAIVE, "--rtol", "nan"], 2, "finite number >= 0"),
    "diff: non-number --seed": (["diff", NAIVE, "--seed", "x"], 2, "not a whole number"),
    "diff: a spec-only --target": (["diff", NAIVE, "--target", "b200"], 2, "interpret mode simulates"),
    "diff: no reference": (["diff", "{hostile}:no_reference"], 2, "has no reference"),
    "check: cpu target": (["check", NAIVE, "--target", "cpu"], 2, "not cpu"),
    "check: unknown chip in list": (["check", NAIVE, "--target", "tpu-v5e,nope"], 2, "unknown target 'nope'"),
    "export: no output": (["export", NAIVE], 2, "needs at least one of"),
    "export: one file twice": (["export", NAIVE, "--json", "{d}/x.out", "--dot", "{d}/x.out"], 2, "both name"),
    "export: missing folder": (["export", NAIVE, "--json", "{d}/nowhere/x.json"], 2, "does not exist"),
    "export: a folder": (["export", NAIVE, "--json", "{d}"], 2, "is a folder"),
    "export: into a file": (["export", NAIVE, "--json", "{d}/diffs.py/x.json"], 2, "diffs.py is a file, not a folder"),
    "export: 300-character name": (["export", NAIVE, "--dot", "{d}/" + LONG + ".dot"], 2, "File name too long"),
    "export: a link into a missing folder": (["export", NAIVE, "--json", "{d}/dangling.json"], 2, "gone does not exist"),
    "export: negative --max-nodes": (["export", NAIVE, "--dot", "{d}/g.dot", "--max-nodes", "-3"], 2, "give 1 or more"),
    "cache: unknown action": (["cache", "bogus"], 2, "invalid choice"),
    "chips: unknown flag": (["chips", "--bogus"], 2, "unrecognized arguments"),
}

FAILURES = {
    "diff: the reference raises": (["diff", "{d}/diffs.py:ident", "--ref", "ref_raises", "--runs", "0"], 1,
                                   "ValueError: the reference broke (raised while running the reference"),
    "sys.exit(0) while tracing": (["show", "{hostile}:exits_0"], 1, "sys.exit(0)"),
    "sys.exit(5) while tracing": (["show", "{hostile}:exits_5"], 1, "sys.exit(5)"),
    "sys.exit(message) while tracing": (["show", "{hostile}:exits_message", "--view", "jaxpr"], 1, "sys.exit('giving up')"),
    "KeyError while tracing": (["show", "{hostile}:raises_key_error"], 1, "KeyError"),
    "TypeError while tracing": (["show", "{funcs}:raises_in_trace"], 1, "funcs.py:23"),
    "sys.exit(0) at import": (["show", "{d}/module_exit0.py:f"], 1, "sys.exit(0)"),
    "sys.exit(3) at import": (["show", "{d}/module_exit3.py:f"], 1, "sys.exit(3)"),
    "SystemExit at import": (["show", "{d}/module_keyboard.py:f"], 1, "sys.exit('stop here')"),
    "sys.exit in INSPECT args": (["show", "{hostile}:args_exit"], 1, "sys.exit(4)"),
    "sys.exit under check": (["check", "{hostile}:exits_5", "--estimate-only"], 1, "sys.exit(5)"),
    "sys.exit under diff": (["diff", "{hostile}:exits_0", "--ref", "{hostile}:no_reference"], 1, "sys.exit(0)"),
    "sys.exit under export": (["export", "{hostile}:exits_0", "--dot", "{d}/never.dot"], 1, "sys.exit(0)"),
}

MATRIX = {**USAGE, **FAILURES}


@pytest.fixture
def cli(capsys, monkeypatch, bad_dir):
    """Run the CLI in this process; returns (code, stdout, stderr)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")

    def run(*argv: str):
        argv = [a.format(d=bad_dir, funcs=FUNCS, hostile=HOSTILE) for a in argv]
        code = main(argv, isolate=False)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def assert_one_line(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("inspector: "), err
    assert needle in lines[0], err
    assert "Traceback" not in err


# cases that get as far as lowering for a TPU (check defaults to tpu-v5e)
_LOWERS_FOR_TPU = {"sys.exit under check"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.libtpu) if c in _LOWERS_FOR_TPU else c for c in MATRIX],
                         ids=list(MATRIX))
def test_bad_input(cli, case):
    argv, code, needle = MATRIX[case]
    got, out, err = cli(*argv)
    assert got == code, err
    assert_one_line(err, needle)
    assert out == ""  # nothing half-printed


# (kernel, reference, exit code): values and structures diff must judge right
DIFFS = {
    "equal infinities agree": ("inf", "inf", 0),
    "None against None agrees": ("none", "none", 0),
    "None against an array differs": ("none", "ident", 1),
    "complex: the same real part, another imaginary part": ("cplx", "cplx_conj", 1),
    "complex: equal": ("cplx", "cplx", 0),
}


@pytest.mark.parametrize("case", DIFFS)
def test_diff_judges(cli, case):
    kernel, ref, want = DIFFS[case]
    code, out, err = cli("diff", f"{{d}}/diffs.py:{kernel}", "--ref", ref, "--runs", "0")
    assert code == want, out + err
    assert err == ""  # no numpy warning, no error line: the verdict is on stdout
    assert ("FAILED" in out) == (want == 1)


def test_the_matrix_is_big_enough():
    assert len(MATRIX) + len(OUTPUT_FAULTS) + len(PROCESS_FAULTS) + 2 >= 80


# ----------------------------------------------------------------------------- stdout faults, in-process


class _Stdout(io.StringIO):
    def __init__(self, error: Exception | None = None, closed: bool = False):
        super().__init__()
        self.error = error
        if closed:
            self.close()

    def write(self, text):
        if self.error is not None:
            raise self.error
        return super().write(text)

    def isatty(self):
        return False


OUTPUT_FAULTS = {
    "reader went away": (lambda: _Stdout(BrokenPipeError(32, "Broken pipe")), "Broken pipe"),
    "disk full": (lambda: _Stdout(OSError(28, "No space left on device")), "No space left on device"),
    "stdout closed": (lambda: _Stdout(closed=True), "standard output is closed"),
}


@pytest.mark.parametrize("case", OUTPUT_FAULTS)
def test_output_fault(capsys, monkeypatch, case):
    make, needle = OUTPUT_FAULTS[case]
    monkeypatch.setattr(sys, "stdout", make())
    code = main(["chips"], isolate=False)
    assert code == 2
    assert_one_line(capsys.readouterr().err, needle)


def test_debug_after_the_verb_shows_the_traceback(cli):
    code, _, err = cli("show", "missing.py:f", "--debug")
    assert code == 2 and "Traceback" in err and err.strip().endswith("(give path/to/file.py:function)")


@pytest.mark.libtpu
@pytest.mark.parametrize("columns", ["0", "-5", "junk"])
def test_columns_zero_or_junk_means_unset(cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = cli("check", "samples/bugs.py:dropped_tail", "--target", "tpu-v5e", "--estimate-only")
    assert code == 1
    assert "output-not-written" in out and "896" in out  # the findings are printed


def test_narrow_terminal_wraps_never_cuts(cli, monkeypatch):
    """At 40 columns every word of the 140-column table is still there, whole."""
    monkeypatch.setenv("COLUMNS", "140")
    wide = cli("chips")[1]
    monkeypatch.setenv("COLUMNS", "40")
    code, narrow, _ = cli("chips")
    assert code == 0 and "…" not in narrow
    words = lambda text: sorted(w for w in text.split() if not set(w) <= set("─"))  # noqa: E731
    assert words(narrow) == words(wide)


# ----------------------------------------------------------------------------- real processes


def run_cli(*args, env=None, **kw):
    full_env = dict(os.environ, NO_COLOR="1", COLUMNS="100", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True, text=True, cwd=ROOT,
                          env=full_env, timeout=300, **kw)


PROCESS_FAULTS = {
    "stdout closed": (["chips"], {"stdout": None, "preexec": "close1"}, 2, "standard output is closed"),
    "stdout /dev/full": (["show", "{funcs}:matmul"], {"stdout": "/dev/full"}, 2, "No space left on device"),
    "sys.exit(0) in the child": (["show", "{hostile}:exits_0", "--json"], {}, 1, "sys.exit(0)"),
    "os._exit in the child": (["show", "{hostile}:hard_exit"], {}, 1, "exited with code 7"),
    # the child ignores SIGINT (the parent answers Ctrl-C): a KeyboardInterrupt there is the user's own
    "JAX_PLATFORMS a backend not here": (["show", "{funcs}:matmul"], {"env": {"JAX_PLATFORMS": "bogus"}}, 2, "JAX_PLATFORMS=bogus: jax cannot start it"),
    "JAX_PLATFORMS=cuda without a GPU": (["show", "{funcs}:matmul"], {"env": {"JAX_PLATFORMS": "cuda"}}, 2, "JAX_PLATFORMS=cuda: jax cannot start it"),
    "XLA_FLAGS with an unknown flag": (["show", "{funcs}:matmul"], {"env": {"XLA_FLAGS": "--no_such_flag_zz"}, "lines": 2}, 1,
                                       "refuses a flag in XLA_FLAGS"),
    "KeyboardInterrupt while tracing": (["show", "{hostile}:raises_keyboard_interrupt"], {}, 1, "KeyboardInterrupt (raised while tracing"),
    "KeyboardInterrupt at import": (["show", "{d}/module_interrupt.py:f"], {}, 1, "KeyboardInterrupt (raised while importing"),
}


def test_export_writes_through_a_pipe_and_a_link(tmp_path, cli):
    """A pipe (bash's `>(jq .)`) is written in place, never renamed over (as root a rename
    would replace /dev/full itself with a plain file); a link keeps pointing at its file."""
    import threading

    fifo, real, link = tmp_path / "pipe.json", tmp_path / "real.dot", tmp_path / "link.dot"
    os.mkfifo(fifo)
    real.write_text("old")
    link.symlink_to(real)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    code, out, err = cli("export", f"{FUNCS}:matmul", "--json", str(fifo), "--dot", str(link))
    reader.join(timeout=60)
    assert code == 0, err
    assert json.loads(got[0])["target"]["function"] == "matmul"
    assert fifo.is_fifo() and link.is_symlink() and real.read_text().startswith("digraph")
    assert f"wrote {link} " in out


@pytest.mark.parametrize("case", PROCESS_FAULTS)
def test_process_fault(case, bad_dir):
    argv, how, code, needle = PROCESS_FAULTS[case]
    argv = [a.format(funcs=FUNCS, hostile=HOSTILE, d=bad_dir) for a in argv]
    cmd = [sys.executable, "-m", "inspector", *argv]
    env = dict(os.environ, NO_COLOR="1", **how.get("env", {}))
    if how.get("preexec") == "close1":
        proc = subprocess.run(["bash", "-c", 'exec "$@" >&-', "_", *cmd], capture_output=False, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, env=env, timeout=300)
        out = ""
    elif how.get("stdout"):
        with open(how["stdout"], "w") as sink:
            proc = subprocess.run(cmd, stdout=sink, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=300)
        out = ""
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        out = proc.stdout
    assert proc.returncode == code, proc.stderr
    err = proc.stderr
    if how.get("lines") == 2:  # XLA's own fatal line comes first, then ours
        assert "Traceback" not in err and len(err.strip().splitlines()) == 2, err
        err = err.strip().splitlines()[-1]
    assert_one_line(err, needle)
    assert out == ""


def test_export_to_dev_stdout_keeps_stdout_json(tmp_path):
    """`export --json /dev/stdout | jq`: the 'wrote' lines go to stderr, not into the JSON."""
    out = run_cli("export", f"{FUNCS}:matmul", "--json", "/dev/stdout", "--dot", str(tmp_path / "g.dot"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["target"]["function"] == "matmul"
    assert "wrote /dev/stdout" in out.stderr and (tmp_path / "g.dot").exists()


def test_user_prints_go_to_stderr_and_json_stays_json(tmp_path):
    (tmp_path / "chatty.py").write_text("import jax.numpy as jnp\nprint('hello at import')\n"
                                        "def f(x):\n    print('hello while tracing')\n    return x * 2\n")
    out = run_cli("show", f"{tmp_path}/chatty.py:f", "--args", "f32[4]", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["target"]["function"] == "f"
    assert "hello at import" in out.stderr and "hello while tracing" in out.stderr


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the target was never traced"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, code, needle", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_during_a_compile_ends_quietly_at_once(tmp_path, sig, code, needle):
    """Sent to the whole process group, as a terminal's Ctrl-C is; the compile is in C++ for
    seconds (slow_compile), and the inspector must still exit at once, in one line."""
    mark = tmp_path / "traced"
    env = dict(os.environ, NO_COLOR="1", INSPECTOR_TEST_MARK=str(mark), INSPECTOR_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "inspector", "show", f"{HOSTILE}:slow_compile", "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    try:
        _wait_for(mark, proc)
        time.sleep(1.0)  # into the compile (about 20 s of it)
        assert proc.poll() is None
        workers = _children(proc.pid)
        assert workers
        start = time.monotonic()
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
        latency = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert_one_line(err, needle)
    assert out == "" and "SIGTERM received" not in err
    assert latency < 2.0, latency
    time.sleep(0.3)
    assert not [p for p in workers if Path(f"/proc/{p}").exists()]  # the compile died with it
    assert not list((tmp_path / "cache").glob("*"))  # nothing half-stored


def test_killed_compile_then_corrupt_cache_then_rerun(tmp_path):
    """A compile whose process is killed (out of memory, say) is one line; the cache it leaves
    is corrupted by hand; the next runs repair it and then use it."""
    cache = tmp_path / "cache"
    env = {"INSPECTOR_CACHE_DIR": str(cache)}
    first = run_cli("show", f"{FUNCS}:matmul", env=env)
    assert first.returncode == 0 and "(compile from cache)" not in first.stdout

    mark = tmp_path / "traced"
    proc = subprocess.Popen([sys.executable, "-m", "inspector", "show", f"{HOSTILE}:slow_compile"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, INSPECTOR_TEST_MARK=str(mark), **env))
    _wait_for(mark, proc)
    time.sleep(0.5)
    for child in _children(proc.pid):
        os.kill(child, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == ""
    assert_one_line(err, "killed by SIGKILL")

    [entry] = cache.glob("*.json")
    entry.write_text(json.dumps({"schema": 2, "result": {"hlo": 3}}))  # valid JSON, wrong structure
    (cache / "tmpdeadbeef.tmp").write_text("half an entry")
    os.utime(cache / "tmpdeadbeef.tmp", (1, 1))
    second = run_cli("show", f"{FUNCS}:matmul", env=env)
    assert second.returncode == 0, second.stderr
    assert "(compile from cache)" not in second.stdout and second.stderr == ""
    third = run_cli("show", f"{FUNCS}:matmul", env=env)
    assert "(compile from cache)" in third.stdout
    assert sorted(p.name for p in cache.iterdir()) == [entry.name]  # repaired, no temporary files


# ----------------------------------------------------------------------------- cache entries that are not files

_GOOD_ENTRY = {"hlo": "HloModule m\n\nENTRY %main (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n", "cost": {"flops": 4.0}, "memory": {"temp_size_in_bytes": 0}, "error": None}
NOT_A_FILE = {
    "a pipe": lambda p: os.mkfifo(p),
    "a link to /dev/zero": lambda p: p.symlink_to("/dev/zero"),
    "a link to a missing file": lambda p: p.symlink_to(p.parent / "gone.json"),
}


@pytest.mark.parametrize("what", NOT_A_FILE)
def test_a_cache_entry_that_is_not_a_file_is_a_miss_then_replaced(tmp_path, monkeypatch, what):
    """A pipe would block the read forever and /dev/zero never ends; the store replaces the
    thing itself (never writes through it) with a regular entry."""
    import threading

    from inspector.compilation import compile_cache

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    key = "3" * 64
    entry = tmp_path / f"{key}.json"
    NOT_A_FILE[what](entry)
    got = []
    reader = threading.Thread(target=lambda: got.append(compile_cache.load(key)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert got == [None], "the read hung or served it"
    assert compile_cache.store(key, _GOOD_ENTRY) is True
    assert entry.is_file() and not entry.is_symlink()
    assert compile_cache.load(key) == _GOOD_ENTRY
    assert not list(tmp_path.glob("*.tmp"))


# ----------------------------------------------------------------------------- the Python API


def _exits(x):
    sys.exit(4)


def _ident(x):
    return x


API_CASES = {
    "sys.exit while tracing": (lambda api: api.inspect(_exits, "f32[4]"), "TargetFailure", "sys.exit(4)"),
    "sys.exit under diff": (lambda api: api.diff(_exits, _ident, "f32[4]"), "TargetFailure", "sys.exit(4)"),
    "an array of Python objects": (lambda api: api.inspect(_ident, __import__("numpy").array([object()])), "UsageError",
                                    "array of Python objects"),
    "report.show of no such view": (lambda api: api.inspect(_ident, "f32[4]").show("nope"), "UsageError", "no view 'nope'"),
}


@pytest.mark.parametrize("case", API_CASES)
def test_api_bad_input_is_one_inspector_error(case):
    """A script or notebook must get an InspectorError, never a SystemExit that ends it."""
    import inspector

    call, kind, needle = API_CASES[case]
    with pytest.raises(inspector.InspectorError) as caught:
        call(inspector)
    assert type(caught.value).__name__ == kind and needle in str(caught.value)
    assert "\n" not in str(caught.value)
