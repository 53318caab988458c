"""The terminal UI's tune screen (u; ctrl+t on the parameter screen): the form builds the sweep,
the sweep runs in a worker with its progress, Esc stops it (the workers are killed, nothing is
half-written), the ranked table shows each candidate's time per chip (a failure its reason), and
Enter on a row analyses the target again with that row's parameters. The screen's own tests fake
the sweep (a real one compiles for minutes); the pool's cancel is tested on real worker processes,
and one TPU test runs a real sweep of 4 candidates in the UI."""
import glob
import json
import os
import threading
import time

import pytest
from textual.widgets import DataTable, Input

from conftest import DATA, loaded
from inspector.base.errors import UsageError
from inspector.session import Session
from inspector.base.units import fmt_time
from inspector.tuning.model import NOT_RUN, PRUNED, RANKED, REFUSED, TuneResult, TuneRow
from inspector.tuning.rank import rank_all
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.screens import ParamsScreen
from inspector.views.tui.tune_form import TuneForm, sweep_request
from inspector.views.tui.tune_screen import TuneScreen
from inspector.views.tui.tune_table import candidates_by_rank, top_rows
from test_tui import plain, status

SPEC = f"{DATA}/tune_kernels.py:mm"
SMALL = "bf16[256,512] bf16[512,256]"
MM = Session(SPEC, "cpu", args=SMALL)  # interpreted on the CPU: the UI's own load is quick
REFUSAL = "Mosaic refused the kernel: the last dim of a block must be a multiple of 128 (tune_kernels.py:30)"
FORM = TuneForm(SPEC, "mm", {"bm": 256, "bn": 256, "bk": 512, "pad_mib": 0},
                {"bm": [256, 128], "bn": [256, 64], "bk": [512], "pad_mib": [0, 40]})


def test_the_form_builds_the_sweep_and_refuses_what_cannot_run():
    values = {"bm": "256, 128", "bn": "256", "bk": "512", "pad_mib": ""}
    request, problems = sweep_request(FORM, MM.with_params({"bk": "512"}), "tpu-v5e, tpu-v6e", values)
    assert problems == [] and request.chips == ["tpu-v5e", "tpu-v6e"] and request.args == [SMALL]
    assert request.grid == {"bm": [256, 128], "bn": [256], "bk": [512]}
    assert request.fixed == {"pad_mib": 0}  # INSPECT's list emptied: it stays at its current value
    _, problems = sweep_request(FORM, MM, "cpu", values)
    assert len(problems) == 1 and "give TPU targets" in problems[0]
    _, problems = sweep_request(FORM, MM, "tpu-v5e", {**values, "bm": "256, big"})
    assert problems == ["bm: big is not an int (like 256)"]
    _, problems = sweep_request(FORM, MM, "", {name: "" for name in values})
    assert any("chips:" in p for p in problems) and any("nothing to sweep" in p for p in problems)


def _result(interrupted: bool = False, spec: str = SPEC) -> TuneResult:
    """What a sweep of bm x bn on two chips finds: two ranked (the order differs per chip), one
    refused by Mosaic, one pruned by the VMEM estimate."""
    rows = []
    times = {"tpu-v5e": {(128, 256): 2e-6, (256, 256): 3e-6}, "tpu-v6e": {(128, 256): 2e-6, (256, 256): 1e-6}}
    for chip in ("tpu-v5e", "tpu-v6e"):
        for bm, bn in ((256, 256), (128, 256), (256, 64), (128, 64)):
            base = dict(shape=SMALL, chip=chip, params={"bm": bm, "bn": bn}, default=(bm, bn) == (256, 256))
            if interrupted and (bm, bn) != (256, 256):
                rows.append(TuneRow(**base, status=NOT_RUN, reason="the sweep was interrupted before it"))
            elif bn == 64 and bm == 256:
                rows.append(TuneRow(**base, status=REFUSED, reason=REFUSAL, code="mosaic-layout"))
            elif bn == 64:
                rows.append(TuneRow(**base, status=PRUNED, reason="VMEM estimate 40 MiB over the 16 MiB limit",
                                    code="vmem-over-limit"))
            else:
                t = times[chip][(bm, bn)]
                rows.append(TuneRow(**base, status=RANKED, estimated_seconds=t, estimated_cycles=t * 1e9,
                                    estimate_source="libtpu", vmem_bytes=2 << 20, vmem_limit_bytes=16 << 20,
                                    hbm_bytes=1 << 20, bound="MXU", spills=0))
    counts = {"total": len(rows), "cached": 0, "done": len(rows)}
    counts.update({s: sum(r.status == s for r in rows) for s in (RANKED, REFUSED, PRUNED, NOT_RUN)})
    return TuneResult(target=spec, swept=["bm", "bn"], fixed={"bk": 512, "pad_mib": 0}, defaults={"bm": 256, "bn": 256},
                      shapes=rank_all([SMALL], ["tpu-v5e", "tpu-v6e"], rows), counts=counts, interrupted=interrupted, wall_seconds=1.0, workers=2, runner="local")


class FakeSweep:
    """Stands in for inspector.tuning.sweep.run_sweep: notes the request, reports progress, and
    (``hold``) waits for the cancel event before answering, as a sweep that is still compiling."""

    def __init__(self, hold: bool = False):
        self.requests, self.hold, self.cancelled = [], hold, False

    def __call__(self, request, progress, cancel=None):
        self.requests.append(request)
        progress.start(8, 0, 2, "local")
        result = _result(interrupted=self.hold, spec=request.spec)
        for row in result.rows[:2]:
            progress.advance(row)
        if self.hold:
            self.cancelled = cancel.wait(60)
        progress.stop()
        return result


async def _until(condition, pilot, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert condition()


def _table_rows(screen) -> list[list[str]]:
    table = screen.query_one("#tune-table", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.asyncio
async def test_tune_ranks_per_chip_shows_each_failure_and_enter_applies_the_row(monkeypatch, tmp_path):
    from inspector.tuning.table import lookup

    fake = FakeSweep()
    monkeypatch.setattr("inspector.tuning.sweep.run_sweep", fake)
    monkeypatch.chdir(tmp_path)

    app = InspectorApp(MM)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TuneScreen)
        assert screen.query_one("#tune-chips").value == "tpu-v5e"  # the UI is on the CPU: the default TPU
        assert screen.query_one("#tune-param-bm").value == "256, 128"  # INSPECT's list
        assert "8 candidates x 1 chip" in plain(screen, "#tune-count")
        screen.query_one("#tune-chips").value = "tpu-v5e,tpu-v6e"
        screen.query_one("#tune-param-pad_mib").value = "0"
        await pilot.press("enter")
        await _until(lambda: screen.result is not None, pilot)
        (request,) = fake.requests
        assert request.spec == SPEC and request.chips == ["tpu-v5e", "tpu-v6e"] and request.args == [SMALL]
        assert request.grid == {"bm": [256, 128], "bn": [256, 64], "bk": [512], "pad_mib": [0]}
        rows = _table_rows(screen)
        # ranked by v5e: bm=128 first; each chip's time; a bar; the failures with their reasons
        assert [r[:3] for r in rows] == [["1", "128", "256"], ["2", "256", "256"], ["-", "256", "64"], ["-", "128", "64"]]
        assert rows[0][3:6] == [fmt_time(2e-6), fmt_time(2e-6), "1.00x"]
        assert rows[1][3:6] == [fmt_time(3e-6), fmt_time(1e-6), "1.50x"]
        assert rows[1][6] == "█" * 20 and rows[0][6] == "█" * 13  # against the slowest ranked
        assert rows[2][3] == "refused" and "Mosaic refused the kernel" in rows[2][7]
        assert rows[3][3] == "pruned" and "VMEM estimate" in rows[3][7]
        assert "tpu-v5e best: --set bm=128 --set bn=256" in plain(screen, "#tune-problem")
        table = screen.query_one("#tune-table", DataTable)
        table.move_cursor(row=2)
        await pilot.pause()
        detail = plain(screen, "#tune-detail")
        assert " ".join(REFUSAL.split()) in " ".join(detail.split())  # the whole reason, per chip
        assert "tpu-v5e, tpu-v6e: refused" in detail  # one reason, said once for both chips
        await pilot.press("s")  # ranked by v6e now: bm=256 first
        assert [r[:3] for r in _table_rows(screen)][:2] == [["1", "256", "256"], ["2", "128", "256"]]
        assert "ranked by tpu-v6e" in plain(screen, "#tune-head")
        await pilot.press("w")  # the tuning table, in the current folder
        await pilot.pause()
        written = tmp_path / "tune_kernels_mm_tuning.json"
        assert lookup(str(written), SMALL, "tpu-v6e") == {"bk": 512, "pad_mib": 0, "bm": 256, "bn": 256}
        assert lookup(str(written), SMALL, "TPU v5 lite") == {"bk": 512, "pad_mib": 0, "bm": 128, "bn": 256}
        await pilot.press("s")
        table.move_cursor(row=0)  # v5e's best: bm=128
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen)
        await loaded(pilot)
        assert app.session.sets[-2:] == ["bm=128", "bn=256"]
        assert app.report.target.params["bm"] == 128 and app.report.pallas[0].call.grid == [2, 1, 1]


@pytest.mark.asyncio
async def test_esc_stops_the_sweep_and_the_partial_table_is_not_written(monkeypatch, tmp_path):
    fake = FakeSweep(hold=True)
    monkeypatch.setattr("inspector.tuning.sweep.run_sweep", fake)
    monkeypatch.chdir(tmp_path)

    app = InspectorApp(Session(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tune_kernels.py:mm"),
                               "cpu", args=SMALL))
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        screen = app.screen
        await pilot.press("enter")
        await _until(lambda: "2 of 8 done" in plain(screen, "#tune-progress-line"), pilot)
        assert screen.running and "Esc or ctrl+c stops" in plain(screen, "#tune-hint")
        await pilot.press("escape")
        await _until(lambda: screen.result is not None, pilot)
        assert fake.cancelled and app.screen is screen  # stopped, still open: what is done shows
        assert screen.result.interrupted and "interrupted" in plain(screen, "#tune-problem")
        assert [r[3] for r in _table_rows(screen)].count("not-run") == 3
        await pilot.press("w")  # a tuning table holds whole sweeps only
        await pilot.pause()
        assert not glob.glob(str(tmp_path / "*"))
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen)


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_snapshot_of_the_ranked_table(snap_compare, monkeypatch, size):
    monkeypatch.setattr("inspector.tuning.sweep.run_sweep", FakeSweep())
    app = InspectorApp(Session("tests/data/tune_kernels.py:mm", "cpu", args=SMALL))
    app.clock = lambda: 0.0

    async def before(pilot):
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        app.screen.query_one("#tune-chips").value = "tpu-v5e,tpu-v6e"
        await pilot.press("enter")
        await _until(lambda: app.screen.result is not None, pilot)
        await pilot.press("down", "down")  # the refused candidate: its reason below
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.asyncio
async def test_a_sweep_that_cannot_start_says_why_and_the_form_comes_back(monkeypatch):
    def refuses(request, progress, cancel=None):
        raise UsageError(f"{request.spec}: --grid bq=... but the function takes no parameter 'bq'")

    monkeypatch.setattr("inspector.tuning.sweep.run_sweep", refuses)

    app = InspectorApp(MM)
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        screen = app.screen
        await pilot.press("enter")
        await _until(lambda: "takes no parameter" in plain(screen, "#tune-problem"), pilot)
        assert not screen.running and screen.query_one("#tune-form").display
        assert isinstance(app.focused, Input) and "Enter runs the sweep" in plain(screen, "#tune-hint")


@pytest.mark.asyncio
async def test_ctrl_t_on_the_parameter_screen_opens_tune_and_a_function_without_parameters_says_how():
    app = InspectorApp(Session(f"{DATA}/funcs.py:matmul", "cpu"))
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ParamsScreen)
        await pilot.press("ctrl+t")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, TuneScreen)
        text = plain(app.screen, "#tune-declare")
        assert "matmul has no parameters to tune" in text and 'INSPECT = {"matmul"' in text and '"params"' in text
        assert not app.screen.query("#tune-chips")  # nothing to run
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TuneScreen)


@pytest.mark.asyncio
async def test_tune_before_the_trace_says_when_it_can():
    app = InspectorApp(MM)
    async with app.run_test(size=(120, 30)) as pilot:
        app.report = app.lowered = None
        app.action_tune()
        assert "once the function is traced" in status(app)
        app.remote.cancel()


def test_candidates_keep_their_rows_on_every_chip():
    result = _result()
    found = candidates_by_rank(result, 0, "tpu-v6e")
    assert [p for p, _ in found][:2] == [{"bm": 256, "bn": 256}, {"bm": 128, "bn": 256}]
    assert all(set(rows) == {"tpu-v5e", "tpu-v6e"} for _, rows in found)


# ----------------------------------------------------------------------------- the real pool


def _children() -> set[int]:
    found = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            found |= {int(p) for p in open(path).read().split()}
        except OSError:
            pass
    return found


def test_cancel_while_the_target_loads_stops_at_once_and_kills_the_worker(monkeypatch, tmp_path):
    """The plan (a worker importing the target) is cut short: Cancelled, the worker gone."""
    from inspector.tuning.pool import Cancelled
    from inspector.tuning.sweep import SweepRequest, run_sweep

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TUNE_SLEEPY_IMPORT", "120")
    before = _children()
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        run_sweep(SweepRequest(spec=f"{DATA}/tune_sleepy.py:scale", chips=["tpu-v5e"], workers=1), cancel=cancel)
    assert time.monotonic() - start < 10
    assert _children() <= before  # killed and reaped
    assert [os.path.basename(p) for p in glob.glob(str(tmp_path / "*"))] in ([], ["tune-workers.log"])  # nothing stored


@pytest.mark.libtpu
def test_cancel_mid_sweep_returns_what_is_done_and_writes_nothing_half(monkeypatch, tmp_path):
    """A candidate's trace runs (its worker set up for the TPU) when the cancel comes: the sweep
    returns at once, interrupted, every candidate not run; the cache holds whole entries only."""
    from inspector.tuning.sweep import SweepRequest, run_sweep

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TUNE_SLEEPY_TRACE", "120")
    cancel = threading.Event()
    started = []

    class Progress:
        def start(self, total, done, workers, runner):
            started.append(total)
            threading.Timer(3.0, cancel.set).start()

        def advance(self, row):
            pass

        def stop(self):
            pass

    before = _children()
    result = run_sweep(SweepRequest(spec=f"{DATA}/tune_sleepy.py:scale", chips=["tpu-v5e"], workers=2), Progress(), cancel)
    stopped = time.monotonic()
    assert started == [3] and result.interrupted and result.counts[NOT_RUN] == 3
    assert all(r.reason == "the sweep was interrupted before it" for r in result.rows)
    assert time.monotonic() - stopped < 5 and _children() <= before
    for path in glob.glob(str(tmp_path / "*")):  # the plan's entry, whole; no temporary file left
        if path.endswith("tune-workers.log"):
            continue
        assert path.endswith(".json"), path
        assert json.load(open(path))["kind"] == "tune-plan"


@pytest.mark.asyncio
@pytest.mark.libtpu
@pytest.mark.slow
async def test_a_real_sweep_in_the_ui_ranks_and_applies(tmp_path, monkeypatch):
    """4 candidates of tests/data/tune_kernels.py:mm on v5e, compiled deviceless: two ranked,
    bn=64 refused by Mosaic with its reason; Enter on the best applies it."""
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))

    app = InspectorApp(MM)
    async with app.run_test(size=(160, 45)) as pilot:
        await loaded(pilot)
        await pilot.press("u")
        await pilot.pause()
        screen = app.screen
        screen.query_one("#tune-param-pad_mib").value = ""
        await pilot.press("enter")
        await _until(lambda: screen.result is not None, pilot, seconds=600)
        result = screen.result
        assert not result.interrupted and result.counts["total"] == 4, plain(screen, "#tune-problem")
        rows = _table_rows(screen)
        ranked = [r for r in rows if r[0] != "-"]
        assert [r[0] for r in ranked] == ["1", "2"] and all(r[2] == "256" for r in ranked)
        refused = [r for r in rows if r[2] == "64"]
        assert len(refused) == 2 and all(r[4] == "refused" for r in refused)
        assert all("refused in mm at tests/data/tune_kernels.py:" in r[-1] for r in refused)  # where Mosaic refused
        screen.query_one("#tune-table", DataTable).move_cursor(row=rows.index(refused[0]))
        await pilot.pause()
        reason = next(r for r in result.rows if r.params["bn"] == 64).reason
        assert " ".join(reason.split()) in " ".join(plain(screen, "#tune-detail").split())  # the whole reason
        screen.query_one("#tune-table", DataTable).move_cursor(row=0)
        best = result.best("tpu-v5e")
        await pilot.press("enter")  # on the best
        await pilot.pause()
        await loaded(pilot)
        assert app.report.target.params["bm"] == best.params["bm"]


def test_the_ui_process_runs_a_sweep_without_importing_jax(tmp_path):
    """The screen's sweep orchestrates from the UI's process: it must not load jax there (the UI
    would wait on its import, and tracing would take the GIL from the screen)."""
    import subprocess
    import sys

    code = ("import sys, threading\n"
            "import inspector.views.tui.app, inspector.views.tui.tune_screen, inspector.views.tune\n"
            "from inspector.tuning.sweep import SweepRequest, run_sweep\n"
            "from inspector.tuning.pool import Cancelled\n"
            "cancel = threading.Event(); threading.Timer(1.0, cancel.set).start()\n"
            f"try: run_sweep(SweepRequest(spec='{DATA}/tune_sleepy.py:scale', chips=['tpu-v5e'], workers=1), cancel=cancel)\n"
            "except Cancelled: print('cancelled')\n"
            "print('jax' in sys.modules)\n")
    env = dict(os.environ, INSPECTOR_CACHE_DIR=str(tmp_path), TUNE_SLEEPY_IMPORT="60")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["cancelled", "False"], done.stderr


def test_top_keeps_the_fastest_ranked_rows_and_every_failure():
    """--top N on the tune screen, as in tune's printed tables: the N fastest on the chip ranked by, then the rest
    that are not ranked there (each with why)."""
    entries = candidates_by_rank(_result(), 0, "tpu-v6e")
    shown, left_out = top_rows(entries, "tpu-v6e", 1)
    assert left_out == 1 and [e[0] for e in shown] == [{"bm": 256, "bn": 256}, {"bm": 256, "bn": 64}, {"bm": 128, "bn": 64}]
    assert top_rows(entries, "tpu-v6e", 0) == (entries, 0) and top_rows(entries, "tpu-v6e", 2) == (entries, 0)
