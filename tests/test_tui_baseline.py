"""The terminal UI with a baseline, and its long actions (Textual's pilot, issue 62): what moved
leads the overview at 80x24; a baseline the comparison cannot read is a line, not a crash; a
load that fails leaves no tab saying "compiling…"; F says which fix runs and for how long, its
fixes lead the finding's pane, and Esc says what it stopped and which key asks again."""
import copy
import dataclasses
import io
import json
import time
from concurrent.futures import Future

import pytest
from rich.console import Console
from textual.widgets import DataTable

from conftest import loaded, until
from inspector.base.chips import get_chip
from inspector.base.fix_model import Change, Fix, FixResult, Trial
from inspector.baseline.record import Baseline
from inspector.remote import Remote
from inspector.session import Session
from inspector.views.tui.app import ALL_TABS, InspectorApp
from inspector.views.tui.stage_text import StageText
from test_tui import plain, status

MATMUL = Session("samples/matmul.py:tiled", "cpu")
SAVED = "docs/baselines/matmul-jax-0.10.2.json"


def on_cpu(**program) -> Baseline:
    """The saved matmul baseline with its tpu-v5e figures said to be the cpu's (the tests compile for
    the cpu): nearly every figure moved; ``program``: figures written over the program's."""
    data = json.load(open(SAVED))
    entry = data["targets"]["samples/matmul.py:tiled"]
    entry["chips"] = {"cpu": copy.deepcopy(entry["chips"]["tpu-v5e"])}
    entry["chips"]["cpu"]["program"].update(program)
    return Baseline({**data, "chips": ["cpu"]}, "saved.json")


def tab_text(app, name: str) -> str:
    """Everything a tab's texts say."""
    console = Console(width=200, record=True, file=io.StringIO())
    for widget in app.tabs[name].query("Static, StageText"):
        console.print(widget.text if isinstance(widget, StageText) else widget.content)
    return console.export_text()


@pytest.mark.asyncio
async def test_what_moved_leads_the_overview_at_80x24_and_f_runs_with_its_progress_until_esc(monkeypatch):
    began = []  # the fake F: a run that lasts until Esc cancels it

    def call(self, session, method, *args, epoch=None):
        if method != "fix":
            return real(self, session, method, *args, epoch=epoch)
        future: Future = Future()
        with self._lock:
            self._running.add(future)
        began.append(future)
        try:
            return future.result(timeout=120)
        finally:
            with self._lock:
                self._running.discard(future)

    def cancel(self, wait=False):
        for future in began:
            future.cancel()
        return real_cancel(self, wait)

    real, real_cancel = Remote.call, Remote.cancel
    monkeypatch.setattr(Remote, "call", call)
    monkeypatch.setattr(Remote, "cancel", cancel)
    monkeypatch.setattr(Remote, "news", lambda self: "trying fix 3 of 9: bm=128", raising=False)

    app = InspectorApp(MATMUL, baseline=on_cpu())
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        scroll, moved = app.query_one("#overview-scroll"), app.query_one("#overview-baseline")
        # the verdict is the first line of what the overview shows at first sight
        assert moved.virtual_region.y - scroll.scroll_offset.y == 0
        assert "changes past the tolerance" in plain(app, "#overview-baseline").splitlines()[0]
        # F on a TPU report (faked: the fixes run for a TPU only): which fix, of how many, how long
        app.report = dataclasses.replace(app.report, chip=get_chip("tpu-v5e"))
        now = [1000.0]
        app.clock = lambda: now[0]
        await pilot.press("F")
        while not began:  # F reached the worker (behind the repaint of every tab)
            await pilot.pause(0.05)
        now[0] += 84
        await until(pilot, lambda: "trying fix 3 of 9, 1:24: bm=128 (Esc cancels)" in status(app))
        await pilot.press("F")  # again while it runs: no second run queued behind the first
        await pilot.pause()
        assert len(began) == 1 and "trying fix 3 of 9" in status(app)
        await pilot.press("A")  # its fixes are not there yet: it says where F is
        await pilot.pause()
        assert "trying fix 3 of 9" in status(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "cancelled: the fixes were stopped (F tries them again)" in status(app)
        assert "r starts" not in status(app) and app.report is not None
        await pilot.pause(0.7)
        assert "trying fix" not in status(app)  # the ticker stopped with the run
        # the fixes F found lead the finding's pane: at 80x24 it is a few lines high
        finding = app.report.findings[0]
        chip = "tpu-v5e"
        trial = Trial(chip=chip, compiles=True, vmem_bytes=1 << 20, vmem_limit_bytes=16 << 20)
        fix = Fix(change=Change(kind="params", kernel="", call=None, value={"bm": 128}), trials=[trial], gains={chip: 1.5},
                  recommended=[chip])
        fixes = FixResult(target=MATMUL.spec, chips=[chip], before=[trial], fixes=[fix], refused=[], best={chip: 0}, not_tried=[],
                          answers={f"{finding.code}@{chip}": [0]})
        app.report = dataclasses.replace(app.report, fixes=fixes)
        await pilot.pause()
        detail = app.query_one("#finding-detail")
        lines = [line for line in plain(app, "#finding-detail").splitlines() if line.strip()]
        assert detail.size.height >= 4 and lines[1].startswith("fix #1")


@pytest.mark.asyncio
async def test_a_baseline_the_comparison_cannot_read_is_a_line_not_a_crash_and_a_resize_fits_the_findings_again():
    app = InspectorApp(MATMUL, baseline=on_cpu(hbm_bytes="lots"))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        said = plain(app, "#overview-baseline")
        assert "saved.json: cannot compare with it (ValueError" in said and "o sets another" in said
        assert app.report is not None and app.crash is None
        # a wider terminal: the findings' messages are cut again, to the new width
        table = app.query_one("#findings", DataTable)
        narrow = str(table.get_row_at(0)[2])
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert narrow.endswith("…") and len(str(table.get_row_at(0)[2])) > len(narrow)


@pytest.mark.asyncio
async def test_options_the_worker_refuses_bring_the_report_back_and_a_failed_load_leaves_no_tab_compiling():
    app = InspectorApp(MATMUL)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        before = app.report
        await pilot.press("o")
        await pilot.pause()
        app.screen.query_one("#option-ref").value = "no_such_reference"  # only the worker can judge it
        app.screen.query_one("#option-ref").focus()
        await pilot.press("enter")
        await loaded(pilot)
        assert app.report is before and app.session.ref is None
        assert "the options were not applied" in status(app) and "no_such_reference" in status(app)
        assert not [name for name in ALL_TABS if "compiling" in tab_text(app, name)]
        # a load that fails with nothing to come back to: every tab says so, none "compiling…"
        app.session = app.session.with_options(ref="no_such_reference")
        app.load()
        await loaded(pilot)
        assert app.report is None and "no_such_reference" in status(app)
        waiting = [name for name in ALL_TABS if "compiling" in tab_text(app, name)]
        assert not waiting, f"these tabs still say compiling: {waiting}"


class Teller:
    """What F's run does in the worker, in small: says where it is (base.progress.tell)."""

    def run(self):
        from inspector.base.progress import tell

        tell("trying fix 1 of 2: bm=128")
        return 7


def test_what_the_worker_tells_reaches_the_ui():
    remote = Remote()
    try:
        assert remote.call(Teller(), "run") == 7
        deadline = time.monotonic() + 30  # the child's queue writes from a thread of its own: a moment later
        while not remote.news() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert remote.news() == "trying fix 1 of 2: bm=128"
        remote.forget_news()
        assert remote.news() == ""
    finally:
        remote.close()
