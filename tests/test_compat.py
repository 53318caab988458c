"""What must work on every jax the inspector declares (inspector.jax_internals.TESTED_JAX): load a
target, every view on a plain function and a Pallas kernel, one TPU compile, check, diff, the UI.
The whole suite runs on the development versions (.ci/constraints.txt); `.ci/compat` runs the
tests marked `compat` (these, and every JAX-shipped kernel through every view) on each other tested
jax, in its own environment."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import pytest

from conftest import ROOT, loaded
from inspector import jax_internals
from inspector.cli import main
from inspector.results.view_table import SHOW_VIEWS as VIEWS

pytestmark = pytest.mark.compat

NAIVE = ["samples/attention.py:naive", "--args", "f32[1,128,32] f32[1,128,32] f32[1,128,32]"]
FLASH = ["samples/attention.py:flash", "--args", "bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]"]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), isolate=False)
    out, err = capsys.readouterr()
    return code, out, err


def test_this_jax_is_one_the_inspector_declares():
    assert jax.__version__ in jax_internals.TESTED_JAX and jax_internals.check_version() is None


@pytest.mark.parametrize("target", [NAIVE, FLASH], ids=["naive", "flash"])
def test_every_view_on_cpu(capsys, target):
    for view in VIEWS:
        code, out, err = cli(capsys, "show", *target, "--view", view)
        assert code == 0 and out.strip() and "analysis-failed" not in out + err, (view, out, err)
    code, out, _ = cli(capsys, "show", *target, "--json")
    report = json.loads(out)
    assert code == 0 and report["stages"] and ("flash" not in target[0] or report["pallas"])


@pytest.mark.libtpu
def test_a_tpu_compile_shows_its_mosaic_and_fits(capsys):
    code, out, err = cli(capsys, "show", *FLASH, "--target", "tpu-v5e", "--view", "mosaic")
    assert code == 0 and "tpu.memory_space<vmem>" in out, err
    code, out, err = cli(capsys, "check", *FLASH, "--target", "tpu-v5e")
    assert code == 0 and "fits" in out and "DOES NOT FIT" not in out, out + err


@pytest.mark.slow
def test_diff_passes_a_correct_kernel_and_catches_a_wrong_one(capsys):
    code, out, err = cli(capsys, "diff", *FLASH)
    assert code == 0, out + err
    code, out, err = cli(capsys, "diff", "samples/bugs.py:dropped_tail")
    assert code == 1 and "blocks wrong" in out, out + err


@pytest.mark.asyncio
async def test_the_ui_opens_a_pallas_kernel(worker_in_process):
    from textual.widgets import TabbedContent

    from inspector.session import Session
    from inspector.views.tui.app import InspectorApp

    app = InspectorApp(Session(FLASH[0], "cpu", args=FLASH[2]))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert app.report is not None and app.report.pallas
        await pilot.press("6")
        assert app.query_one(TabbedContent).active == "pallas"


def test_an_untested_jax_is_a_note_once_and_views_still_work():
    """As on a newer jax: one note on stderr, the view on stdout, exit 0."""
    code = (f"import sys, inspector.jax_internals as j; j.TESTED_JAX = ('0.0.1',); from inspector.cli import main; "
            f"sys.exit(main({['show', *NAIVE, '--view', 'fusions']!r}, isolate=False))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, NO_COLOR="1", COLUMNS="100"))
    assert run.returncode == 0 and "fusion" in run.stdout, run.stderr
    notes = [line for line in run.stderr.splitlines() if "untested" in line]
    assert len(notes) == 1 and jax.__version__ in notes[0]


def test_jax_internals_laid_out_differently_are_findings_not_crashes(capsys, monkeypatch):
    """As on a jax that moved what jax_internals reads: source locations, the jaxpr printer's options
    and the pallas_call reader all fail; every view still prints, the Pallas view says what it could not read."""
    from jax._src import core, source_info_util

    from inspector.pallas import discovery

    def moved(*args, **kwargs):
        raise AttributeError("moved in this jax")

    pretty_print = core.Jaxpr.pretty_print

    def no_source_info(self, *args, source_info=False, **kwargs):
        if source_info:
            raise TypeError("pretty_print() got an unexpected keyword argument 'source_info'")
        return pretty_print(self, *args, **kwargs)

    monkeypatch.setattr(source_info_util, "user_frame", moved)
    monkeypatch.setattr(core.Jaxpr, "pretty_print", no_source_info)
    monkeypatch.setattr(discovery, "read_pallas_calls", moved)
    flash = ["samples/attention.py:flash", "--args", "bf16[1,384,128] bf16[1,384,128] bf16[1,384,128]", "--no-cache"]
    for view in VIEWS:
        code, out, err = cli(capsys, "show", *flash, "--view", view)
        assert code == 0 and out.strip() and "Traceback" not in out + err, (view, out, err)
        if view == "pallas":
            assert "could not read the pallas_calls of this program" in out and "moved in this jax" in out
