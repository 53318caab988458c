"""`inspector tune` under bad input (`tune --table`, its chips, signals; also the TUI's keys and a
few CLI messages), as issue 48's audit found it: each defect and each "acceptable" item it fixes, as a test that fails without its fix.
Only the v4 row test compiles for a TPU; the others stop before any compile (or fake the sweep).
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT, loaded

from inspector.base.errors import UsageError
from inspector.tuning.model import NOT_RUN, RANKED, TuneResult, TuneRow
from inspector.tuning.rank import rank_all

TUNE = "tests/data/tune_kernels.py:mm"
SMALL = "bf16[256,512] bf16[512,256]"


def one_line(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("inspector: ") and needle in lines[0], err
    assert "Traceback" not in err


def _capped():  # a sweep that reads /dev/zero whole dies of MemoryError here, not of the machine's OOM killer
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _tune(*args, stdout=subprocess.PIPE, tmp_path: Path, timeout: float = 60, env=None):
    full = dict(os.environ, NO_COLOR="1", COLUMNS="120", INSPECTOR_CACHE_DIR=str(tmp_path / "cache"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "inspector", "tune", TUNE, *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, env=full, timeout=timeout, preexec_fn=_capped)


# ----------------------------------------------------------------------------- defect 1: --table read whole


@pytest.mark.parametrize("kind", ["/dev/zero", "/dev/full", "fifo", "huge"])
def test_a_table_that_is_no_regular_file_is_refused_before_a_byte_is_read(tmp_path, kind):
    """`--table /dev/full` grew the process to 24 GB; /dev/zero was `internal error: MemoryError`;
    a FIFO (nobody writing) hung in open(). Now one line, exit 2, before the sweep."""
    if kind == "fifo":
        path = str(tmp_path / "table.json")
        os.mkfifo(path)
    elif kind == "huge":
        path = str(tmp_path / "table.json")
        with open(path, "wb") as f:
            f.truncate(200 << 20)  # sparse: no disk used
    else:
        path = kind
    done = _tune("--table", path, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    one_line(done.stderr, f"--table {path} is ")
    assert ("more than the 64 MiB" if kind == "huge" else "not a regular file") in done.stderr
    assert not (tmp_path / "cache").exists()  # refused before the sweep: nothing planned, nothing cached


def test_a_table_that_is_our_own_stdout_pipe_is_refused_not_read(tmp_path):
    """`inspector tune ... --table /dev/stdout | cat` read its own pipe and hung for good."""
    done = _tune("--table", "/dev/stdout", tmp_path=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    one_line(done.stderr, "--table /dev/stdout is this command's own output: give the table a file name")


# ----------------------------------------------------------------------------- defect 2: a rename over stdout


def test_a_table_that_is_our_own_stdout_file_is_refused_and_the_file_kept(tmp_path):
    """`--table /dev/stdout > out.txt` renamed a temporary file over out.txt: the tables printed
    after it went to the deleted file, exit 0."""
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        inode = os.fstat(f.fileno()).st_ino
        done = _tune("--args", SMALL, "--grid", "bm=96", "--set", "bn=256", "--set", "bk=512", "--set", "pad_mib=0",
                     "--table", "/dev/stdout", stdout=f, tmp_path=tmp_path, timeout=600)
    assert done.returncode == 2
    one_line(done.stderr, "--table /dev/stdout is this command's own output")
    assert out.stat().st_ino == inode and out.read_text() == ""


def test_a_file_written_through_our_own_stdout_keeps_what_is_printed_around_it(tmp_path):
    """The same rename in every writer (`export --json /dev/stdout > out.json`): now written
    through the descriptor, where what was printed before ends."""
    out = tmp_path / "out.txt"
    code = ("from inspector.base.atomic import write_atomic\n"
            "print('before', flush=True)\nwrite_atomic('/dev/stdout', 'written\\n')\nprint('after')\n")
    with open(out, "w") as f:
        inode = os.fstat(f.fileno()).st_ino
        subprocess.run([sys.executable, "-c", code], stdout=f, check=True, cwd=ROOT, timeout=60)
    assert out.stat().st_ino == inode and out.read_text() == "before\nwritten\nafter\n"


# ----------------------------------------------------------------------------- a read-only table, as root too


def test_a_read_only_table_is_refused_whoever_runs_it(tmp_path):
    """README: a read-only --table is refused. As root (access() says yes to everything) a 0444
    table was overwritten. The mode says read-only to root too."""
    from inspector.tuning.table import check_table

    path = tmp_path / "t.json"
    path.write_text('{"schema": 1, "kernel": null, "entries": {}}')
    path.chmod(0o444)
    try:
        with pytest.raises(UsageError, match="the file is read-only"):
            check_table(str(path), TUNE)
    finally:
        path.chmod(0o644)


# ----------------------------------------------------------------------------- defect 3: tpu-v4


def test_tune_on_a_chip_libtpu_does_not_simulate_is_one_line_before_the_sweep(cli, monkeypatch):
    """`tune --target tpu-v4` compiled every candidate, then said on every row "libtpu gave no time
    for it within the budget ... raise --time-budget" (exit 1, with any budget)."""
    import inspector.tuning.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    code, out, err = cli("tune", TUNE, "--target", "tpu-v5e,tpu-v4")
    assert code == 2 and out == ""
    one_line(err, "libtpu does not simulate tpu-v4 (its static profile aborts: 'Dma latency model is currently only supported "
                  "on VF/VL/GF/GL'): give tpu-v5e")
    with pytest.raises(UsageError, match="does not simulate tpu-v4"):
        sweep_mod.check_chips(["v4"])
    sweep_mod.check_chips(["tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x"])  # the chips it does simulate


@pytest.mark.libtpu
def test_a_row_libtpu_aborted_says_so_not_to_raise_the_budget(tmp_path, monkeypatch):
    """What a sweep's row says when libtpu's simulation aborts (v4, reached past check_chips): the
    reason libtpu gave, never "raise --time-budget", which could not help."""
    from inspector.tuning.evaluate import evaluate_task

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    row = evaluate_task({"spec": str(DATA / "tune_kernels.py") + ":mm", "args": SMALL,
                         "params": {"bm": 128, "bn": 256, "bk": 512, "pad_mib": 0}, "swept": {"bm": 128},
                         "shape": SMALL, "chip": "tpu-v4", "default": False, "budget": {"seconds": 60}, "cache": False})
    assert row["status"] == "untimed", row
    assert "libtpu's simulation aborted on tpu-v4 (" in row["reason"] and "Dma latency model" in row["reason"]
    assert "--time-budget" not in row["reason"]


# ----------------------------------------------------------------------------- Ctrl-C, SIGHUP


def test_an_interrupted_sweep_says_so_on_stderr_and_keeps_the_tables_on_stdout(capsys):
    """Ctrl-C mid-sweep exited 130 with an empty stderr: the "interrupted: 1 of 2 done" line was
    in stdout, among the tables (or after a --json document)."""
    from types import SimpleNamespace

    from inspector.commands.tune import render_tune

    base = dict(shape="f32[8]", chip="tpu-v5e")
    rows = [TuneRow(**base, params={"bm": 1}, status=RANKED, estimated_seconds=1e-6, default=True),
            TuneRow(**base, params={"bm": 2}, status=NOT_RUN, reason="the sweep was interrupted before it")]
    counts = {"total": 2, "cached": 0, "done": 1, RANKED: 1, NOT_RUN: 1}
    result = TuneResult(target="k.py:mm", swept=["bm"], fixed={}, defaults={"bm": 1}, shapes=rank_all(["f32[8]"], ["tpu-v5e"], rows), counts=counts, interrupted=True)
    for json_out in (False, True):
        assert render_tune(SimpleNamespace(json=json_out, top=0), result) == 130
        out, err = capsys.readouterr()
        assert "interrupted: " not in out and ("tpu-v5e best" in out or json_out)
        one_line(err, "interrupted: 1 of 2 done; run the same command again to resume")


def test_sighup_mid_sweep_ends_as_sigterm_does_leaving_no_folder(tmp_path):
    """A closed terminal (SIGHUP) killed the sweep without its cleanup: libtpu's log folder stayed
    until the next run. Now it is answered as SIGTERM is: one line, 129, nothing left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, NO_COLOR="1", TMPDIR=str(tmp), INSPECTOR_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "inspector", "tune", TUNE, "--args", SMALL, "--no-cache",
                             "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(p.name.startswith("inspector-libtpu-") for p in tmp.iterdir()):  # a worker is compiling
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 129, err
    one_line(err, "terminated (SIGHUP)")
    # the dump folders' janitors run when their worker is gone: a fixed pause of 1 s was too short in a
    # serial run under coverage
    deadline = time.monotonic() + 30
    while (left := [p.name for p in tmp.iterdir() if p.name.startswith("inspector-")]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []


# ----------------------------------------------------------------------------- the acceptable items


def test_an_inspect_params_value_that_is_not_a_list_is_one_line(tmp_path):
    """`"params": {"br": 8}` was taken as [8] without a word."""
    from inspector.compilation.target import load_target

    path = tmp_path / "k.py"
    path.write_text("def f(x, br=4):\n    return x\n\nINSPECT = {'f': {'args': 'f32[8]', 'params': {'br': 8}}}\n")
    with pytest.raises(UsageError, match=r"INSPECT\['f'\]\[\"params\"\]\['br'\] is 8: give a list of the values "
                                         r"to try, the first the default, e.g. \[8\]"):
        load_target(f"{path}:f")


def test_more_workers_than_candidates_is_no_note_about_memory(monkeypatch, tmp_path):
    """`--workers 99999` on a 2-candidate sweep said "22 started" (what memory would hold) when
    2 started; the summary says the 2, and a memory note comes only when memory held fewer."""
    import inspector.tuning.sweep as sweep_mod
    from inspector.tuning.candidates import TunePlan
    from inspector.tuning.pool import LocalPool
    from inspector.views.tune import summary

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sweep_mod, "_available_bytes", lambda: 22 * (1 << 30) + 5)
    plan = TunePlan(spec="k.py:mm", choices={"bm": [1, 2]}, defaults={"bm": 1}, takes=["x", "bm"], shapes=[("f32[8]", None)])
    monkeypatch.setattr(sweep_mod, "_plan", lambda req, local, budget: plan)
    monkeypatch.setattr(LocalPool, "run", lambda self, jobs, on_answer, on_died: None)
    result = sweep_mod.run_sweep(sweep_mod.SweepRequest(spec="k.py:mm", chips=["tpu-v5e"], workers=99999, cache=False))
    assert result.notes == [] and result.workers == 2
    assert "on 2 workers" in summary(result).plain and "22" not in summary(result).plain


def test_a_time_budget_below_what_a_compile_is_given_is_refused(cli, monkeypatch):
    """`--time-budget 0.001` ran, then said the simulation passed its time limit "after 1 s"."""
    import inspector.tuning.sweep as sweep_mod
    from inspector.libtpu import Budget

    monkeypatch.setattr(sweep_mod, "run_sweep", lambda *a, **k: pytest.fail("the sweep started"))
    code, out, err = cli("tune", TUNE, "--time-budget", "0.001")
    assert code == 2
    one_line(err, "--time-budget 0.001: give the seconds libtpu's simulation may take, 1 or more")
    code, out, err = cli("show", f"{DATA}/funcs.py:matmul", "--time", "--time-budget", "0.5")
    assert code == 2 and out == ""
    one_line(err, "--time-budget 0.5: give")
    with pytest.raises(UsageError, match="Budget"):
        Budget(seconds=0.5)
    Budget(seconds=1)


def test_non_utf8_bytes_are_echoed_as_bytes_not_surrogates(cli):
    """A non-UTF-8 argument was echoed '\\udcff' (Python's surrogate for the byte), a character
    nobody typed; now \\xff, the byte."""
    bad = os.fsdecode(b"bm=\xff")
    code, out, err = cli("tune", TUNE, "--grid", bad)
    assert code == 2 and "udc" not in err
    one_line(err, "--grid bm=\\xff")
    code, out, err = cli("show", f"{DATA}/funcs.py:matmul", "--view", os.fsdecode(b"\xfe"))
    assert code == 2 and "udc" not in err and "'\\xfe'" in err


def test_a_mosaic_pass_asked_where_mosaic_never_runs_is_one_line(cli):
    """`show --view mosaic --pass NAME` on a function without a Pallas kernel printed the view and
    exited 0: the pass asked for was silently dropped."""
    code, out, err = cli("show", f"{DATA}/funcs.py:matmul", "--view", "mosaic", "--pass", "canonicalize")
    assert code == 2 and out == ""
    one_line(err, "--pass canonicalize does not apply: Mosaic runs only when lowering for a TPU: add --target tpu-v5e")


@pytest.mark.libtpu
def test_a_mosaic_pass_asked_of_a_function_without_pallas_on_a_tpu_is_one_line(cli):
    code, out, err = cli("show", f"{DATA}/funcs.py:matmul", "--target", "tpu-v5e", "--view", "mosaic",
                         "--pass", "canonicalize")
    assert code == 2 and out == ""
    one_line(err, "--pass canonicalize does not apply: the function has no Pallas kernel, so Mosaic never runs")


# ----------------------------------------------------------------------------- the terminal UI's keys


@pytest.mark.asyncio
async def test_ctrl_c_quits_the_main_screen_and_q_closes_the_tune_screen(monkeypatch):
    """ctrl+c on the main screen only flashed a hint (ctrl+q quits); q on the tune screen typed a
    q into its first field (the chips: the sweep then refused "q")."""
    from inspector.session import Session
    from inspector.views.tui.app import InspectorApp
    from inspector.views.tui.tune_screen import TuneScreen
    from test_tui_tune import FakeSweep

    fake = FakeSweep()
    monkeypatch.setattr("inspector.tuning.sweep.run_sweep", fake)

    app = InspectorApp(Session(f"{DATA}/tune_kernels.py:mm", "cpu", args=SMALL))
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TuneScreen) and app.focused is None
        assert "q or Esc closes" in str(screen.query_one("#tune-hint").render())
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen) and app.is_running
        await pilot.press("u")  # Enter runs the sweep with no field focused
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        deadline = time.monotonic() + 30
        while app.screen.result is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert fake.requests and fake.requests[0].chips == ["tpu-v5e"]
        await pilot.press("q")  # the ranked table: q closes too
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
