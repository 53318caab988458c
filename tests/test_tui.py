"""The terminal UI as a person uses it (Textual's pilot): it opens before the compile ends,
tabs, search, cross-links between stages, grid stepping, target switching, errors in place;
snapshots of each tab at 100x30; and one run in a real terminal (tmux)."""
import asyncio
import dataclasses
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static, TabbedContent

from conftest import DATA, ROOT, loaded, opened, until
from inspector.session import Session
from inspector.views.tui.app import ALL_TABS, InspectorApp
from inspector.views.tui.pallas_tab import PallasTab
from inspector.views.tui.screens import ParamsScreen
from inspector.views.tui.stage_text import StageText

NAIVE = Session("samples/attention.py:naive", "cpu", args="f32[1,128,32] f32[1,128,32] f32[1,128,32]")
FLASH = Session("samples/attention.py:flash", "cpu", args="bf16[1,512,128] bf16[1,512,128] bf16[1,512,128]",
                sets=["block_q=128", "block_k=128"])
SIZE = (100, 30)


# The worker runs on a thread of this process (conftest.worker_in_process: no child Python that
# imports jax, and one memo of the compiles across tests) except where the child is what is
# tested (its processes, a cancel or a crash that ends it), a test needs the compile still running
# when its keys arrive (in this process an earlier test's compile is memoised: no time at all), or
# it compiles for a TPU (here that would be a libtpu compile in the test's process).
REAL_WORKER = {"test_keys_typed_before_the_other_tabs_are_mounted_are_handled_after",
               "test_export_during_the_compile_says_when_it_can_and_counts_read_right",
               "test_stages_arrive_as_they_are_ready_with_the_stage_and_its_seconds",
               "test_switching_target_recompiles_for_the_tpu", "test_compare_with_other_parameters_and_another_chip",
               "test_in_a_real_terminal", "test_a_crash_of_the_ui_is_one_line_a_log_and_a_non_zero_exit",
               "test_esc_when_idle_keeps_the_worker_and_quit_ends_it_quietly",
               "test_a_switch_cancels_the_compile_in_flight_and_nothing_stale_shows"}


@pytest.fixture(autouse=True)
def _worker(request):
    params = request.node.callspec.params if hasattr(request.node, "callspec") else {}
    if request.node.originalname not in REAL_WORKER and not str(params.get("chip", "cpu")).startswith("tpu"):
        request.getfixturevalue("worker_in_process")


def plain(app, selector: str) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


def status(app) -> str:
    return plain(app, "#status")


@pytest.mark.asyncio
async def test_opens_before_the_compile_and_fills_in():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        assert "compiling" in plain(app, "#overview-panel")
        await loaded(pilot)
        assert app.report is not None and "naive" in plain(app, "#overview-panel")
        assert app.query_one("#text-hlo", StageText).text.startswith("HloModule")


@pytest.mark.asyncio
async def test_keys_typed_before_the_other_tabs_are_mounted_are_handled_after():
    """The first frame has the overview only; a key typed ahead at launch (a tab, e) waits for the
    other tabs and is then handled as usual, in order."""
    app = InspectorApp(NAIVE)
    mount_tabs = app._mount_tabs

    async def slow_mount():
        await asyncio.sleep(0.3)
        await mount_tabs()
    app._mount_tabs = slow_mount
    async with app.run_test(size=SIZE) as pilot:
        assert not app.tabs_ready
        await pilot.press("e", "2")
        await opened(pilot)
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "jaxpr" and app.focused.id == "text-jaxpr"
        assert "once the compile is done" in status(app)
        await loaded(pilot)
        assert "{ lambda" in app.query_one("#text-jaxpr", StageText).text


@pytest.mark.asyncio
async def test_number_keys_switch_tabs_and_search_finds_and_repeats():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        assert app.query_one(TabbedContent).active == "hlo"
        await pilot.press("slash", *"fusion", "enter")
        text = app.query_one("#text-hlo", StageText)
        first = text.selection
        total = text.text.count("fusion")
        assert text.selected_text == "fusion" and f"match 1 of {total}" in status(app)
        await pilot.press("n")
        assert text.selection != first and text.selected_text == "fusion" and f"match 2 of {total}" in status(app)
        await pilot.press("N")
        assert text.selection == first
        await pilot.press("slash", *"no-such-op", "enter")
        assert "not found" in status(app)
        # a match on a line with a source location: the count stays (the cursor's move does not replace it)
        await pilot.press("2", "slash", *"dot_general", "enter")
        await pilot.pause()
        total = app.query_one("#text-jaxpr", StageText).text.count("dot_general")
        assert f"/dot_general: match 1 of {total}" in status(app)
        await pilot.press("n")
        await pilot.pause()
        assert f"/dot_general: match 2 of {total}" in status(app)


@pytest.mark.asyncio
async def test_a_jaxpr_line_links_to_the_hlo_from_the_same_source_line():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2", "slash", *"dot_general", "enter")
        jaxpr = app.query_one("#text-jaxpr", StageText)
        source = jaxpr.source_of(jaxpr.cursor_location[0])
        assert source and source.startswith("samples/attention.py:")
        assert "comes from" in status(app)
        for stage in ("stablehlo", "hlo", "jaxpr"):  # l goes on to the next stage, round
            await pilot.press("l")
            await pilot.pause()
            assert app.query_one(TabbedContent).active == stage
            active = app.query_one(f"#text-{stage}", StageText)
            assert active.source_of(active.cursor_location[0]) == source


def test_stablehlo_gives_each_op_its_source_line_and_stays_the_module_jax_prints():
    import jax
    import jax.numpy as jnp

    from inspector.hlo.mlir_sources import with_sources

    def f(x, w):
        y = jnp.tanh(x @ w)
        return jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, y)

    x = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    lowered = jax.jit(f).lower(x, x)
    text = with_sources(lowered.as_text(debug_info=True))
    line = f.__code__.co_firstlineno
    assert any(l.endswith(f"// tests/test_tui.py:{line + 1}") and "dot_general" in l for l in text.splitlines())
    # a region op (the loop) has its location where MLIR prints it: at its closing brace
    assert any(l.endswith(f"// tests/test_tui.py:{line + 2}") and l.strip().startswith("}") for l in text.splitlines())
    assert "#loc" not in text and " loc(" not in text
    # with the comments taken off, it is the module as jax prints it
    assert "\n".join(l.split("  // ")[0] for l in text.splitlines()) == lowered.as_text().rstrip("\n")


@pytest.mark.asyncio
async def test_pallas_grid_steps_with_the_arrow_keys():
    app = InspectorApp(FLASH)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("6")
        tab = app.query_one(PallasTab)
        grid = lambda: plain(app, "#pallas-grid")
        assert "step 1 of 16" in grid() and "grid point (0, 0, 0)" in grid()
        await pilot.press("right", "right")
        assert tab.step == 2 and "grid point (0, 0, 2)" in grid()
        await pilot.press("shift+right")
        assert tab.step == 12
        await pilot.press("left")
        assert "grid point (0, 2, 3)" in grid()


@pytest.mark.asyncio
async def test_pallas_tab_shows_the_walks_of_a_pipeline_nested_in_the_kernel():
    app = InspectorApp(Session(f"{DATA}/real_patterns.py:nested", "cpu"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("6")
        body = plain(app, "#pallas-body")
        assert "emit_pipeline walks" in body and "kernel pipeline 1" in body
        assert "in[0] (inp)" in body and "512 KiB" in body  # 8 blocks of 64 KiB per run


@pytest.mark.asyncio
async def test_fusions_sort_and_findings_jump_to_their_view():
    app = InspectorApp(Session("samples/bugs.py:dropped_tail", "cpu"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        findings = app.query_one("#findings", DataTable)
        codes = [str(findings.get_row_at(i)[1]) for i in range(findings.row_count)]
        assert "output-not-written" in codes
        findings.move_cursor(row=codes.index("output-not-written"))
        await pilot.press("enter")
        assert app.query_one(TabbedContent).active == "pallas"
        await pilot.press("5", "s")
        assert "sorted by bytes" in plain(app, "#fusions-summary")


@pytest.mark.asyncio
async def test_switching_target_recompiles_for_the_tpu():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("t")
        await pilot.pause()
        options = app.screen.query_one("#chips")
        options.highlighted = [o.prompt for o in options.options].index("tpu-v5e")
        await pilot.press("enter")
        await loaded(pilot)
        assert app.report.chip.name == "tpu-v5e" and ":T(8,128)" in app.query_one("#text-hlo", StageText).text


@pytest.mark.asyncio
async def test_editing_params_reanalyses():
    app = InspectorApp(FLASH)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("x")
        await pilot.pause()
        field = app.screen.query_one("#param-block_q")
        field.value = "256"
        field.focus()
        await pilot.press("enter")
        await loaded(pilot)
        assert app.report.target.params["block_q"] == 256
        assert app.report.pallas[0].call.grid == [1, 2, 4]


@pytest.mark.asyncio
async def test_errors_show_in_place():
    app = InspectorApp(Session(f"{DATA}/funcs.py:raises_in_trace", "cpu"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "TypeError" in plain(app, "#overview-panel")
        assert "funcs.py:23" in status(app)


@pytest.mark.asyncio
async def test_diff_runs_on_demand():
    app = InspectorApp(Session("samples/bugs.py:dropped_tail", "cpu"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("d")
        await loaded(pilot)
        assert app.query_one(TabbedContent).active == "diff"
        assert "blocks wrong" in plain(app, "#diff-body")
        assert app.diff_verdict.startswith("WRONG")


@pytest.mark.asyncio
async def test_memory_and_collectives_tabs_show_what_the_report_carries():
    # not NAIVE: B leaves the buffer assignment in the compile cache, and the memory snapshot
    # of NAIVE shows the tab before B
    app = InspectorApp(Session("samples/attention.py:naive", "cpu", args="f32[1,64,32] f32[1,64,32] f32[1,64,32]"))
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert "compiling" in plain(app, "#memory-body")
        await loaded(pilot)
        assert app.report.memory is not None and app.report.collectives is not None
        await pilot.press("9")
        assert app.query_one(TabbedContent).active == "memory"
        memory = plain(app, "#memory-body")
        assert "HBM per device on cpu" in memory and "temporaries" in memory and "no HBM capacity" in memory
        assert "press B" in memory
        await pilot.press("B")
        assert app.session.buffers and app.query_one(TabbedContent).active == "memory"
        await loaded(pilot)
        assert app.report.memory.largest and "live in HBM at the peak" in plain(app, "#memory-body")
        assert "press B" not in plain(app, "#memory-body")
        await pilot.press("0")
        assert app.query_one(TabbedContent).active == "collectives"
        assert "no collectives" in plain(app, "#collectives-body")


@pytest.mark.asyncio
async def test_passes_tab_asks_for_pass_dumps_and_enter_shows_a_steps_diff():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("p")
        assert app.query_one(TabbedContent).active == "passes"
        assert "press P" in plain(app, "#passes-title") and app.report.passes is None
        await pilot.press("P")
        assert app.session.passes and app.query_one(TabbedContent).active == "passes"
        await loaded(pilot)
        log = app.report.passes
        assert log is not None and log.steps and "steps of XLA's pipeline" in plain(app, "#passes-title")
        assert any(k.made_by for k in app.report.fusions.kernels)  # kernels name the pass that made them
        table = app.query_one("#passes-table", DataTable)
        assert table.row_count == len(log.steps) and table.has_focus
        row = next(i for i, s in enumerate(log.steps) if s.changed and s.index > 0)
        table.move_cursor(row=row)
        await pilot.press("enter")
        await loaded(pilot)
        diff = plain(app, "#passes-diff")
        assert log.steps[row].name in diff and " lines" in diff and "+" in diff
        assert log.steps[row].index in app._pass_diffs
        # the next step's diff, cancelled in flight: its answer is held until after the Esc
        held = threading.Event()
        app.remote.call = lambda *a: held.wait(30) and None  # "no diff", if it were shown
        table.move_cursor(row=row + 1)
        await pilot.press("enter")
        assert "compiling with pass dumps" in plain(app, "#passes-diff")
        await pilot.press("escape")
        held.set()
        await loaded(pilot)
        assert "cancelled" in plain(app, "#passes-diff") and app.report.passes is log
        assert log.steps[row + 1].index not in app._pass_diffs


@pytest.mark.asyncio
async def test_measure_key_says_in_one_line_there_is_no_tpu_and_fills_the_measured_column_where_there_is(monkeypatch):
    from inspector import session as session_mod
    from inspector.families import measuring as measure_run
    from inspector.remote import Remote
    from inspector.measure.model import KernelMeasure, Measurement

    names = []

    def measured(target, chip):  # what the chip's profile gives: each of the Report's kernels, 2 us per launch
        return Measurement(chip="tpu-v5e", device_kind="TPU v5 lite", versions={}, runs=3, seconds=2e-6 * len(names),
                           seconds_min=0, seconds_max=0, method="test", kernels=[
                               KernelMeasure(name=n, seconds=2e-6, launches=1, min_seconds=2e-6, max_seconds=2e-6)
                               for n in names])

    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("D")
        await pilot.pause()
        assert "TPU" in status(app) and not app.session.measure  # no chip here: one line, nothing run
        names.extend(k.name for k in app.report.fusions.kernels)
        monkeypatch.setattr(measure_run, "attached_for", lambda chip: chip)
        monkeypatch.setattr(session_mod, "measure_on_chip", measured)
        # the Session's work in this process, where the chip's measurement is faked
        monkeypatch.setattr(Remote, "call", lambda self, session, method, *args, epoch=None: getattr(session, method)(*args))
        await pilot.press("D")
        await loaded(pilot)
        assert app.session.measure and app.query_one(TabbedContent).active == "fusions"
        assert app.report.measured is not None and all(k.measured_seconds == 2e-6 for k in app.report.fusions.kernels)
        table = app.query_one("#fusions-table", DataTable)
        assert any("measured" in str(c.label) for c in table.columns.values())


@pytest.mark.asyncio
async def test_compare_with_other_parameters_and_another_chip():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert "press c" in plain(app, "#compare-body")
        await loaded(pilot)
        await pilot.press("c")
        await pilot.pause()
        app.screen.query_one("#compare-with").highlighted = 1  # other parameters
        await pilot.press("enter")
        await pilot.pause()
        field = app.screen.query_one("#param-causal")
        field.value = "False"
        field.focus()
        await pilot.press("enter")
        await loaded(pilot)
        assert app.query_one(TabbedContent).active == "compare"
        body = plain(app, "#compare-body")
        assert "causal=False" in body and "HBM bytes" in body
        assert app.session.sets == []  # A stays as it was
        await pilot.press("c")
        await pilot.pause()
        await pilot.press("enter")  # another target chip
        await pilot.pause()
        options = app.screen.query_one("#chips")
        options.highlighted = [o.prompt for o in options.options].index("tpu-v5e")
        await pilot.press("enter")
        await loaded(pilot)
        body = plain(app, "#compare-body")
        assert "tpu-v5e" in body and app.session.chip == "cpu"


def _snapshot_app(tab_keys):
    async def before(pilot):
        await loaded(pilot)
        await pilot.press(*tab_keys)
        await pilot.pause()
    return before


BUGGY = Session("samples/bugs.py:dropped_tail", "cpu")
SCREENS = [
    pytest.param(NAIVE, ["1"], id="overview"),
    pytest.param(BUGGY, ["1"], id="overview-findings"),
    pytest.param(NAIVE, ["2"], id="jaxpr"),
    pytest.param(NAIVE, ["3"], id="stablehlo"),
    # No HLO snapshot: its stack-frame table (and so every line number) depends on who compiled
    # the module first (the compile cache keeps that text); the pilot tests above cover the tab.
    pytest.param(NAIVE, ["5"], id="fusions"),
    pytest.param(FLASH, ["6", "right"], id="pallas"),
    pytest.param(BUGGY, ["6"], id="pallas-finding"),
    pytest.param(NAIVE, ["7"], id="diff"),
    pytest.param(NAIVE, ["question_mark"], id="help"),
    pytest.param(FLASH, ["x"], id="params"),
    pytest.param(NAIVE, ["t"], id="target"),
    pytest.param(NAIVE, ["9"], id="memory"),
    pytest.param(NAIVE, ["0"], id="collectives"),
    pytest.param(NAIVE, ["p"], id="passes"),
    pytest.param(NAIVE, ["c"], id="compare-pick"),
]


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
@pytest.mark.parametrize("session, keys", SCREENS)
def test_snapshots(snap_compare, session, keys, size):
    app = InspectorApp(session)
    app.clock = lambda: 0.0  # each stage's time in the status line: 0.0 s, whatever the machine's load
    assert snap_compare(app, terminal_size=size, run_before=_snapshot_app(keys))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_snapshot_while_it_compiles(snap_compare, size):
    """What a TPU compile shows for minutes: the overview of the lowering, the stage and its
    seconds (the clock is fixed: 0 s) where the findings will be; the compile's answer is dropped."""
    app = InspectorApp(NAIVE)
    app.clock = lambda: 0.0
    app._show = lambda generation, report: None

    async def before(pilot):
        await _until(lambda: app.lowered is not None)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/setup installs it)")
def test_in_a_real_terminal():
    """Start the UI in tmux, switch tabs, quit: what a person does first."""
    name = f"inspector-test-{os.getpid()}"
    cmd = f"cd {ROOT} && {sys.executable} -m inspector samples/attention.py:naive --args 'f32[1,64,32] f32[1,64,32] f32[1,64,32]'"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", cmd], check=True)
    try:
        screen = lambda: subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
        deadline = time.time() + 60
        while not re.search(r": \d+ findings? \(\d+ errors?\)", screen()) and time.time() < deadline:  # the compile is done
            time.sleep(0.5)
        assert "Overview" in screen() and "naive" in screen()
        subprocess.run(["tmux", "send-keys", "-t", name, "4"], check=True)
        deadline = time.time() + 10
        while "HloModule" not in screen() and time.time() < deadline:
            time.sleep(0.2)
        assert "HloModule" in screen()
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        deadline = time.time() + 10
        while time.time() < deadline:
            if subprocess.run(["tmux", "has-session", "-t", name], capture_output=True).returncode != 0:
                break
            time.sleep(0.3)
        else:
            pytest.fail("the UI did not quit on q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


@pytest.mark.asyncio
async def test_a_save_of_the_file_reloads_it_and_says_so(tmp_path):
    """Without --watch too: the file's time is read at start and each second."""
    source = tmp_path / "watched.py"
    source.write_text("import jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x)\nINSPECT = {'f': {'args': 'f32[8]'}}\n")

    app = InspectorApp(Session(f"{source}:f", "cpu"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "sin" in app.report.stages.jaxpr
        source.write_text(source.read_text().replace("jnp.sin", "jnp.cos"))
        os.utime(source, (time.time() + 5, time.time() + 5))
        for _ in range(40):
            await asyncio.sleep(0.25)
            await app.workers.wait_for_complete()
            if "cos" in (app.report.stages.jaxpr or ""):
                break
        assert "cos" in app.report.stages.jaxpr and "reloaded: watched.py was saved; cpu:" in status(app)


# ---------------------------------------------------------------- every finding, every view

def _codes_in_the_core() -> set[str]:
    """Every finding code the analyses can produce: the registry producers and views share. A new
    code fails the test below until it has an example there."""
    from inspector.base.findings import CODES

    return set(CODES)


def example_findings(kernel: str, inp: str, out: str) -> list:
    """One finding per code, with the data shape the analysis gives it (see the module named)."""
    from inspector.base.findings import Finding

    where = lambda operand=None: dict(kernel=kernel, operand=operand, view="pallas")
    long = " and a long tail that a table cell would cut" * 4
    mosaic = {"chip": "tpu-v5e", "kind": "k", "kernel": kernel, "source": "samples/mosaic_errors.py:36", "source_of": "op",
              "op": "vector.load", "rule": "r", "fix": "f", "compiler": "E2003: ...", "error_code": "E2003",
              "pallas_call": kernel, "frames": [], "seen": "tpu-v5e", "details": {}}
    oom = {"used_bytes": 25165824, "limit_bytes": 16777216, "exceeded_by_bytes": 8388608, "scope": "scoped",
           "kernel": kernel, "op_name": None, "chip": "tpu-v5e",
           "allocations": [{"size_bytes": 8388608, "role": "operand", "operand_index": 0, "window_shape": "[1024,1024]",
                            "buffering": 2}]}
    return [
        # inspector/pallas/grid_walk.py
        Finding("error", "block-out-of-bounds", f"{out}: grid point (1,) maps to block (128, 0)" + long,
                data={"grid_point": [1, 0], "blocks": [[128, 0]]}, **where(out)),
        Finding("warning", "partial-block", f"{inp}: the last block along dim 0 is padded" + long,
                data={"dim": 0, "array_size": 500, "block_size": 128}, **where(inp)),
        Finding("error", "output-not-written", f"{out}: 1 of 4 output blocks are never written" + long,
                data={"blocks": [[3, 0]], "count": 1}, **where(out)),
        Finding("error", "output-revisit", f"{out}: 1 output block(s) are written in runs" + long,
                data={"blocks": [[0, 0]], "count": 1}, **where(out)),
        Finding("error", "parallel-axis-race", f"{out}: output block (0, 0) is written from 4 indices" + long,
                data={"axis": 1, "blocks": [[0, 0]], "count": 1}, **where(out)),
        Finding("info", "walk-needs-values", f"{kernel}: index maps read scalar-prefetch operands" + long,
                data={"why": "scalar prefetch computed at run time"}, **where()),
        Finding("warning", "analysis-failed", f"could not analyse the grid walk of {kernel}" + long,
                data={"what": "the grid walk", "why": "TypeError"}, **where()),
        Finding("info", "walk-sampled", f"{kernel}: the grid has 9,999,999 steps" + long, **where()),
        # inspector/pallas/tiling.py
        Finding("error", "tiling", f"{inp}: block (100, 128) on tpu-v5e" + long, **where(inp)),
        Finding("warning", "tiling-packing", f"{inp} on tpu-v5e: bf16 packs 2 rows" + long, **where(inp)),
        Finding("warning", "mxu-padding", f"{kernel}: a (128x192) @ (192x256) matmul" + long,
                data={"m": 128, "k": 192, "n": 256, "waste": 0.25}, **where()),
        Finding("error", "triton-block-pow2", f"{inp}: block (100, 128) has 12800 elements" + long, **where(inp)),
        Finding("warning", "mosaic-gpu-minor-bytes", f"{inp}: the minor block dim is 6 bytes" + long, **where(inp)),
        # inspector/pallas/analysis.py
        Finding("error", "smem-over-limit", f"{kernel} on tpu-v5e: SMEM" + long,
                data={"chip": "tpu-v5e", "bytes": 2 << 20, "limit": 1 << 20}, **where()),
        Finding("error", "vmem-over-limit", f"{kernel} on tpu-v5e: needs 22.50 MiB" + long,
                data={"chip": "tpu-v5e", "bytes": 23592960, "limit": 16777216}, **where()),
        Finding("warning", "vmem-may-exceed", f"{kernel} on tpu-v5e: the blocks and scratch need 12.00 MiB" + long,
                data={"chip": "tpu-v5e", "bytes": 20 << 20, "limit": 16 << 20, "certain_bytes": 12 << 20}, **where()),
        Finding("warning", "vmem-estimate-over-compiler", f"{kernel} on tpu-v5e: the estimate (24.00 MiB) is over" + long,
                data={"chip": "tpu-v5e", "bytes": 24 << 20, "limit": 16 << 20, "compiler_bytes": 12 << 20}, **where()),
        Finding("info", "output-kept-from-input", f"{out}: 124 of 128 output blocks keep the input's values" + long,
                data={"blocks": [[3, 0]], "count": 124, "input": inp}, **where(out)),
        Finding("info", "output-unwritten-unread", f"{out}: 8 of 72 output blocks are never written, and never read" + long,
                data={"blocks": [[0, 0]], "count": 8}, **where(out)),
        Finding("info", "output-unwritten-undecided", f"{out}: 8 of 72 output blocks are never written; undecided" + long,
                data={"blocks": [[0, 0]], "count": 8, "ops": ["dynamic_slice at t.py:3"]}, **where(out)),
        Finding("info", "kernel-interpret-flag", f"{kernel}: pallas_call(interpret=True) runs no Mosaic kernel" + long,
                **where()),
        Finding("error", "shared-memory-over-limit", f"{kernel} on h100: needs 300 KiB" + long,
                data={"chip": "h100", "bytes": 307200, "limit": 232448, "certain_bytes": 262144}, **where()),
        # inspector/pallas/gpu_smem.py
        Finding("warning", "shared-memory-undecided", f"{kernel} on a100: between 96 and 192 KiB" + long,
                data={"chip": "a100", "bytes": 196608, "limit": 166912, "certain_bytes": 98304}, **where()),
        # inspector/verbs/checking.py, inspector/results/report.py, inspector/compilation/compile_errors.py
        Finding("info", "no-pallas-call", "f has no pallas_call: nothing to check" + long),
        Finding("info", "pallas-interpreted", "Pallas kernels are interpreted on the CPU backend" + long, view="hlo"),
        Finding("info", "simulated-chip", "the program asks for SparseCores" + long, view="pallas", data={"chip": "tpu-7x"}),
        Finding("info", "pipeline-not-walked", f"{kernel}: the emit_pipeline at k.py:3 reads a value of the kernel" + long,
                kernel=kernel, view="pallas", data={"why": "lax.axis_index"}),
        Finding("error", "no-sparse-core", "f on tpu-v5e: the program builds a SparseCore mesh" + long, view="pallas",
                data={"chip": "tpu-v5e"}),
        Finding("error", "raised-for-chip", "f on tpu-v6e: the code raised while tracing for this chip" + long,
                view="overview", data={"chip": "tpu-v6e"}),
        Finding("warning", "vmem-undecided", f"{kernel} on tpu-v6e: VMEM_SHARED is not modelled" + long, kernel=kernel,
                view="pallas", data={"chip": "tpu-v6e", "bytes": 2**20, "limit": 2**25, "certain_bytes": 2**20,
                                     "why": "VMEM_SHARED"}),
        Finding("info", "libtpu-no-time", f"{kernel} on tpu-v6e: libtpu simulated 0 cycles" + long, kernel=kernel,
                view="fusions", data={"chip": "tpu-v6e"}),
        Finding("warning", "libtpu-below-roofline", f"{kernel}: libtpu's simulation on tpu-v5e gives 130 us, below" + long,
                kernel=kernel, view="fusions", data={"chip": "tpu-v5e", "libtpu_seconds": 1.3e-4, "roofline_seconds": 1.74e-4}),
        Finding("info", "libtpu-guarded-steps", f"{kernel}: 144 of the 256 grid steps run the code guarded at" + long,
                kernel=kernel, view="fusions", data={"chip": "tpu-v5e", "guard": "flash_attention.py:118", "steps": 256,
                                                     "heavy_steps": 144, "cycles_per_step_skipped": 859.0,
                                                     "cycles_per_step_taken": 3659.0}),
        Finding("warning", "libtpu-guard-unknown", f"{kernel}: whether a grid step runs the code guarded" + long,
                kernel=kernel, view="fusions", data={"chip": "tpu-v5e", "guard": None, "steps": 256, "heavy_steps": None,
                                                     "cycles_per_step_skipped": 859.0, "cycles_per_step_taken": 3659.0,
                                                     "high_cycles": 9.4e5}),
        Finding("info", "libtpu-alone", f"{kernel}: libtpu stopped simulating the whole program before it" + long,
                kernel=kernel, view="fusions", data={"chip": "tpu-v5e"}),
        Finding("warning", "libtpu-loop-unknown", f"{kernel}: its body runs 1 while loop(s) whose trip count" + long,
                kernel=kernel, view="fusions", data={"chip": "tpu-v5e", "loops": 1}),
        Finding("warning", "xla-cost-unknown", "exponential_reduce_fusion: XLA's cost model on tpu-v5e gave no estimate" + long,
                kernel="exponential_reduce_fusion", view="fusions", data={"chip": "tpu-v5e", "roofline_seconds": 2.05e-5}),
        Finding("info", "measured-unmatched", "3 of the 4 ops run on tpu-v5e have no kernel of this name" + long,
                view="fusions", data={"ops": ["fusion.1", "copy.2", "fusion.3"]}),
        Finding("error", "compile-vmem-oom", "tpu-v5e: VMEM out of memory (scoped)" + long, kernel=kernel,
                view="overview", data=oom),
        Finding("error", "compile-error", "tpu-v5e: INVALID_ARGUMENT: something" + long, view="overview",
                data={"chip": "tpu-v5e"}),
        # inspector/families/gpu/verdict.py: XLA:GPU's shared-memory verdict on a Pallas-Triton kernel
        Finding("error", "compile-shared-memory-oom", "h100: requested 524288 B of shared memory, available 232448" + long,
                kernel=kernel, view="pallas", data={"chip": "h100", "kernel": kernel, "source": "samples/gpu_matmul.py:31",
                                                    "bytes": 524288, "limit": 232448, "fix": "fewer num_stages"}),
        Finding("warning", "shared-memory-estimate-over-compiler", "h100: the estimate is over 227 KiB; XLA:GPU used 96 KiB" + long,
                kernel=kernel, view="pallas", data={"chip": "h100", "bytes": 786432, "limit": 232448, "compiler_bytes": 98304}),
        # inspector/verbs/checking.py: libtpu ended one chip's compile process
        Finding("error", "compile-aborted", "tpu-7x: libtpu ended the compile's process (killed by SIGABRT)" + long,
                view="overview", data={"chip": "tpu-7x", "exit": -6, "log_lines": 43, "log_tail": "F1201 check failed"}),
        # inspector/mosaic/explain.py: each kind of Mosaic error, at the failing op's source line
        *(Finding("error", code, f"tpu-v5e: {code} in {kernel} at samples/mosaic_errors.py:36. Rule: ... Fix: ..." + long,
                  kernel=kernel, view="mosaic", data={**mosaic, **extra})
          for code, extra in (("mosaic-unproven-alignment", {"dim": 0, "multiple": 8}),
                              ("mosaic-unimplemented", {"primitive": "sort", "alternative": "outside the kernel",
                                                        "lowerable": ["add", "dot_general"]}),
                              ("mosaic-shape-cast", {"change": "the last two dimensions"}),
                              ("mosaic-layout", {"tile_rows": 32, "tile_cols": 128}),
                              ("mosaic-dtype", {"subject": "matmul RHS"}),
                              ("mosaic-block-index", {"index": [2, 0], "dim": 0, "blocks": 2, "index_map_source": "t.py:9"}),
                              ("mosaic-error", {}))),
        Finding("info", "mosaic-passes-unread", "tpu-v5e: Mosaic's pass dumps could not be read" + long, view="mosaic",
                data={"chip": "tpu-v5e", "why": "no dumps"}),
        # inspector/hlo/memory.py
        Finding("error", "hbm-over-capacity", "tpu-v5e:2x2: needs 36.18 GiB of HBM per device, 15.75 GiB usable" + long,
                view="memory", data={"chip": "tpu-v5e:2x2", "bytes": 38848000000, "limit": 16911433728, "largest": []}),
        # inspector/diff.py
        Finding("error", "interpret-out-of-bounds", f"{kernel}: x (input): block index (9, 0) is out of bounds" + long,
                view="diff"),
        Finding("error", "interpret-revisit", f"{kernel}: the interpreter refused a revisit" + long, view="diff"),
        Finding("error", "kernel-raised", f"{kernel}: ValueError raised while running" + long, view="diff"),
        Finding("error", "race-detected", f"{kernel}: the interpreter's race detector saw two cores" + long, view="diff"),
        Finding("error", "dma-hazard", f"{kernel} as tpu-v5e: 3 DMA hazards, first core 0 and a DMA" + long, view="diff",
                data={"chip": "tpu-v5e", "cores": 1, "runs": {"as checked": 12}, "races": [], "detail": "RACE DETECTED"}),
        Finding("error", "mismatch", "output: 13312 of 128000 elements outside atol" + long, view="diff"),
        Finding("error", "output-structure", "the kernel returns a dict, the reference a tuple" + long, view="diff",
                data={"kernel": "PyTreeDef({'a': *})", "reference": "PyTreeDef((*,))"}),
        Finding("error", "output-shape", "output: the kernel gives (8,), the reference (4,)" + long, view="diff"),
        Finding("error", "output-dtype", "output: float32 against bfloat16" + long, view="diff"),
        Finding("info", "interpret-unsupported", f"{kernel}: cannot run in interpret mode: a DMA" + long, view="diff",
                data={"reason": "a DMA through a reshaped ref", "detail": "..."}),
        Finding("info", "interpret-retried", f"{kernel}: run again with out-of-bounds reads allowed" + long, view="diff"),
        Finding("info", "blocks-unknown", "errors folded onto an even grid" + long, view="diff"),
        Finding("info", "mesh-on-one-device", "run on one device, its mesh (data=4)" + long, view="diff",
                data={"axes": {"data": 4}}),
        Finding("info", "mesh-on-cpu-devices", "run on 4 devices, its mesh (data=4)" + long, view="diff",
                data={"axes": {"data": 4}, "devices": 4, "sizes": {"data": 4}, "reduced": False}),
        Finding("info", "mesh-unavailable", f"{kernel}: ZeroDivisionError: on a mesh of x=1, smaller than its own" + long,
                view="diff", data={"raised": "ZeroDivisionError", "detail": ""}),
        Finding("info", "no-elements", "output: no elements, nothing compared" + long, view="diff", data={"shape": [0, 4]}),
        Finding("warning", "all-nan", "output: NaN everywhere on both sides" + long, view="diff", data={"count": 16}),
        # inspector/libtpu/estimate.py
        Finding("warning", "register-spills", "custom-call.7: 182 spill stores and 203 fills per grid step" + long,
                kernel="custom-call.7", view="bundles", data={"chip": "tpu-v5e", "stores": 182, "fills": 203,
                                                     "lines": ["k.py:13"], "bundles_per_step": 4893}),
        Finding("info", "mxu-underused", "custom-call.7: the MXU is busy in 15% of the bundles per grid step" + long,
                kernel="custom-call.7", view="bundles", data={"chip": "tpu-v5e", "mxu_share": 0.15, "bound": "DMA waits"}),
        Finding("info", "time-extrapolated", "custom-call.7: 262,144 grid steps; libtpu simulated two cut grids" + long,
                kernel="custom-call.7", view="fusions", data={"chip": "tpu-v5e", "steps": 262144, "grids": [[1, 1, 64], [1, 4, 64]],
                                                     "cycles_per_step": 747.3}),
        Finding("info", "time-budget", "libtpu's simulation on tpu-v5e would take about 900 s" + long, view="fusions",
                data={"chip": "tpu-v5e", "seconds": 60.0, "memory_bytes": 4 << 30, "why": "..."}),
        Finding("info", "libtpu-aborted", "libtpu ended its probe-1 compile on tpu-v4: Dma latency model" + long,
                view="fusions", data={"chip": "tpu-v4", "reason": "Static LLO profiling of k.1 failed"}),
        Finding("warning", "libtpu-refused", "libtpu does not simulate programs for tpu-v4 (Dma latency model)" + long,
                view="fusions", data={"chip": "tpu-v4", "reason": "Dma latency model is currently only supported on VF/VL/GF/GL"}),
        Finding("warning", "xla-loop-unknown", "fusion.3: inside a while loop whose trip count is known only when it runs" + long,
                view="fusions", data={"chip": "tpu-v5e", "kernels": ["fusion.3"]}),
        Finding("info", "libtpu-dump-unreadable", "a libtpu dump the inspector cannot read" + long, view="fusions",
                data={"chip": "tpu-v5e", "file": "k.1 final_bundles", "why": "no control target legend"}),
        Finding("info", "time-roofline-only", "cpu is not a TPU: no libtpu estimate" + long, view="fusions",
                data={"chip": "cpu"}),
        # inspector/hlo/memory.py
        Finding("error", "hbm-over-capacity", "tpu-v5e: needs 36.18 GiB of HBM per device, 15.75 GiB usable" + long,
                view="memory", data={"chip": "tpu-v5e", "bytes": 38847352832, "limit": 16911433728,
                                     "largest": [{"shape": "bf16[256,4,2048,2048]", "bytes": 8 << 30, "source": "t.py:7",
                                                  "op_name": None, "value": "v"}]}),
    ]


def test_the_examples_cover_every_finding_code_the_core_has():
    codes = _codes_in_the_core()
    assert {"partial-block", "parallel-axis-race", "compile-vmem-oom", "mismatch"} <= codes
    examples = {f.code for f in example_findings("k", "x_ref", "o_ref")}
    assert codes - examples == set(), "a finding code without an example here: add one to example_findings"


@pytest.mark.asyncio
async def test_every_finding_code_renders_in_every_view():
    """Each code, with its data shape, through the overview (table and detail pane), Enter to its
    evidence and back, the Pallas tab's marks, and the printers (show, check)."""
    from inspector.views.printer import overview
    from inspector.views.pallas import pallas_view

    app = InspectorApp(Session("samples/bugs.py:parallel_reduction", "cpu"))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        report = app.report
        k = report.pallas[0]
        inp, out = (o.operand for o in k.call.operands)
        examples = example_findings(k.call.name, inp, out)
        report = dataclasses.replace(report, findings=examples)
        k.findings = [f for f in examples if f.view == "pallas"]
        app._show(app._generation, report)
        await pilot.pause()
        table = app.query_one("#findings", DataTable)
        assert table.row_count == len(examples)
        for row, f in enumerate(examples):
            app.action_tab("overview")
            table.move_cursor(row=row)
            await pilot.pause()
            assert f.message.replace(" ", "") in plain(app, "#finding-detail").replace("\n", "").replace(" ", "")
            await pilot.press("enter")
            await pilot.pause()
            # compile-vmem-oom: its kernel's budget; a view without a tab of its own: the message itself
            expected = "pallas" if f.code == "compile-vmem-oom" else (f.view if f.view in ALL_TABS else "overview")
            assert app.query_one(TabbedContent).active == expected, f.code
            assert f.code in status(app) or expected == "overview"
            if f.view == "pallas":
                plain(app, "#pallas-grid")  # drawn without raising
            await pilot.press("b")
            assert app.query_one(TabbedContent).active == "overview"
        for renderable in (overview(report), pallas_view(report.pallas)):
            console = Console(width=80, record=True, file=io.StringIO())
            console.print(renderable)
            printed = console.export_text()
            assert "Traceback" not in printed
        assert all(f.code in plain_overview(report) for f in examples)


def plain_overview(report) -> str:
    from inspector.views.printer import overview

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(overview(report))
    return console.export_text()


BUGS = [
    pytest.param("dropped_tail", "cpu", [], "output-not-written", None, id="output-not-written"),
    pytest.param("element_offset", "cpu", [], "block-out-of-bounds", "grid step", id="block-out-of-bounds"),
    pytest.param("revisit_not_consecutive", "cpu", [], "output-revisit", "grid step", id="output-revisit"),
    pytest.param("parallel_reduction", "tpu-v5e", [], "parallel-axis-race", "grid step 2 (0, 1)", id="parallel-axis-race"),
    pytest.param("bad_tiling", "cpu", ["block_rows=128"], "partial-block", "grid step 8 (7,)", id="partial-block"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("function, chip, sets, code, shown", BUGS)
async def test_a_kernel_with_each_grid_finding_opens_and_enter_shows_the_evidence(function, chip, sets, code, shown):
    """The kernels that crashed the UI at launch (partial-block, parallel-axis-race) and their
    siblings: the app stays up, Enter on the finding goes to its kernel, step and operand, b back."""
    app = InspectorApp(Session(f"samples/bugs.py:{function}", chip, sets=sets))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert app.report is not None, status(app)
        findings = app.query_one("#findings", DataTable)
        codes = [str(findings.get_row_at(i)[1]) for i in range(findings.row_count)]
        assert code in codes
        findings.move_cursor(row=codes.index(code))
        await pilot.press("enter")
        assert app.query_one(TabbedContent).active == "pallas"
        assert "◀ the finding" in plain(app, "#pallas-grid")
        if shown:
            assert shown in status(app)
        if code in ("output-not-written", "parallel-axis-race", "output-revisit"):
            assert "!" in plain(app, "#pallas-grid").split("other blocks", 1)[1]  # a marked block
        await pilot.press("b")
        assert app.query_one(TabbedContent).active == "overview"
        assert findings.cursor_row == codes.index(code)
        if chip.startswith("tpu"):
            await pilot.press("8")
            assert "tpu." in app.query_one("#text-mosaic", StageText).text  # the Mosaic MLIR


# ---------------------------------------------------------------- crashes, chips, the worker

def test_a_crash_of_the_ui_is_one_line_a_log_and_a_non_zero_exit(monkeypatch, tmp_path):
    from inspector.base.errors import InspectorError
    from inspector.views.tui import app as app_module
    from inspector.views.tui.overview_tab import OverviewTab

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))

    def broken(self, report, diff_verdict=None):
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(OverviewTab, "show", broken)
    monkeypatch.setattr(sys, "argv", ["inspector", "samples/bugs.py:dropped_tail", "--target", "cpu"])
    app = app_module.InspectorApp(Session("samples/bugs.py:dropped_tail", "cpu"))
    with pytest.raises(InspectorError) as raised:
        app.run(headless=True, size=(80, 24))
    message = str(raised.value)
    log = tmp_path / "tui-crash.log"
    assert "\n" not in message and "TypeError: 'int' object is not iterable" in message and str(log) in message
    assert raised.value.exit_code == 1
    assert "Traceback" in log.read_text() and "in broken" in log.read_text()
    assert app.remote._pool is None  # the worker went with it


def test_the_ui_opens_on_the_chip_it_is_given_and_says_why():
    """The chip comes from the one rule every verb takes (compilation/default_target.py), not from
    the file or from what was picked last time: the same chip as the overview in a pipe."""
    session = Session("samples/bugs.py:dropped_tail", "cpu", chip_reason="no --target and no TPU here")
    assert InspectorApp(session).session.chip == "cpu"
    assert session.with_chip("tpu-v6e").chip_reason is None  # picked with `t`: nothing to explain


@pytest.mark.asyncio
async def test_the_target_picker_starts_on_the_current_chip():
    app = InspectorApp(NAIVE.with_chip("tpu-v6e"))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        app.remote.cancel()
        await pilot.press("t")
        await pilot.pause()
        options = app.screen.query_one("#chips")
        assert options.options[options.highlighted].prompt == "tpu-v6e"
        await pilot.press("escape")


@pytest.mark.asyncio
async def test_export_during_the_compile_says_when_it_can_and_counts_read_right():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")  # the worker is still starting: nothing compiled yet
        assert app.report is None and "once the compile is done" in status(app)
        await loaded(pilot)
        assert re.search(r"cpu: \d+ findings? \(\d+ errors?\)", status(app)), status(app)
    from inspector.base.units import count
    assert (count(1, "finding"), count(2, "finding"), count(0, "error")) == ("1 finding", "2 findings", "0 errors")


@pytest.mark.asyncio
async def test_esc_when_idle_keeps_the_worker_and_quit_ends_it_quietly():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        processes = list(app.remote._pool._processes.values())
        await pilot.press("escape")
        assert "nothing is running" in status(app)
        assert app.remote._pool is not None and all(p.is_alive() for p in processes)
    # quit: an idle worker is asked to exit (no signal), so it exits 0; on a machine too busy
    # for it to exit within close()'s wait it is killed (SIGKILL: no handler, nothing printed),
    # never SIGTERM'd (libtpu would print its stack dump)
    # reaped by whichever thread gets there first (the pool's own may, and a join racing it reads
    # None once): ask again until one has
    give_up = time.monotonic() + 15
    while any(p.exitcode is None for p in processes) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert all(p.exitcode in (0, -signal.SIGKILL) for p in processes), [p.exitcode for p in processes]


@pytest.mark.asyncio
async def test_a_switch_cancels_the_compile_in_flight_and_nothing_stale_shows():
    """t while a TPU compile runs: the compile is killed, the old target's result never shows."""
    app = InspectorApp(Session(FLASH.spec, "tpu-v5e", args=FLASH.args, sets=FLASH.sets, use_cache=False))
    shown = []
    original = app._show
    app._show = lambda generation, report: (shown.append((generation == app._generation, report.chip.name)),
                                            original(generation, report))
    cancelled = []
    cancel = app.remote.cancel
    app.remote.cancel = lambda *a, **k: cancelled.append(cancel(*a, **k)) or cancelled[-1]
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):  # until the worker really is compiling
            await asyncio.sleep(0.05)
            if app.remote.busy:
                break
        await pilot.press("t")
        await pilot.pause()
        options = app.screen.query_one("#chips")
        options.highlighted = [o.prompt for o in options.options].index("cpu")
        await pilot.press("enter")
        assert "compiling" in plain(app, "#overview-panel") and app.query_one("#text-hlo", StageText).text == ""
        await loaded(pilot)
        assert cancelled and cancelled[0] is True  # a compile was in flight and was stopped
        assert app.report.chip.name == "cpu"
        assert all(chip == "cpu" for current, chip in shown if current)
        assert "on cpu" in app.sub_title


def _hold_the_first_compile(app):
    """The worker's compile (the second call of a load) waits for the returned Event; the
    lowering before it runs as ever. Every call is noted: (method, "ok" or the exception's name)."""
    held, calls = threading.Event(), []
    call = app.remote.call

    def holding(session, method, *args, **kwargs):
        if method == "report" and not held.is_set() and not any(m == "report" for m, _ in calls):
            calls.append(("report", "held"))
            held.wait(120)
        try:
            result = call(session, method, *args, **kwargs)
        except Exception as err:
            calls.append((method, type(err).__name__))
            raise
        calls.append((method, "ok"))
        return result

    app.remote.call = holding
    return held, calls


async def _until(condition, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert condition()


@pytest.mark.asyncio
async def test_stages_arrive_as_they_are_ready_with_the_stage_and_its_seconds():
    """While the compile runs (held here), the jaxpr and StableHLO are already on screen and the
    status line and overview name the stage and its seconds, live; then the rest arrives, the
    cursor in the jaxpr stays where the user left it, and the status says what each stage took."""
    app = InspectorApp(NAIVE)
    now = [1000.0]
    app.clock = lambda: now[0]
    held, calls = _hold_the_first_compile(app)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert "tracing and lowering for cpu… 0 s" in status(app)
        # the lowering is shown, and the worker's thread has gone on to ask for the (held) compile
        await _until(lambda: app.lowered is not None and calls[-1:] == [("report", "held")])
        assert app.report is None
        assert "{ lambda" in app.query_one("#text-jaxpr", StageText).text
        assert "stablehlo.dot_general" in app.query_one("#text-stablehlo", StageText).text
        assert "the optimized HLO comes" in app.query_one("#text-hlo", StageText).text
        assert "compiling for cpu… 0 s" in status(app) and "jaxpr and StableHLO are ready" in status(app)
        assert "naive" in plain(app, "#overview-panel") and "compiling for cpu… 0 s" in plain(app, "#findings-title")
        now[0] += 12
        await _until(lambda: "compiling for cpu… 12 s" in status(app))  # the ticker redraws twice a second
        assert "compiling for cpu… 12 s" in plain(app, "#findings-title")
        await pilot.press("2")
        jaxpr = app.query_one("#text-jaxpr", StageText)
        jaxpr.go_to_row(3)
        now[0] += 3
        held.set()
        await loaded(pilot)
        assert app.report is not None and jaxpr.cursor_location[0] == 3
        assert app.query_one("#text-hlo", StageText).text.startswith("HloModule")
        assert "lowered 0.0 s, compiled 15 s" in status(app)
        assert [m for m, outcome in calls if outcome == "ok"] == ["lowering", "report"]


@pytest.mark.asyncio
async def test_new_params_mid_compile_void_the_held_compile_and_nothing_stale_shows():
    """x while the compile runs: the lowering shown goes at once, the old compile is never asked
    of the worker (a cancel between a load's two calls voids the second), the new one arrives."""
    app = InspectorApp(NAIVE)
    held, calls = _hold_the_first_compile(app)
    shown = []
    for name in ("_lowered", "_show"):
        original = getattr(app, name)
        setattr(app, name, lambda generation, report, name=name, original=original: (
            shown.append((name, generation == app._generation, report.target.params.get("causal", True),
                          "causal=False" not in app.session.sets)),
            original(generation, report)))
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: app.lowered is not None)
        await pilot.press("x")  # the lowering knows the parameters: no need to wait for the compile
        await pilot.pause()
        field = app.screen.query_one("#param-causal")
        field.value = "False"
        field.focus()
        await pilot.press("enter")
        assert app.session.sets == ["causal=False"]
        # the old lowering went at once; the new one may be here already (a warm worker is quick)
        assert app.lowered is None or app.lowered.target.params["causal"] is False
        held.set()
        await loaded(pilot)
        assert app.report.target.params["causal"] is False
        assert ("report", "CancelledError") in calls  # the old compile, refused before it reached the worker
        assert [m for m, outcome in calls if outcome == "ok"] == ["lowering", "lowering", "report"]
        # what is drawn is always of the parameters asked for at the time
        assert all(causal is asked for _, current, causal, asked in shown if current)
        assert ("_lowered", True, False, False) in shown and ("_show", True, False, False) in shown
        assert ("_show", True, True, True) not in shown  # the first compile never arrived


@pytest.mark.asyncio
async def test_esc_mid_compile_keeps_the_lowered_stages_and_says_cancelled():
    app = InspectorApp(NAIVE)
    held, calls = _hold_the_first_compile(app)
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: app.lowered is not None)
        await pilot.press("escape")
        assert "cancelled" in status(app) and "cancelled" in plain(app, "#findings-title")
        assert "{ lambda" in app.query_one("#text-jaxpr", StageText).text
        assert "cancelled" in app.query_one("#text-hlo", StageText).text
        held.set()
        await loaded(pilot)
        assert app.report is None and calls[-1] == ("report", "CancelledError")
        await asyncio.sleep(0.6)
        assert "cancelled" in status(app)  # the ticker stopped with the compile


@pytest.mark.asyncio
async def test_the_footer_gives_each_tabs_keys_and_a_tab_switch_mounts_nothing():
    """Textual's footer rebuilt a widget per key on every focus change (and kept the old ones
    alive): a third of a tab switch's CPU. Ours redraws one line, and only when the keys change."""
    from inspector.views.tui.footer import KeyFooter

    app = InspectorApp(NAIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        footer = app.query_one(KeyFooter)
        shown = {}
        for key in "1245":
            await pilot.press(key)
            await pilot.pause()
            shown[key] = footer.render().plain
        assert "q quit" in shown["1"] and " l link" not in shown["1"] and " s sort" not in shown["1"]
        assert shown["2"].startswith(" l link") and shown["5"].startswith(" s sort")
        widgets = len(list(app.query("*")))
        for _ in range(5):
            await pilot.press("2", "5", "1")
        await pilot.pause()
        assert len(list(app.query("*"))) == widgets
        # where every key with its words does not fit 80 columns, the tab's keys keep theirs
        await pilot.press("6")
        await pilot.pause()
        line = footer.render().plain
        assert len(line) <= 80 and " q" in line, line


# ---------------------------------------------------------------- keys, params, palette

@pytest.mark.asyncio
async def test_params_are_checked_against_the_signature_and_inspect_choices():
    from inspector.compilation.static_params import parse_value
    from inspector.views.tui.screens import check_params

    current, choices = {"block_q": 128, "causal": True}, {"block_q": [128, 256, 512]}
    assert check_params({"block_q": "256", "causal": "True"}, current, choices, parse_value) == ({"block_q": "256"}, [], [])
    _, errors, _ = check_params({"block_q": "big"}, current, choices, parse_value)
    assert errors and "expected int" in errors[0]
    _, errors, _ = check_params({"causal": "3"}, current, choices, parse_value)
    assert errors and "expected bool" in errors[0]
    changed, errors, warnings = check_params({"block_q": "384"}, current, choices, parse_value)
    assert changed == {"block_q": "384"} and not errors and "INSPECT offers" in warnings[0]
    # the signature's own keyword parameters are offered, read without importing the file
    assert Session("samples/attention.py:flash").keyword_params() == ({"block_q": 512, "block_k": 512, "causal": True}, False)

    app = InspectorApp(FLASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("x")
        await pilot.pause()
        assert {i.id for i in app.screen.query("Input")} >= {"param-block_q", "param-block_k", "param-causal"}
        field = app.screen.query_one("#param-block_q")
        field.value = "big"
        field.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, ParamsScreen) and "expected int" in plain(app.screen, "#params-problem")
        field.value = "256"
        await pilot.press("enter")
        await loaded(pilot)
        assert app.report.target.params["block_q"] == 256


@pytest.mark.asyncio
async def test_pallas_home_end_and_go_to_step():
    app = InspectorApp(FLASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("6")
        tab = app.query_one(PallasTab)
        await pilot.press("end")
        assert tab.step == 15 and "step 16 of 16" in plain(app, "#pallas-grid")
        await pilot.press("home")
        assert tab.step == 0
        await pilot.press("g", *"0,2,3", "enter")
        assert "grid point (0, 2, 3)" in plain(app, "#pallas-grid")
        await pilot.press("g", *"5", "enter")
        assert tab.step == 4
        grid = plain(app, "#pallas-grid")
        assert all(f"{o.operand} " in grid for o in app.report.pallas[0].call.operands)  # every operand
        assert "named by a finding" in grid  # the legend
        assert "pl.CostEstimate(flops=" in plain(app, "#pallas-body")


@pytest.mark.asyncio
async def test_the_palette_has_the_apps_own_commands_and_help_fits_24_rows():
    app = InspectorApp(NAIVE)
    async with app.run_test(size=(80, 24)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Target chip", "Parameters", "Export"} <= set(titles) and any("theme" in t.lower() for t in titles)
        await pilot.press("question_mark")
        await pilot.pause()
        help_box = app.screen.query_one("#help")
        assert help_box.region.height <= 24 and help_box.max_scroll_y == 0  # nothing cut, nothing to scroll
        await pilot.press("escape")
        app.remote.cancel()


@pytest.mark.asyncio
@pytest.mark.libtpu
@pytest.mark.slow
async def test_time_and_mosaic_passes_on_a_key():
    """T estimates time with libtpu: the Bundles tab shows each kernel's bundles and the Fusions
    tab an est. time column; M compiles with Mosaic's dumps: the Mosaic passes tab lists them."""
    app = InspectorApp(Session("samples/matmul.py:tiled", "tpu-v5e", args="bf16[256,512] bf16[512,256]"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "press T" in plain(app, "#bundles-body")
        await pilot.press("T")
        await loaded(pilot)
        assert app.session.time and app.query_one(TabbedContent).active == "bundles"
        assert "VLIW bundles per kernel on tpu-v5e" in plain(app, "#bundles-body") and app.report.time is not None
        assert any(k.estimate_source for k in app.report.fusions.kernels)
        await pilot.press("M")
        await loaded(pilot)
        assert app.query_one(TabbedContent).active == "mosaic-passes"
        table = app.query_one("#mosaic-passes-table", DataTable)
        assert "relayout-insertion" in [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


def test_the_help_lists_every_key_the_app_and_its_tabs_bind():
    """The help is made from the bindings (D, measure on the TPU, was once missing from a hand list)."""
    from inspector.views.tui.screens import help_rows, tab_bindings

    listed = {k for keys, _ in help_rows(InspectorApp.BINDINGS) for k in keys}
    bound = [b.key for b in InspectorApp.BINDINGS] + [b.key for _, bs in tab_bindings() for b in bs]
    assert {k for key in bound for k in key.split(",")} <= listed
    assert "D" in listed and {"left", "g", "left_square_bracket"} <= listed


@pytest.mark.asyncio
async def test_one_meaning_per_key_one_keys_entry_a_screenshot_here_and_no_stale_status(tmp_path, monkeypatch):
    """A tab switch leaves no message about another tab ("stablehlo line 4 comes from ...") in the
    status line; c compares on the Pallas tab too (y copies its CostEstimate); the palette has one
    "Keys", and its Screenshot saves in the current folder and says where (Textual's saved into a
    ~/Downloads that may not exist)."""
    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        summary = status(app)
        await pilot.press("3", "down", "down", "down")
        await pilot.pause()
        assert "stablehlo line" in status(app)
        await pilot.press("5")
        await pilot.pause()
        assert "stablehlo" not in status(app) and status(app) == summary
        commands = list(app.get_system_commands(app.screen))
        assert [c.title for c in commands].count("Keys") == 1
        monkeypatch.chdir(tmp_path)
        next(c for c in commands if c.title == "Screenshot").callback()
        await pilot.pause(0.2)
        saved, = tmp_path.glob("*.svg")
        assert f"screenshot saved: {saved}" in status(app) and "<svg" in saved.read_text()
        await pilot.press("6", "c")
        await pilot.pause()
        assert type(app.screen).__name__ == "CompareScreen"
        await pilot.press("escape")
        app.remote.cancel()


@pytest.mark.asyncio
async def test_after_f_a_findings_message_stays_with_its_fix_beside_it():
    """After F the message column read "fix #1 ..." in place of each finding's own message."""
    from inspector.base.findings import Finding
    from inspector.base.fix_model import Change, Fix, FixResult, Trial

    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        chip = app.report.chip.name
        finding = Finding("error", "compile-vmem-oom", "the kernel needs 48 MiB of VMEM; the limit is 16 MiB")
        change = Change(kind="params", kernel="", call=None, value={"causal": False})
        fixes = FixResult(target=NAIVE.spec, chips=[chip], before=[], refused=[], best={}, not_tried=[],
                          fixes=[Fix(change=change, trials=[Trial(chip=chip, compiles=True)])],
                          answers={f"{finding.code}@{chip}": [0]})
        app.report = dataclasses.replace(app.report, findings=[finding], fixes=fixes)
        await pilot.pause()
        message = app.query_one("#findings", DataTable).get_row_at(0)[2].plain
        assert message == f"{finding.message}  fix #1"
        app.remote.cancel()


@pytest.mark.asyncio
async def test_d_and_p_say_how_long_they_have_run_where_they_show(monkeypatch):
    """d (a minute) said "running…" with no time; P, M and T showed their tab's idle text ("press T")
    while their compile ran: each says its time so far, on its tab and the status line, until it ends."""
    from concurrent.futures import Future

    from inspector.remote import Remote

    held: list[Future] = []  # the diff and P's compile: they last until the test ends them

    def call(self, session, method, *args, epoch=None):
        if method != "diff" and not (method == "report" and (session.passes or session.buffers)):
            return real(self, session, method, *args, epoch=epoch)
        held.append(Future())
        return held[-1].result(timeout=120)

    def cancel(self, wait=False):
        for future in held:
            future.cancel()
        return real_cancel(self, wait)

    real, real_cancel = Remote.call, Remote.cancel
    monkeypatch.setattr(Remote, "call", call)
    monkeypatch.setattr(Remote, "cancel", cancel)

    async def until_held(pilot, n):
        while len(held) < n:
            await pilot.pause(0.05)

    app = InspectorApp(NAIVE)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        now = [1000.0]
        app.clock = lambda: now[0]
        await pilot.press("d")
        await until_held(pilot, 1)
        now[0] += 62
        await until(pilot, lambda: "running the diff, 1:02" in status(app))
        assert "running the diff, 1:02" in plain(app, "#diff-body")
        held[0].set_exception(RuntimeError("no reference"))
        await loaded(pilot)
        assert "diff failed in 1:02: RuntimeError: no reference" in status(app)
        await pilot.pause(0.7)
        assert "running the diff" not in status(app)  # the ticker stopped with it
        await pilot.press("P")
        await until_held(pilot, 2)
        now[0] += 12
        await until(pilot, lambda: "compiling for cpu with pass dumps… 12 s" in plain(app, "#passes-title"))
        await pilot.press("escape")
        await pilot.pause()
        assert "cancelled" in plain(app, "#passes-title") and "12 s" not in plain(app, "#passes-title")
        app.session = app.session.with_passes(False)
        await pilot.press("B")  # the Memory tab's own: the buffer assignment
        await until_held(pilot, 3)
        now[0] += 9
        await until(pilot, lambda: "compiling for cpu with its buffer assignment… 9 s" in plain(app, "#memory-body"))


@pytest.mark.asyncio
async def test_g_opens_the_backward_pass_with_flashs_backward_kernels_and_g_again_the_forward():
    app = InspectorApp(FLASH)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert [k.call.name for k in app.report.pallas] == ["flash_attention_fwd"]
        drawn = []  # every status line drawn: an in-process worker can finish the load within one pause
        draw = app.status_line._draw
        app.status_line._draw = lambda text, style: (drawn.append(str(text)), draw(text, style))[1]
        await pilot.press("G")
        await pilot.pause()
        assert any("the backward pass" in line for line in drawn) and "(backward)" in app.sub_title
        await loaded(pilot)
        kernels = [k.call.name for k in app.report.pallas]
        assert {"flash_attention_bwd_dkdv", "flash_attention_bwd_dq"} <= set(kernels), kernels
        await pilot.press("G")
        await loaded(pilot)
        assert [k.call.name for k in app.report.pallas] == ["flash_attention_fwd"] and "(backward)" not in app.sub_title


def test_docs_keys_table_names_every_key_the_help_lists():
    """docs/tui.md's Keys and the help come from one table, the app's and its tabs' bindings: a
    key bound (G, y) and left out of the docs fails here."""
    from inspector.views.tui.screens import _shown, help_rows
    from inspector.views.tui.tabs import TAB_VIEWS

    docs = (ROOT / "docs" / "tui.md").read_text()
    keys_section = docs.split("## Keys", 1)[1].split("\n## ", 1)[0]
    said = set(re.findall(r"`([^`]+)`", keys_section)) | set(re.findall(r"\b(Enter|Esc|Home|End|ctrl\+\w)\b", keys_section))
    tab_keys = {v.key for v in TAB_VIEWS}
    missing = [key for keys, _ in help_rows(InspectorApp.BINDINGS) for key in keys
               if key not in tab_keys and not key.startswith("shift+") and _shown(key) not in said]
    assert not missing, missing
    assert all(f"| `{v.key}` |" in docs for v in TAB_VIEWS)
