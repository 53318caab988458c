"""The terminal UI as a person uses it (Textual's pilot): it opens before the compile ends,
tabs, search, cross-links between stages, grid stepping, target switching, errors in place;
snapshots of each tab at 100x30; and one run in a real terminal (tmux)."""
import asyncio
import io
import os
import shutil
import subprocess
import sys
import time

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static, TabbedContent

from conftest import DATA, ROOT
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.pallas_tab import PallasTab
from inspector.views.tui.stage_text import StageText

NAIVE = Session("samples/attention.py:naive", "cpu", "f32[1,128,32] f32[1,128,32] f32[1,128,32]")
FLASH = Session("samples/attention.py:flash", "cpu", "bf16[1,512,128] bf16[1,512,128] bf16[1,512,128]",
                sets=["block_q=128", "block_k=128"])
SIZE = (100, 30)


async def loaded(pilot):
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def plain(app, selector: str) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


def status(app) -> str:
    return plain(app, "#status")


def test_opens_before_the_compile_and_fills_in():
    async def run():
        app = InspectorApp(NAIVE)
        async with app.run_test(size=SIZE) as pilot:
            assert "compiling" in plain(app, "#overview-panel")
            await loaded(pilot)
            assert app.report is not None and "naive" in plain(app, "#overview-panel")
            assert app.query_one("#text-hlo", StageText).text.startswith("HloModule")
    asyncio.run(run())


def test_number_keys_switch_tabs_and_search_finds_and_repeats():
    async def run():
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
    asyncio.run(run())


def test_a_jaxpr_line_links_to_the_hlo_from_the_same_source_line():
    async def run():
        app = InspectorApp(NAIVE)
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            await pilot.press("2", "slash", *"dot_general", "enter")
            jaxpr = app.query_one("#text-jaxpr", StageText)
            source = jaxpr.source_of(jaxpr.cursor_location[0])
            assert source and source.startswith("samples/attention.py:")
            assert "comes from" in status(app)
            await pilot.press("l")
            assert app.query_one(TabbedContent).active == "stablehlo" or app.query_one(TabbedContent).active == "hlo"
            active = app.query_one(f"#text-{app.query_one(TabbedContent).active}", StageText)
            assert active.source_of(active.cursor_location[0]) == source
    asyncio.run(run())


def test_pallas_grid_steps_with_the_arrow_keys():
    async def run():
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
    asyncio.run(run())


def test_fusions_sort_and_findings_jump_to_their_view():
    async def run():
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
    asyncio.run(run())


def test_switching_target_recompiles_for_the_tpu():
    async def run():
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
    asyncio.run(run())


def test_editing_params_reanalyses():
    async def run():
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
    asyncio.run(run())


def test_errors_show_in_place():
    async def run():
        app = InspectorApp(Session(f"{DATA}/funcs.py:raises_in_trace", "cpu"))
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            assert "TypeError" in plain(app, "#overview-panel")
            assert "funcs.py:23" in status(app)
    asyncio.run(run())


def test_diff_runs_on_demand():
    async def run():
        app = InspectorApp(Session("samples/bugs.py:dropped_tail", "cpu"))
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            await pilot.press("d")
            await loaded(pilot)
            assert app.query_one(TabbedContent).active == "diff"
            assert "blocks wrong" in plain(app, "#diff-body")
            assert app.diff_verdict.startswith("WRONG")
    asyncio.run(run())


def _snapshot_app(tab_keys):
    async def before(pilot):
        await loaded(pilot)
        await pilot.press(*tab_keys)
        await pilot.pause()
    return before


@pytest.mark.parametrize("session, keys", [
    pytest.param(NAIVE, ["1"], id="overview"),
    pytest.param(NAIVE, ["2"], id="jaxpr"),
    pytest.param(NAIVE, ["3"], id="stablehlo"),
    # No HLO snapshot: its stack-frame table (and so every line number) depends on who compiled
    # the module first (the compile cache keeps that text); the pilot tests above cover the tab.
    pytest.param(NAIVE, ["5"], id="fusions"),
    pytest.param(FLASH, ["6", "right"], id="pallas"),
    pytest.param(NAIVE, ["7"], id="diff"),
    pytest.param(NAIVE, ["question_mark"], id="help"),
])
def test_snapshots(snap_compare, session, keys):
    assert snap_compare(InspectorApp(session), terminal_size=SIZE, run_before=_snapshot_app(keys))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/setup installs it)")
def test_in_a_real_terminal():
    """Start the UI in tmux, switch tabs, quit: what a person does first."""
    name = f"inspector-test-{os.getpid()}"
    cmd = f"cd {ROOT} && {sys.executable} -m inspector samples/attention.py:naive --args 'f32[1,64,32] f32[1,64,32] f32[1,64,32]'"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30", cmd], check=True)
    try:
        screen = lambda: subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
        deadline = time.time() + 60
        while "findings" not in screen() and time.time() < deadline:
            time.sleep(0.5)
        assert "Overview" in screen() and "naive" in screen()
        subprocess.run(["tmux", "send-keys", "-t", name, "4"], check=True)
        time.sleep(1)
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


def test_watch_reanalyses_when_the_file_is_saved(tmp_path):
    source = tmp_path / "watched.py"
    source.write_text("import jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x)\nINSPECT = {'f': {'args': 'f32[8]'}}\n")

    async def run():
        app = InspectorApp(Session(f"{source}:f", "cpu"), watch=True)
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            assert "sin" in app.report.stages.jaxpr
            await asyncio.sleep(1.2)  # the first tick records the file's time
            source.write_text(source.read_text().replace("jnp.sin", "jnp.cos"))
            os.utime(source, (time.time() + 5, time.time() + 5))
            for _ in range(40):
                await asyncio.sleep(0.25)
                await app.workers.wait_for_complete()
                if "cos" in (app.report.stages.jaxpr or ""):
                    break
            assert "cos" in app.report.stages.jaxpr
    asyncio.run(run())


# ---------------------------------------------------------------- every finding, every view

def _codes_in_the_core() -> set[str]:
    """Every finding code the analyses can produce, read from their source: a new code fails
    the test below until it has an example there."""
    import re

    codes = set()
    for path in (ROOT / "inspector").rglob("*.py"):
        text = path.read_text()
        for m in re.finditer(r'Finding\(\s*(?:"\w+"(?: if [^,]+ else "\w+")?|\w+),\s*("[\w-]+"(?:\s+if [^,]+? else\s+"[\w-]+")?)', text):
            codes.update(re.findall(r'"([a-z][a-z0-9-]+)"', m[1]))
        codes.update(re.findall(r'"(interpret-[\w-]+)"', text))
    return codes


def example_findings(kernel: str, inp: str, out: str) -> list:
    """One finding per code, with the data shape the analysis gives it (see the module named)."""
    from inspector.findings import Finding

    where = lambda operand=None: dict(kernel=kernel, operand=operand, view="pallas")
    long = " and a long tail that a table cell would cut" * 4
    oom = {"used_bytes": 25165824, "limit_bytes": 16777216, "exceeded_by_bytes": 8388608, "scope": "scoped",
           "kernel": kernel, "op_name": None, "chip": "tpu-v5e",
           "allocations": [{"size_bytes": 8388608, "role": "operand", "operand_index": 0, "window_shape": "[1024,1024]",
                            "buffering": 2}]}
    return [
        # inspector/pallas/grid_walk.py
        Finding("error", "block-out-of-bounds", f"{out}: grid point (1,) maps to block (128, 0)" + long,
                data={"grid_point": [1, 0], "block": [128, 0]}, **where(out)),
        Finding("warning", "partial-block", f"{inp}: the last block along dim 0 is padded" + long,
                data={"dim": 0, "array": 500, "block": 128}, **where(inp)),
        Finding("error", "output-not-written", f"{out}: 1 of 4 output blocks are never written" + long,
                data={"missing_blocks": [[3, 0]], "count": 1}, **where(out)),
        Finding("error", "output-revisit", f"{out}: 1 output block(s) are written in runs" + long,
                data={"blocks": [[0, 0]], "count": 1}, **where(out)),
        Finding("error", "parallel-axis-race", f"{out}: output block (0, 0) is written from 4 indices" + long,
                data={"axis": 1, "blocks": 4}, **where(out)),
        Finding("info", "walk-needs-prefetch", f"{kernel}: index maps read scalar-prefetch operands" + long, **where()),
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
        Finding("error", "shared-memory-over-limit", f"{kernel} on h100: needs 300 KiB" + long,
                data={"chip": "h100", "bytes": 307200, "limit": 232448}, **where()),
        # inspector/pallas/check.py, inspector/report.py, inspector/compile_errors.py
        Finding("info", "no-pallas-call", "f has no pallas_call: nothing to check" + long),
        Finding("info", "pallas-interpreted", "Pallas kernels are interpreted on the CPU backend" + long, view="hlo"),
        Finding("error", "compile-vmem-oom", "tpu-v5e: VMEM out of memory (scoped)" + long, kernel=kernel,
                view="overview", data=oom),
        Finding("error", "compile-error", "tpu-v5e: INVALID_ARGUMENT: something" + long, view="overview",
                data={"chip": "tpu-v5e"}),
        # inspector/diff.py
        Finding("error", "interpret-out-of-bounds", f"{kernel}: x (input): block index (9, 0) is out of bounds" + long,
                view="diff"),
        Finding("error", "interpret-revisit", f"{kernel}: the interpreter refused a revisit" + long, view="diff"),
        Finding("error", "kernel-raised", f"{kernel}: ValueError raised while running" + long, view="diff"),
        Finding("error", "race-detected", f"{kernel}: the interpreter's race detector saw two cores" + long, view="diff"),
        Finding("error", "mismatch", "output: 13312 of 128000 elements outside atol" + long, view="diff"),
    ]


def test_the_examples_cover_every_finding_code_the_core_has():
    codes = _codes_in_the_core()
    assert {"partial-block", "parallel-axis-race", "compile-vmem-oom", "mismatch"} <= codes  # the scan works
    examples = {f.code for f in example_findings("k", "x_ref", "o_ref")}
    assert codes - examples == set(), "a finding code without an example here: add one to example_findings"


def test_every_finding_code_renders_in_every_view():
    """Each code, with its data shape, through the overview (table and detail pane), Enter to its
    evidence and back, the Pallas tab's marks, and the printers (show, check)."""
    from inspector.views.printer import overview
    from inspector.views.pallas import pallas_view

    async def run():
        app = InspectorApp(Session("samples/bugs.py:parallel_reduction", "cpu"))
        async with app.run_test(size=(80, 24)) as pilot:
            await loaded(pilot)
            report = app.report
            k = report.pallas[0]
            inp, out = (o.operand for o in k.call.operands)
            examples = example_findings(k.call.name, inp, out)
            report.findings = examples
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
                assert app.query_one(TabbedContent).active == (f.view or "overview"), f.code
                assert f.code in status(app) or f.view in (None, "overview")
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
    asyncio.run(run())


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


@pytest.mark.parametrize("function, chip, sets, code, shown", BUGS)
def test_a_kernel_with_each_grid_finding_opens_and_enter_shows_the_evidence(function, chip, sets, code, shown):
    """The kernels that crashed the UI at launch (partial-block, parallel-axis-race) and their
    siblings: the app stays up, Enter on the finding goes to its kernel, step and operand, b back."""
    async def run():
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
    asyncio.run(run())
