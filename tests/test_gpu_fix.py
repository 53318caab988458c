"""`inspector fix` for a GPU target: samples/gpu_matmul.py at bm=256 (a 256x256x128 tile in 4 stages,
which XLA:GPU refuses for shared memory on H100) gets fewer num_stages, INSPECT's smaller blocks and
the other num_warps, each compiled deviceless; the block sizes' numerics run in Pallas interpret
mode on the CPU; one that compiles is recommended, and --patch writes what the source can express."""
from __future__ import annotations

import json

import pytest

from inspector.jax_internals.cuda_topology import plugin_missing

pytestmark = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra (jax's CUDA plugin) is not installed")

MATMUL = "samples/gpu_matmul.py:matmul"
SMALL = ("--args", "bf16[256,256] bf16[256,256]", "--set", "bm=256")  # one 256x256 tile: refused as at 512


def _fix(result: dict, label: str) -> dict:
    return next(f for f in result["fixes"] if f["change"]["kind"] != "buffered" and _label(f["change"]) == label)


def _label(change: dict) -> str:
    said = " ".join(f"{k}={v}" for k, v in change["value"].items())
    return f"{change['kernel']}: {said}" if change["kind"] == "triton" else said


def test_a_kernel_refused_for_shared_memory_gets_a_fix_that_compiles(cli):
    code, out, err = cli("fix", MATMUL, "--target", "h100", *SMALL, "--json")
    assert code == 0, err
    result = json.loads(out)
    (before,) = result["before"]
    assert before["compiles"] is False and before["vmem_bytes"] == 524288 and before["vmem_limit_bytes"] == 232448
    assert (result["memory"], result["compiler"]) == ("shared memory", "XLA:GPU")
    kinds = {f["change"]["kind"] for f in result["fixes"]}
    assert kinds == {"triton", "params"}  # Mosaic's Buffered(1) and grid order are not tried on a GPU
    # each stage fewer frees one copy of the loop's tiles (128 KiB a stage): only 1 stage fits 227 KiB
    stages = {n: _fix(result, f"kernel: num_stages={n}") for n in (3, 2, 1)}
    assert [stages[n]["trials"][0]["compiles"] for n in (3, 2, 1)] == [False, False, True]
    assert stages[1]["trials"][0]["vmem_bytes"] == 131072 and stages[1]["numerics"] == "unchanged"
    assert _fix(result, "kernel: num_warps=4")["trials"][0]["compiles"] is False  # warps free no shared memory
    smaller = _fix(result, "bm=128")
    assert smaller["trials"][0]["compiles"] and smaller["numerics"] == "match"
    assert "Pallas interpret mode on the CPU" in smaller["numerics_detail"]
    # ranked by the time floor (families/gpu/time.py): the smaller blocks fill more of the 132 SMs,
    # and num_stages=1 (no pipelining) comes after them
    best = result["fixes"][result["best"]["h100"]]
    assert best["trials"][0]["compiles"] and "h100" in best["recommended"] and best["change"]["kind"] == "params"
    order = [_label(f["change"]) for f in result["fixes"]]
    assert order.index("bm=64") < order.index("bm=128") < order.index("kernel: num_stages=1")
    assert result["command_line"]["h100"] == "change --set bm=256 to --set bm=64"


def test_fix_prints_the_gpu_words_and_patches_what_the_source_can_express(cli, tmp_path):
    patch = tmp_path / "fix.diff"
    code, out, err = cli("fix", MATMUL, "--target", "h100", *SMALL, "--no-numerics", "--patch", str(patch))
    assert code == 0, err
    assert "shared memory used / limit" in out and "time (floor)" in out and "VMEM" not in out
    assert "best on h100: #1 bm=64" in out
    # bm is the command line's; the best the source can express is INSPECT's stages (num_stages=stages there)
    diff = patch.read_text()
    assert '+               "params": {"bm": [128, 64, 256], "stages": [1, 0, 2, 3, 4]}},' in diff


def test_a_triton_change_patches_a_literal_and_leaves_a_computed_value_to_the_user(tmp_path):
    import subprocess

    from inspector.base.errors import UsageError
    from inspector.base.fix_model import Change
    from inspector.verbs.patching import patch_text

    def change(source: str) -> Change:
        return Change(kind="triton", kernel="kernel", call=0, value={"num_stages": 2}, source=source)

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    src = tmp_path / "k.py"
    src.write_text("from jax.experimental import pallas as pl\nfrom jax.experimental.pallas import triton as plt\n\n"
                   "f = pl.pallas_call(kernel, out_shape=s,\n"
                   "                   compiler_params=plt.CompilerParams(num_warps=4, num_stages=4))\n")
    diff = patch_text(change(f"{src}:4"), None, "f").text
    assert "+                   compiler_params=plt.CompilerParams(num_warps=4, num_stages=2))" in diff
    with pytest.raises(UsageError, match="num_stages is 'stages' in the source, not a number"):
        patch_text(change("samples/gpu_matmul.py:31"), None, "matmul")


def test_show_fixes_answers_the_shared_memory_refusal(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", *SMALL, "--fixes")
    assert code == 1, err  # the program as it is still fails: the fixes are said under its finding
    text = " ".join(out.replace("│", " ").split())
    assert "compile-shared-memory-oom" in text
    assert "fix #1 bm=64: compiles, shared memory 24 KiB / 227 KiB, numerics match; change --set bm=256 to --set bm=64" in text
