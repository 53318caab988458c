"""A GPU kernel's occupancy (CTAs per SM, the limit that binds, waves) against the CUDA occupancy
calculator's arithmetic worked by hand, and its time: a floor at the chip's peaks whose compute
counts a partial last wave whole. The last tests run a deviceless XLA:GPU compile (the GPU extra)."""
from __future__ import annotations

import json
import types

import pytest

from inspector.base.chips import get_chip
from inspector.families.gpu.kernels.occupancy import occupancy, with_occupancy
from inspector.families.gpu.kernels.ptxas import read_ptxas
from inspector.families.gpu.verdict import GpuKernel
from inspector.families.gpu.time import UNTUNED, kernel_time, launch_names, match_launches
from inspector.jax_internals.cuda_topology import plugin_missing
from inspector.libtpu.model import FLOOR

H100, A100 = get_chip("h100"), get_chip("a100")


def test_registers_and_shared_memory_tie_on_the_pallas_matmul():
    # samples/gpu_matmul.py on H100: 256 threads (8 warps), 112 registers, 96 KiB of dynamic shared memory.
    # registers: 112 x 32 = 3584 a warp (a multiple of 256); 65536 / 4 sub-partitions = 16384 each, 16384 // 3584 = 4
    #   warps each, 16 an SM, 16 // 8 = 2 blocks
    # shared memory: 98304 + 1024 reserved = 99328 (a multiple of 128); 233472 // 99328 = 2
    # threads: 64 warps // 8 = 8; block slots: 32
    o = occupancy(H100, threads=256, blocks=16, shared_memory_bytes=98304, registers=112)
    assert (o.by_registers, o.by_shared_memory, o.by_threads, o.by_ctas) == (2, 2, 8, 32)
    assert o.ctas_per_sm == 2 and o.limits == ("registers", "shared memory") and o.occupancy == 16 / 64
    assert o.waves == 16 / (2 * 132)


def test_registers_are_allocated_per_warp_in_units_of_256():
    # A100, 128 threads (4 warps), 37 registers: 37 x 32 = 1184, rounded up to 1280 (5 x 256);
    # 16384 // 1280 = 12 warps a sub-partition, 48 an SM, 48 // 4 = 12 blocks (at 40 registers the same)
    # threads: 64 // 4 = 16; shared memory: 0 + 1024 reserved, 167936 // 1024 = 164; block slots 32
    for registers in (37, 40):
        o = occupancy(A100, threads=128, blocks=108 * 12 + 1, shared_memory_bytes=0, registers=registers)
        assert (o.ctas_per_sm, o.limits, o.by_shared_memory, o.by_threads) == (12, ("registers",), 164, 16)
        assert o.occupancy == 0.75 and o.waves == pytest.approx(1 + 1 / (108 * 12))
    # the register file is split over the 4 sub-partitions: 104 registers, 3328 a warp; 16384 // 3328 = 4 warps each,
    # 16 an SM: 8 blocks of 2 warps (the whole file, 65536 // 3328 = 19 warps, would say 9)
    assert occupancy(A100, threads=64, blocks=1, shared_memory_bytes=0, registers=104).by_registers == 8


def test_small_blocks_are_held_by_threads_and_a_block_over_the_register_file_fits_nowhere():
    # H100, 128 threads, 16 registers: 512 a warp, 32 warps a sub-partition, 128 // 4 = 32 blocks by registers;
    # threads 64 // 4 = 16 bind
    o = occupancy(H100, threads=128, blocks=132 * 16, shared_memory_bytes=0, registers=16)
    assert (o.ctas_per_sm, o.limits, o.waves) == (16, ("threads",), 1.0)
    # 1024 threads at 72 registers: 72 x 32 = 2304 a warp x 32 warps = 73728 > 65536 registers a block
    o = occupancy(H100, threads=1024, blocks=10, shared_memory_bytes=0, registers=72)
    assert o.ctas_per_sm == 0 and o.limits == ("registers",) and o.waves is None


def test_without_ptxas_the_register_limit_is_unknown_and_said_so():
    o = occupancy(H100, threads=256, blocks=16, shared_memory_bytes=98304, registers=None)
    assert o.by_registers is None and o.ctas_per_sm == 2 and o.limit == "at most: shared memory"


def test_static_shared_memory_counts_beside_the_launchs_dynamic_one():
    # an XLA reduction declares its shared memory statically: the launch says 0 bytes, ptxas says how much
    (kernel,) = read_ptxas("ptxas info    : Compiling entry function 'input_reduce_fusion' for 'sm_90a'\n"
                           "ptxas info    : Used 29 registers, used 1 barriers, 8320 bytes smem, 400 bytes cmem[0]\n")
    assert kernel.static_shared_bytes == 8320
    launch = GpuKernel(name="input_reduce_fusion", grid=(8, 1, 1), threads=(1024, 1, 1), shared_memory_bytes=0,
                       registers=29, static_shared_memory_bytes=kernel.static_shared_bytes)
    (with_it,) = with_occupancy([launch], H100)
    assert with_it.occupancy.by_shared_memory == 233472 // (8320 + 1024)  # 24, not the 228 of 1 KiB alone


def test_a_spec_only_gpu_has_no_occupancy():
    assert occupancy(get_chip("b200"), threads=256, blocks=16, shared_memory_bytes=0, registers=32) is None


def _kernel(name="gemm_fusion_dot.1", flops=2 * 4096**3, hbm=3 * 4096 * 4096 * 2, ops=None, dtype="bf16", kind="fusion:custom",
            transcendentals=0.0):
    return types.SimpleNamespace(name=name, kind=kind, flops=float(flops), hbm_bytes=hbm, transcendentals=transcendentals,
                                 ops=ops or {"dot": 1}, inputs=[types.SimpleNamespace(shape=f"{dtype}[4096,4096]")] * 2,
                                 repeat=1, roofline_s=None, opcode="fusion")


def _launch(blocks, name="gemm_fusion_dot_1"):
    o = occupancy(H100, threads=128, blocks=blocks, shared_memory_bytes=0, registers=32)
    return types.SimpleNamespace(name=name, grid=(blocks, 1, 1), occupancy=o)


def test_a_partial_last_wave_costs_a_whole_one_and_every_time_is_a_floor():
    full, tail = kernel_time(_kernel(), H100, _launch(132)), kernel_time(_kernel(), H100, _launch(133))
    assert full.estimate_kind == tail.estimate_kind == FLOOR
    assert full.estimated_seconds == pytest.approx(2 * 4096**3 / H100.bf16_flops)
    # 133 blocks: the busiest SM computes 2 of them, 2 x 132 / 133 of the even spread
    assert tail.estimated_seconds == pytest.approx(full.estimated_seconds * 264 / 133)
    assert UNTUNED in tail.note  # an XLA GEMM compiled deviceless: XLA's fallback tiling
    # f32 operands: the tf32 tensor core rate (XLA:GPU's default precision)
    assert kernel_time(_kernel(dtype="f32"), H100).estimated_seconds == pytest.approx(2 * 4096**3 / H100.tf32_flops)


def test_a_memory_bound_kernel_keeps_its_roofline_whatever_its_waves():
    k = _kernel(name="loop_add_fusion", flops=1e6, hbm=1 << 30, ops={"add": 1}, dtype="f32", kind="fusion:loop")
    t = kernel_time(k, H100, _launch(133, "loop_add_fusion"))
    assert t.estimated_seconds == pytest.approx((1 << 30) / H100.hbm_bytes_per_s) and "bound: memory" in t.note
    # exp at the SFU's rate, where it binds: 16 a clock per SM
    k = _kernel(name="exp", flops=0, hbm=1, ops={"exponential": 1}, dtype="f32", kind="fusion:loop", transcendentals=1e9)
    assert kernel_time(k, H100).estimated_seconds == pytest.approx(1e9 / (16 * 132 * H100.clock_hz))


def test_kernels_find_their_launch_by_name_and_a_pallas_call_by_its_kernel_function():
    hlo = ('  ROOT %pallas_call.1 = bf16[512,512]{1,0} custom-call(%x.1, %y.1), custom_call_target="__gpu$xla.gpu.triton", '
           'backend_config={grid_x = 4 : i32, ir = "...", name = "kernel", num_stages = 3 : i32}')
    assert launch_names(hlo) == {"pallas_call.1": "kernel"}
    launches = [types.SimpleNamespace(name=n) for n in ("gemm_fusion_dot_general_2", "kernel")]
    found = match_launches([_kernel("gemm_fusion_dot_general.2"), _kernel("pallas_call.1"), _kernel("copy.3")], launches, hlo)
    assert {k: v.name for k, v in found.items()} == {"gemm_fusion_dot_general.2": "gemm_fusion_dot_general_2",
                                                     "pallas_call.1": "kernel"}


gpu = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra (jax's CUDA plugin) is not installed")
MATMUL = "samples/gpu_matmul.py:matmul"


@gpu
def test_pallas_view_and_json_show_each_kernels_occupancy(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--view", "pallas")
    assert code == 0, err
    assert "CTAs/SM" in out and "waves" in out and "shared memory" in out.split("CTAs/SM", 1)[1]
    code, out, err = cli("show", MATMUL, "--target", "h100", "--json")
    (kernel,) = json.loads(out)["gpu_kernels"]
    o = kernel["occupancy"]
    assert o["by_shared_memory"] == 2 and o["waves"] == pytest.approx(16 / (o["ctas_per_sm"] * 132))


@gpu
def test_time_on_a_gpu_is_each_kernels_floor(cli):
    code, out, err = cli("show", "samples/attention.py:naive", "--target", "h100", "--view", "fusions", "--time", "--json",
                         "--args", "f32[2,256,64] f32[2,256,64] f32[2,256,64]")
    assert code == 0, err
    data = json.loads(out)
    timed = [k for k in data["kernels"] if k["estimated_seconds"] is not None]
    assert timed and all(k["estimate_kind"] == FLOOR for k in timed)
    assert all(k["estimated_seconds"] >= k["roofline_s"] * 0.999 for k in timed if k["roofline_s"])
    assert data["time_estimate"]["totals"]["estimate_kind"] == FLOOR
    # each GEMM fusion's time is labelled: XLA's untuned config
    untuned = {f["kernel"] for f in data["findings"] if f["code"] == "time-roofline-only" and "fallback GEMM" in f["message"]}
    assert untuned == {k["name"] for k in data["kernels"] if k["name"].startswith("gemm_fusion")} and len(untuned) == 2


@gpu
def test_a_pallas_triton_kernels_floor_counts_its_body_and_the_sms_its_grid_leaves_idle(cli):
    # the Pallas-Triton call was no "pallas" kernel on a GPU: its walk was never paired, its flops 0
    code, out, err = cli("show", MATMUL, "--target", "h100", "--view", "fusions", "--time", "--json")
    assert code == 0, err
    (kernel,) = [k for k in json.loads(out)["kernels"] if k["kind"] == "custom-call:pallas"]
    assert kernel["flops"] == 2 * 512**3
    # 16 blocks (128 x 128 tiles) on 132 SMs: 16 of them compute, at the bf16 tensor cores' rate
    assert kernel["estimated_seconds"] == pytest.approx(2 * 512**3 / H100.bf16_flops * 132 / 16)
