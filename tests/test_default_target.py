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


@pytest.mark.parametrize("attached", [None, "tpu-v6e"])
def test_every_verb_takes_the_one_rule(monkeypatch, attached):
    import inspector.compilation.default_target as default_target
    from inspector.base.chips import DEFAULT_TPU, get_chip
    from inspector.commands.parser import build_parser, chosen_chip, normalise

    monkeypatch.setattr(default_target, "attached_chip", lambda: get_chip(attached) if attached else None)
    for argv, off_tpu in (([TARGET], "cpu"), (["show", TARGET], "cpu"), (["diff", TARGET], "cpu"),
                          (["export", TARGET, "--svg", "x.svg"], "cpu"), (["compare", TARGET, "samples/matmul.py:xla"], "cpu"),
                          (["check", TARGET], DEFAULT_TPU), (["tune", TARGET], DEFAULT_TPU)):
        opts = build_parser().parse_args(normalise(argv))
        chosen_chip(opts)
        assert (opts.chip, opts.chip_reason.startswith("no --target")) == (attached or off_tpu, True), argv
    named = build_parser().parse_args(["show", TARGET, "--target", "tpu-v4"])
    chosen_chip(named)
    assert (named.chip, named.chip_reason) == ("tpu-v4", None)


def test_the_overview_json_and_doctor_name_the_rule(cli):
    import json

    from inspector.commands.doctor import _default_target
    from inspector.compilation.default_target import RULE

    code, out, err = cli("show", "samples/attention.py:naive", "--args", "f32[1,64,32] f32[1,64,32] f32[1,64,32]", "--json")
    chip = json.loads(out)["chip"]
    assert chip["name"] == "cpu" and chip["chosen"] == "no --target and no TPU here"
    code, out, err = cli("show", "samples/attention.py:naive", "--args", "f32[1,64,32] f32[1,64,32] f32[1,64,32]",
                         "--json", "--target", "cpu")
    assert "chosen" not in json.loads(out)["chip"]
    assert RULE in _default_target().detail and "pipe" in _default_target().detail
    assert RULE in (ROOT / "docs" / "cli.md").read_text()
