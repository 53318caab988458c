"""`inspector tune` and the baseline on a GPU target: samples/gpu_matmul.py's candidates compiled
deviceless by XLA:GPU, the one it refuses for shared memory said so with the compiler's figure,
the rest ranked by the time floor (families/gpu/time.py) and said to be floors; a baseline of an
h100 report records the compiler's shared memory, and a change of num_stages moves it."""
from __future__ import annotations

import json
import sys

import pytest

from inspector.base.errors import UsageError
from inspector.jax_internals.cuda_topology import plugin_missing
from inspector.tuning.sweep import check_chips

needs_gpu_extra = pytest.mark.skipif(plugin_missing() is not None,
                                     reason="the GPU extra (jax's CUDA plugin) is not installed")

MATMUL = "samples/gpu_matmul.py:matmul"
# bm=256 in 3 stages keeps 384 KiB of tiles, over H100's 227 KiB: refused. bm=128 (the default, 3
# stages) and bm=64 compile; 64-row blocks fill 4x the SMs of 128-row ones, so their floor is lower.
SWEEP = ("tune", MATMUL, "--target", "h100", "--grid", "bm=64,256", "--grid", "stages=3",
         "--args", "bf16[256,256] bf16[256,256]", "--workers", "1")


def test_tune_takes_the_chips_that_time_a_compile():
    assert [c.name for c in check_chips(["h100", "tpu-v5e"])] == ["h100", "tpu-v5e"]
    for name in ("b200", "cpu"):  # a spec-only GPU compiles nothing; the local backend times nothing
        with pytest.raises(UsageError, match=f"GPU targets \\(--target h100,a100\\), not {name}"):
            check_chips([name])


def test_the_tui_tune_screen_opens_on_the_sessions_gpu():
    from inspector.views.tui.tune_form import tunable_chip

    assert tunable_chip("h100") and tunable_chip("tpu-v5e")
    assert not tunable_chip("tpu-v5e:2x2") and not tunable_chip("cpu")  # a slice; the local backend


_MEMO: dict = {}


def _swept(cli) -> dict:
    """The sweep's --json, once (its rows stay in the session's journal: a second run reads them)."""
    if "json" not in _MEMO:
        code, out, err = cli(*SWEEP, "--json")
        assert code == 0, err
        _MEMO["json"] = out
    return json.loads(_MEMO["json"])


@needs_gpu_extra
def test_gpu_candidates_are_ranked_by_the_floor_and_a_refusal_keeps_the_compilers_figure(cli):
    result = _swept(cli)
    (ranking,) = result["shapes"][0]["chips"]
    rows = {r["params"]["bm"]: r for r in ranking["rows"]}
    assert [rows[bm]["status"] for bm in (64, 128, 256)] == ["ranked", "ranked", "refused"]
    refused = rows[256]
    assert refused["code"] == "compile-shared-memory-oom" and "change: fewer num_stages" in refused["reason"]
    assert (refused["vmem_bytes"], refused["vmem_limit_bytes"]) == (393216, 232448)  # XLA:GPU's requested, available
    assert {rows[bm]["estimate_kind"] for bm in (64, 128)} == {"floor"}
    assert rows[64]["rank"] == 1 and rows[128]["rank"] == 2 and rows[128]["default"]
    assert rows[64]["vmem_bytes"] == 24576  # the launch's shared memory: 3 stages of 64x32 + 32x64 bf16 tiles
    assert ranking["set_line"] == "--set bm=64 --set stages=3"


@needs_gpu_extra
def test_the_table_says_the_time_is_a_floor(cli, tmp_path):
    _swept(cli)
    code, out, err = cli(*SWEEP, "--table", str(tmp_path / "tuning.json"))
    assert code == 0, err
    entry = json.loads((tmp_path / "tuning.json").read_text())["entries"]["bf16[256,256] bf16[256,256]"]["h100"]
    assert entry["params"] == {"bm": 64, "stages": 3} and entry["estimate_kind"] == "floor"
    assert "time (floor)" in out and "est. time" not in out and "libtpu" not in out
    assert "shared" in out and "VMEM" not in out and "spills" not in out  # a GPU has no spills per grid step here
    assert "Shared memory size limit exceeded: requested 393216" in out  # the refusal, in the compiler's words
    assert "h100 best by the time floor: --set bm=64 --set stages=3" in out
    assert "a lower bound, no simulation" in out


BASELINE_KERNEL = '''
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

STAGES = 3


def matmul(x, y):
    def kernel(x_ref, y_ref, o_ref):
        def step(i, acc):
            return acc + plt.dot(x_ref[:, pl.ds(i * 32, 32)], y_ref[pl.ds(i * 32, 32), :])
        o_ref[...] = jax.lax.fori_loop(0, 4, step, jax.numpy.zeros((64, 64), "float32")).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((128, 128), x.dtype), grid=(2, 2),
        in_specs=[pl.BlockSpec((64, 128), lambda i, j: (i, 0)), pl.BlockSpec((128, 64), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((64, 64), lambda i, j: (i, j)),
        compiler_params=plt.CompilerParams(num_warps=4, num_stages=STAGES))(x, y)


INSPECT = {"matmul": {"args": "bf16[128,128] bf16[128,128]"}}
'''


@needs_gpu_extra
def test_a_gpu_baseline_records_shared_memory_and_a_change_of_stages_moves_it(cli, tmp_path, monkeypatch):
    kernel = tmp_path / "kern.py"
    kernel.write_text(BASELINE_KERNEL)
    saved = tmp_path / "gpu.json"
    code, out, err = cli("baseline", "save", str(saved), f"{kernel}:matmul", "--target", "h100", "--time")
    assert code == 0, err
    data = json.loads(saved.read_text())
    (entry,) = data["targets"].values()
    figures = entry["chips"]["h100"]
    assert data["chips"] == ["h100"] and figures["program"]["compiled"] is True
    assert figures["program"]["compiler_vmem"] == 24576 and figures["program"]["time"]["kind"] == "floor"
    (pallas,) = [k for k in figures["kernels"].values() if k["kind"] == "custom-call:pallas"]
    assert pallas["compiler_vmem"] == 24576 and pallas["registers"] > 0 and "spill_bytes" in pallas
    # another size too: Python's bytecode cache takes a file of the same size and second as unchanged
    kernel.write_text(BASELINE_KERNEL.replace("STAGES = 3", "STAGES = 2  # one fewer"))
    for name in [m for m in sys.modules if m.startswith("_inspected_")]:  # a command's process loads it afresh
        monkeypatch.delitem(sys.modules, name)
    code, out, err = cli("check", f"{kernel}:matmul", "--baseline", str(saved), "--json")
    assert code == 1, err  # a figure moved
    moved = {c["figure"]: (c["kernel"], c["before"], c["after"]) for c in json.loads(out)["changes"]}
    assert moved["compiler_vmem"] == ("pallas_call", 24576, 16384)  # one copy of the loop's tiles fewer
    assert moved["registers"][0] == "pallas_call"


def test_a_baseline_refuses_a_chip_that_compiles_nothing(cli, tmp_path):
    code, out, err = cli("baseline", "save", str(tmp_path / "b.json"), MATMUL, "--target", "b200")
    assert code == 2 and "not b200" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b.json").exists()
