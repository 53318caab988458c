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
