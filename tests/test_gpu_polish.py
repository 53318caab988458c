"""What a GPU target (h100, its node h100:2) showed in a TPU's words, each asked of the family now:
the UI's time key, the fusions note and --time's refusal, the Pallas view's budget rows, a
Pallas-Triton kernel asked of a TPU, the shared-memory refusal's advice, the collectives' header,
and the node sizes `inspector chips` lists. Deviceless, small shapes; the compiles shared."""
from __future__ import annotations

import functools
import json

import pytest

from conftest import render, shared_report
from inspector.jax_internals.cuda_topology import plugin_missing

needs_plugin = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra (jax's CUDA plugin) is not installed")

MATMUL = "samples/gpu_matmul.py:matmul"
FLASH = "samples/gpu_attention.py:flash"


# ------------------------------------------------------------------ the UI's time key (T)

class _App:
    """What Variants.more asks of the app: its session and report, the status line, tabs, a change."""

    def __init__(self, chip: str) -> None:
        from inspector.session import Session

        self.session, self.report = Session(MATMUL, chip), None
        self.said: list[str] = []
        self.tabs: list[str] = []
        self.changed: list = []

    def status(self, text: str, style: str | None = None) -> None:
        self.said.append(text)

    def action_tab(self, tab: str) -> None:
        self.tabs.append(tab)

    def change(self, session) -> None:
        self.changed.append(session)


@pytest.mark.parametrize("chip, tab", [("h100", "fusions"), ("h100:2", "fusions"), ("tpu-v5e", "bundles")])
def test_the_time_key_asks_the_family_and_opens_the_tab_that_shows_its_time(chip, tab):
    """T refused every chip whose name was not a TPU's, though a GPU has its time floor (the Fusions tab's est. time)."""
    from inspector.views.tui.variants import Variants

    app = _App(chip)
    Variants(app).more("time")
    assert app.said == [] and app.tabs == [tab]
    (timed,) = app.changed
    assert timed.time and timed.chip == chip


def test_the_time_key_on_a_target_with_no_estimate_says_so_in_one_line():
    from inspector.views.tui.variants import Variants

    app = _App("cpu")
    Variants(app).more("time")
    (said,) = app.said
    assert app.changed == [] and "cpu has no time estimate" in said and "libtpu" not in said


@pytest.mark.asyncio
@needs_plugin
async def test_the_time_key_on_h100_fills_the_fusions_tabs_est_time(worker_in_process):

    from textual.widgets import TabbedContent

    from conftest import loaded
    from inspector.session import Session
    from inspector.views.tui.app import InspectorApp

    app = InspectorApp(Session(MATMUL, "h100"))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("T")
        await loaded(pilot)
        assert app.session.time and app.query_one(TabbedContent).active == "fusions"
        assert app.report.time is not None and all(k.estimate_kind == "floor" for k in app.report.fusions.kernels)


# ------------------------------------------------------------------ a Pallas-Triton kernel on h100

@needs_plugin
def test_a_triton_kernels_pallas_view_has_its_shared_memory_budget_and_no_tpu_rows():
    """The GPU family budgeted every kernel on the TPU generations: VMEM rows for a kernel Triton compiles."""
    out = render(shared_report(MATMUL, "h100"), "pallas")
    rows = [line.split()[0] for line in out.splitlines() if "(shared memory)" in line or "(VMEM)" in line]
    assert rows == ["h100"], out
    assert "227 KiB (opt-in)" in out and "scoped VMEM" not in out


@needs_plugin
def test_a_triton_kernels_fusions_note_has_no_tpu_units():
    """The note on a Pallas kernel's roofline named the MXU, VPU, EUP and XLU on a GPU, which has none of them."""
    out = render(shared_report(MATMUL, "h100"), "fusions")
    note = out[out.index("note: HBM traffic from the BlockSpec walk"):].replace(",", " ").replace("(", " ").split()
    assert "roofline" in note and not {"MXU", "VPU", "EUP", "XLU"} & set(note), note


def test_time_with_a_view_that_does_not_show_it_names_the_gpus_floor(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--view", "pallas", "--time")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "each kernel's time floor to the overview and fusions views" in err and "libtpu" not in err


# ------------------------------------------------------------------ a Pallas-Triton kernel for a TPU

@pytest.mark.libtpu
def test_a_triton_kernel_for_a_tpu_is_said_to_be_written_for_a_gpu(cli):
    """jax's own words were "Compiler params for platform gpu ...": the kernel is a GPU's, say so."""
    code, out, err = cli("show", MATMUL, "--target", "tpu-v5e", "--args", "bf16[64,64] bf16[64,64]", "--set", "bm=64",
                         "--json")
    assert code == 1, err
    (error,) = [f["message"] for f in json.loads(out)["findings"] if f["severity"] == "error"]
    assert error.startswith("tpu-v5e: kernel at samples/gpu_matmul.py:") and "\n" not in error
    assert "a Pallas GPU kernel (Triton's CompilerParams), which cannot compile for a TPU (tpu-v5e)" in error, error


# ------------------------------------------------------------------ the shared-memory refusal's advice

@needs_plugin
def test_the_refusals_advice_names_the_kernels_own_block_params(cli):
    """It said "smaller blocks (bm, bn, bk)" of every kernel: flash's blocks are block_q and block_k."""
    code, out, err = cli("check", FLASH, "--target", "h100", "--args", "bf16[1,256,2,128] bf16[1,256,2,128] bf16[1,256,2,128]",
                         "--set", "block_k=256", "--set", "num_stages=4", "--json")
    assert code == 1, err
    (refused,) = [f for f in json.loads(out)["findings"] if f["code"] == "compile-shared-memory-oom"]
    assert refused["data"]["fix"].endswith("smaller blocks (block_q, block_k)") and "bm" not in refused["message"]


# ------------------------------------------------------------------ the GPUs of one node

@functools.cache
def _node_report():
    import inspector

    return inspector.inspect(lambda x: x.sum(), "f32[16,128]", target="h100:2", mesh={"d": -1}, shardings="P('d')",
                             cache=False)


@needs_plugin
def test_the_collectives_of_a_gpu_node_are_worded_for_nvlink():
    out = render(_node_report(), "collectives")
    assert "no time: no NVLink figures" in out and "ICI" not in out, out
    assert "all-reduce" in out


def test_chips_lists_the_gpu_node_sizes(cli):
    code, out, err = cli("chips")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for name in ("h100", "h200", "a100"):
        assert rows[name].rstrip().endswith("2 4 8"), rows[name]
    assert rows["b200"].rstrip().endswith("-")  # spec only: it compiles for no node
