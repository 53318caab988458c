"""The terminal UI on a GPU target, deviceless (the worker on a thread of this process): the target
picker offers the GPUs XLA:GPU compiles for, and samples/gpu_matmul.py:matmul on h100 shows its
overview, fusions, and in the Pallas tab the kernel as XLA:GPU launched it (shared memory,
registers, spills)."""
from __future__ import annotations

import io

import re

import pytest
from rich.console import Console
from textual.widgets import Static, TabbedContent

from conftest import loaded, until
from inspector.families.gpu.kernels.ptxas import ptxas_path
from inspector.jax_internals.cuda_topology import plugin_missing
from inspector.session import Session
from inspector.views.tui.app import InspectorApp

pytestmark = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra is not installed")


def plain(app, selector: str) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


@pytest.mark.asyncio
async def test_gpu_matmul_on_h100_in_the_ui(worker_in_process):
    app = InspectorApp(Session("samples/gpu_matmul.py:matmul", "h100"))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.report is not None and app.report.stages.compile_error is None
        overview = plain(app, "#overview-panel")
        assert "compiled by XLA:GPU" in overview and "libtpu" not in overview
        await pilot.press("5")
        await until(pilot, lambda: "1 kernels" in plain(app, "#fusions-summary"))
        await pilot.press("6")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "pallas"
        body = plain(app, "#pallas-body")
        # the kernel as XLA:GPU launched it: the Pallas tab had no GPU figures (registers, spills)
        assert "XLA:GPU's kernels for h100" in body and "registers/thread" in body and "spills" in body
        row = next(line for line in body.splitlines() if line.strip().startswith("kernel ") and "x1x1" in line)
        assert "4x4x1" in row and "96 KiB" in row  # 128x128 tiles of a 512^2 matmul, Triton's 3 stages
        if ptxas_path():
            assert re.search(r"KiB\s+\d+\s+0 B\b", row)  # shared memory, then registers; no spills
        await pilot.press("t")
        await pilot.pause()
        offered = [o.prompt for o in app.screen.query_one("#chips").options]
        assert {"h100", "h200", "a100"} <= set(offered) and "b200" not in offered  # b200: spec only
        assert offered[app.screen.query_one("#chips").highlighted] == "h100"
        await pilot.press("escape")


@pytest.mark.asyncio
async def test_the_palette_and_help_say_what_times_t_on_a_gpu(worker_in_process):
    """T on a GPU estimates each kernel's floor (families/gpu/time.py), not libtpu's simulation: the
    palette and the help said libtpu for it whatever the chip. The words are the family's (FamilyInfo)."""
    app = InspectorApp(Session("samples/gpu_matmul.py:reference", "h100", args="bf16[16,16] bf16[16,16]"))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Estimate time"] == ("each kernel's floor from its bytes, flops and occupancy: "
                                             "est. time in the Fusions tab (T)")
        assert "ranked by each kernel's time floor" in commands["Tune"] and "libtpu" not in commands["Tune"]
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = _help_text(app)
        assert "time per kernel: each kernel's time floor; measured on the GPU" in help_text and "libtpu" not in help_text
        await pilot.press("escape", "T")
        await loaded(pilot)
        await pilot.press("T")
        await pilot.pause()
        assert "already estimated (each kernel's time floor): est. time in the Fusions tab" in plain(app, "#status")


def _help_text(app) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    for static in app.screen.query("#help Static"):
        console.print(static.content)
    return console.export_text()


def test_the_help_words_t_and_d_by_the_targets_family():
    from inspector.base.chips import get_chip
    from inspector.families import family_of
    from inspector.views.tui.screens import help_rows

    def row(chip: str) -> str:
        return next(does for _, does in help_rows(InspectorApp.BINDINGS, family_of(get_chip(chip)).info)
                    if does.startswith("time per kernel"))

    assert row("tpu-v5e") == "time per kernel: libtpu's estimate; measured on the TPU"
    assert row("h100") == "time per kernel: each kernel's time floor; measured on the GPU"
    assert row("cpu") == "time per kernel: the roofline only; measured on a TPU or GPU"
