"""One default target for every verb, in a terminal and in a pipe (issue 56: `inspector
samples/matmul.py:tiled | cat` compiled for the CPU, the same command in a terminal for tpu-v5e):
compilation/default_target.py's rule, named by the overview, doctor and docs/cli.md."""
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

from conftest import ROOT

TARGET = "samples/matmul.py:tiled"  # a file with Pallas TPU kernels: the UI once chose tpu-v5e for it
ROW = re.compile(r"target\s+(\S+): [^\n]*?\((no --target[^)]*)\)")


def _in_a_terminal(argv: list[str], env: dict) -> str:
    """What `inspector ARGV` shows on a terminal (a pty) until its overview has the XLA cost; then q."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 220, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "inspector", *argv], stdin=slave, stdout=slave, stderr=slave,
                            cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    seen, start = b"", time.monotonic()
    try:
        while time.monotonic() - start < 300 and b"XLA cost" not in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen):
            if select.select([master], [], [], 0.5)[0]:
                try:
                    seen += os.read(master, 1 << 16)
                except OSError:
                    break
        os.write(master, b"q")
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return re.sub(r"[│\s]+", " ", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", " ", seen.decode(errors="replace")))


def test_the_ui_in_a_terminal_and_the_overview_in_a_pipe_compile_for_the_same_chip(run_cli, tmp_path):
    env = dict(os.environ, TERM="xterm-256color", INSPECTOR_CACHE_DIR=str(tmp_path), NO_COLOR="1")
    piped = run_cli(TARGET, env={"INSPECTOR_CACHE_DIR": str(tmp_path)})
    assert piped.returncode == 0, piped.stderr
    in_pipe = ROW.search(re.sub(r"[│\s]+", " ", piped.stdout).replace(" target ", "\ntarget "))
    in_terminal = ROW.search(_in_a_terminal([TARGET], env).replace(" target ", "\ntarget "))
    assert in_pipe and in_terminal, piped.stdout
    assert in_terminal.groups() == in_pipe.groups()


def _chosen(argv: list[str]) -> tuple[str, str]:
    from inspector.commands.parser import build_parser, chosen_chip, normalise

    opts = build_parser().parse_args(normalise(argv))
    chosen_chip(opts)
    return opts.chip, opts.chip_reason


VERBS = ([TARGET], ["show", TARGET], ["diff", TARGET], ["export", TARGET, "--svg", "x.svg"],
         ["compare", TARGET, "samples/matmul.py:xla"], ["check", TARGET], ["fix", TARGET], ["tune", TARGET])


@pytest.mark.parametrize("attached, project, show, check", [
    (None, None, "tpu-v5e", "tpu-v5e"),  # a new user's machine: the TPU compile, never the interpreter's HLO
    (None, "cpu", "cpu", "tpu-v5e"),  # a project that wants the CPU; check, fix and tune stay on TPUs
    (None, "tpu-v6e", "tpu-v6e", "tpu-v6e"),
    ("tpu-v6e", "cpu", "tpu-v6e", "tpu-v6e"),  # the attached TPU first
])
def test_every_verb_takes_the_one_rule(monkeypatch, attached, project, show, check):
    import inspector.compilation.default_target as default_target
    from inspector.base.chips import get_chip

    monkeypatch.setattr(default_target, "attached_chip", lambda: get_chip(attached) if attached else None)
    monkeypatch.delenv("INSPECTOR_TARGET", raising=False)
    if project:
        monkeypatch.setenv("INSPECTOR_TARGET", project)
    for argv in VERBS:
        chip, why = _chosen(argv)
        assert chip == (check if argv[0] in ("check", "fix", "tune") else show) and why.startswith("no --target"), argv
    assert _chosen(["show", TARGET, "--target", "tpu-v4"]) == ("tpu-v4", None)


def test_the_nearest_pyproject_sets_the_project_default(monkeypatch, tmp_path):
    import inspector.compilation.default_target as default_target
    from inspector.base.errors import UsageError

    monkeypatch.setattr(default_target, "attached_chip", lambda: None)
    monkeypatch.delenv("INSPECTOR_TARGET", raising=False)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "k"\n\n[tool.inspector]\ntarget = "tpu-v6e"\n')
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    chip, why = _chosen(["show", TARGET])
    assert chip == "tpu-v6e" and f"[tool.inspector] target in {tmp_path / 'pyproject.toml'}" in why
    monkeypatch.setenv("INSPECTOR_TARGET", "tpu-v4")  # the environment before the file
    assert _chosen(["show", TARGET])[0] == "tpu-v4"
    monkeypatch.setenv("INSPECTOR_TARGET", "tpu-v99")
    with pytest.raises(UsageError, match=r"\$INSPECTOR_TARGET = 'tpu-v99': unknown target"):
        _chosen(["show", TARGET])
    monkeypatch.delenv("INSPECTOR_TARGET")
    (tmp_path / "pyproject.toml").write_text("[tool.inspector]\ntarget = 5\n")
    with pytest.raises(UsageError, match="is 5: give one chip name"):
        _chosen(["show", TARGET])
    (tmp_path / "pyproject.toml").write_text("[tool.inspector\n")
    with pytest.raises(UsageError, match="cannot read .*pyproject.toml"):
        _chosen(["show", TARGET])
    (tmp_path / "pyproject.toml").write_text('[tool.other]\nx = 1\n')  # the nearest says nothing: tpu-v5e
    assert _chosen(["show", TARGET])[0] == "tpu-v5e"


@pytest.mark.libtpu
def test_a_new_users_first_command_shows_the_tpu_kernel(run_cli, tmp_path):
    """The README's first command, in a pipe, on a machine with no TPU and no project default: the
    kernel compiled for tpu-v5e, not the Pallas interpreter's io_callbacks."""
    env = {k: v for k, v in os.environ.items() if k != "INSPECTOR_TARGET"}
    done = subprocess.run([sys.executable, "-m", "inspector", TARGET, "--set", "bm=512"], capture_output=True, text=True,
                          cwd=ROOT, env=dict(env, NO_COLOR="1", COLUMNS="200"), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "on tpu-v5e" in done.stdout and "no --target and no TPU here: tpu-v5e, the default" in done.stdout
    assert "io_callback" not in done.stdout and "pallas-interpreted" not in done.stdout


def test_the_overview_json_and_doctor_name_the_rule(cli):
    import json

    from inspector.commands.doctor import _default_target
    from inspector.compilation.default_target import RULE

    code, out, err = cli("show", "samples/attention.py:naive", "--args", "f32[1,64,32] f32[1,64,32] f32[1,64,32]", "--json")
    chip = json.loads(out)["chip"]
    assert chip["name"] == "cpu" and chip["chosen"] == "no --target: $INSPECTOR_TARGET"  # the suite's project default
    code, out, err = cli("show", "samples/attention.py:naive", "--args", "f32[1,64,32] f32[1,64,32] f32[1,64,32]",
                         "--json", "--target", "cpu")
    assert "chosen" not in json.loads(out)["chip"]
    assert RULE in _default_target().detail and "pipe" in _default_target().detail
    assert RULE in (ROOT / "docs" / "cli.md").read_text()


def test_the_api_names_the_rule_as_show_json_does(monkeypatch):
    """README: `report.to_dict()` is `show --json`; with no target the CLI's says which rule chose the
    chip and the API's said nothing (its docstring still said the default was the CPU)."""
    import inspector

    monkeypatch.setenv("INSPECTOR_TARGET", "cpu")
    report = inspector.inspect("samples/attention.py:naive", "f32[1,64,32] f32[1,64,32] f32[1,64,32]")
    assert report.chip.name == "cpu" and report.to_dict()["chip"]["chosen"] == "no --target: $INSPECTOR_TARGET"
    named = inspector.inspect("samples/attention.py:naive", "f32[1,64,32] f32[1,64,32] f32[1,64,32]", target="cpu")
    assert "chosen" not in named.to_dict()["chip"]
    assert "else ``cpu``" not in inspector.inspect.__doc__ and "else `cpu`" not in (ROOT / "docs" / "api.md").read_text()
