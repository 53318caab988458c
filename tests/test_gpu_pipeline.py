"""--target h100/h200/a100 through the whole pipeline, deviceless (no GPU, no driver): XLA:GPU's
optimized HLO and fusions with their HBM bytes and flops (our count: cost_analysis() is unavailable
deviceless), a Pallas-Triton kernel's launch, shared memory, registers and spills from the compile,
and the compiler's shared-memory verdict in show, --json and check (samples/gpu_matmul.py: bm=128 is
a 128x128x64 tile in 3 stages, 96 KiB on H100; bm=256 a 256x256x128 tile in 4 stages, refused)."""
from __future__ import annotations

import json

import pytest

from inspector.jax_internals.cuda_topology import plugin_missing
from inspector.families.gpu.kernels.ptxas import ptxas_path

pytestmark = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra (jax's CUDA plugin) is not installed")

MATMUL = "samples/gpu_matmul.py:matmul"
NAIVE = "samples/attention.py:naive"
SMALL = "f32[2,256,64] f32[2,256,64] f32[2,256,64]"


def test_show_hlo_is_xla_gpus_optimized_module(cli):
    code, out, err = cli("show", NAIVE, "--target", "h100", "--view", "hlo", "--args", SMALL)
    assert code == 0, err
    assert out.startswith("HloModule jit_naive") and "gemm_fusion" in out


def test_fusions_json_has_each_kernels_hbm_bytes_and_flops(cli):
    code, out, err = cli("show", NAIVE, "--target", "h100", "--json", "--args", SMALL)
    assert code == 0, err
    data = json.loads(out)
    assert data["chip"]["name"] == "h100" and data["stages"]["platform"] == "cuda"
    assert data["xla_cost"] is None  # deviceless XLA:GPU gives no cost analysis: the figures are our own count
    gemms = [k for k in data["kernels"] if "gemm" in k["name"]]
    assert len(gemms) == 2
    # q k^T: 2 x 256 x 256 x 64 x 2 flops, reads q and k, writes the (2, 256, 256) f32 scores
    scores = next(k for k in gemms if k["outputs"][0]["shape"] == "f32[2,256,256]")
    assert scores["flops"] >= 2 * 256 * 256 * 64 * 2 and scores["hbm_bytes_written"] == 2 * 256 * 256 * 4
    assert scores["hbm_bytes_read"] == 2 * 2 * 256 * 64 * 4
    assert "kernel_dumps" not in data["stages"]  # the PTX is large: only the kernels read from it


def test_pallas_triton_kernel_shows_the_compilers_shared_memory_and_registers(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--json")
    assert code == 0, err
    data = json.loads(out)
    (kernel,) = data["gpu_kernels"]
    assert (kernel["name"], kernel["grid"], kernel["threads"], kernel["shared_memory_bytes"]) == ("kernel", [4, 4, 1], [256, 1, 1], 98304)
    if ptxas_path() is not None:
        assert 0 < kernel["registers"] <= 255 and kernel["spill_bytes"] == 0
    # the estimate's range (its loop's tiles, 64 to 160 KiB) holds the compiler's figure: no finding either way
    codes = {f["code"] for f in data["findings"]}
    assert not codes & {"shared-memory-over-limit", "shared-memory-undecided", "shared-memory-estimate-over-compiler"}
    assert data["ok"]


def test_pallas_view_prints_the_kernels_launch_beside_the_estimate(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--view", "pallas")
    assert code == 0, err
    assert "XLA:GPU's kernels for h100" in out and "96 KiB" in out
    assert "shared-memory-estimate-over-compiler" not in out and "shared-memory-over-limit" not in out


def test_over_budget_kernel_is_an_error_at_its_line_in_the_compilers_words(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--set", "bm=256", "--json")
    assert code == 1
    data = json.loads(out)
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    (refused,) = errors  # the compile's own error is said once, by the kernel's finding
    assert refused["code"] == "compile-shared-memory-oom" and refused["kernel"] == "kernel"
    assert refused["data"]["source"] == "samples/gpu_matmul.py:31"
    assert (refused["data"]["bytes"], refused["data"]["limit"]) == (524288, 232448)
    assert "Shared memory size limit exceeded: requested 524288, available: 232448" in refused["message"]
    assert "num_stages" in refused["data"]["fix"] and "smaller blocks" in refused["data"]["fix"]
    (pallas,) = data["pallas"]  # the Pallas view's kernel carries it too
    assert [f["code"] for f in pallas["findings"] if f["severity"] == "error"] == ["compile-shared-memory-oom"]


def test_check_exits_on_the_compilers_verdict_per_chip(cli):
    code, out, err = cli("check", MATMUL, "--target", "h100,a100", "--json")
    assert code == 0, err
    rows = {r["chip"]: r for r in json.loads(out)["targets"]}
    assert (rows["h100"]["compiler_fits"], rows["h100"]["compiler_vmem_bytes"]) == (True, 98304)
    assert (rows["a100"]["compiler_fits"], rows["a100"]["compiler_vmem_bytes"]) == (True, 65536)
    assert rows["h100"]["fits"] is True  # the estimate's, beside (its upper bound, 160 KiB, under the limit)
    code, out, err = cli("check", MATMUL, "--target", "h100,a100", "--set", "bm=256", "--json")
    assert code == 1
    messages = " ".join(f["message"] for f in json.loads(out)["findings"] if f["code"] == "compile-shared-memory-oom")
    assert "requested 524288, available: 232448" in messages and "requested 393216, available: 166912" in messages
    code, out, err = cli("check", MATMUL, "--target", "h100", "--set", "bm=256")
    assert code == 1 and "DOES NOT FIT" in out
    assert "COMPILE ERROR" not in out  # a shared-memory refusal is the budget's verdict, not another failure


def test_a_gpu_row_without_a_target_config_is_one_line(cli):
    code, out, err = cli("show", MATMUL, "--target", "b200")
    assert code == 2 and "b200 has no XLA target config" in err and "Traceback" not in err


def test_the_compile_cache_keeps_each_kernels_dumps(run_cli, tmp_path):
    """A GPU compile from the disk cache (another process's) still has its kernels' launches; an
    entry with malformed dumps is not stored, nor read back as a Pallas view without them."""
    from inspector.compilation import compile_cache

    env = {"INSPECTOR_CACHE_DIR": str(tmp_path)}
    first, again = (json.loads(run_cli("show", MATMUL, "--target", "a100", "--json", env=env).stdout) for _ in range(2))
    assert not first["stages"]["compile_cached"] and again["stages"]["compile_cached"]
    assert again["gpu_kernels"] == first["gpu_kernels"] and again["gpu_kernels"][0]["shared_memory_bytes"] == 65536
    (entry,) = tmp_path.glob("*.json")
    stored = json.loads(entry.read_text())["result"]
    assert "thunk_sequence.txt" in stored["kernel_dumps"]
    assert not compile_cache.store(entry.stem + "x", {**stored, "kernel_dumps": {"thunk_sequence.txt": 3}})
