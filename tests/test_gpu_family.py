"""The GPU family's own modules (inspector/families/gpu/), deviceless: XLA's target configs against
the chip rows, a jnp function and a Pallas-Triton matmul compiled by XLA:GPU for H100 and A100 with
no GPU, the thunk sequence's launches and shared memory (98304 B on H100 and 65536 B on A100 for the
128x128x64 3-stage matmul, as first measured by hand with the same jaxlib), ptxas's registers, and
the compiler's shared-memory refusal read from its own message."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from inspector.base.chips import CHIPS, SPEC_FIELDS, get_chip
from inspector.families.gpu.compile.deviceless import compile_deviceless
from inspector.families.gpu.compile.errors import shared_memory_refusal
from inspector.jax_internals.cuda_topology import cuda_devices, plugin_missing
from inspector.families.gpu.jax.target_configs import SPECS, device_info, spec_text
from inspector.families.gpu.kernels.launches import kernel_launches
from inspector.families.gpu.kernels.ptxas import ptx_arch, ptx_entries, ptxas_path, read_ptxas
from inspector.families.gpu.kernels.thunks import kernels, read_thunk_sequence

needs_plugin = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra is not installed")
GPU_ROWS = [c for c in CHIPS if c.target_config]

# ------------------------------------------------------------------ the target configs and the chip rows


def test_every_spec_file_is_a_chip_row_and_back():
    assert sorted(c.target_config for c in GPU_ROWS) == sorted(p.name for p in SPECS.glob("*.txtpb"))
    assert {c.name for c in GPU_ROWS} == {"a100", "h100", "h200"}


@pytest.mark.parametrize("chip", GPU_ROWS, ids=lambda c: c.name)
def test_chip_row_agrees_with_its_target_config(chip):
    info = device_info(spec_text(chip.target_config))
    for field, spec_field in SPEC_FIELDS.items():
        row, spec = getattr(chip, field), info[spec_field]
        if field == "clock_hz":
            assert row == pytest.approx(spec * 1e9), field
        elif field == "hbm_bytes_per_s":  # the row keeps the datasheet's rounding
            assert row == pytest.approx(spec, rel=1e-3), field
        else:
            assert row == spec, field
        assert chip.target_config in chip.sources[field], field


def test_device_info_reads_the_compute_capability_and_leaves_nested_messages_out():
    info = device_info(spec_text("h100_sxm.txtpb"))
    assert info["compute_capability"] == "9.0a" and info["core_count"] == 132
    assert "clock_rate_ghz" in info and "rate_infos" not in info and "key" not in info
    assert device_info(spec_text("a100_sxm_80.txtpb"))["compute_capability"] == "8.0"


# ------------------------------------------------------------------ the dumps' readers, on captured text

THUNKS = """\
001: kCustomKernel [source       | next=002 (1)] gemm_fusion_dot_1 grid: [512, 1, 1] threads: [64, 1, 1]  shared_memory: 1024 bytes
002: kCustomKernel [prev=001 (1) | next=003 (1)] triton_softmax_2 grid: [32, 1, 1] threads: [128, 1, 1]  shared_memory: 2048 bytes
003: kKernel       [prev=002 (1) | next=004 (1)] input_reduce_fusion grid: [4, 2, 1] threads: [1024, 1, 1]  shared_memory: 0 bytes
004: kAllReduce    [prev=003 (1) | sink        ] kAllReduce
"""

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kernel' for 'sm_90a'
ptxas info    : Function properties for kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 112 registers, used 1 barriers
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Function properties for other
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 16 bytes smem
ptxas info    : Compile time = 64.088 ms
"""


def test_thunk_sequence_gives_each_kernels_launch_and_keeps_other_steps():
    steps = read_thunk_sequence(THUNKS)
    assert [s.kind for s in steps] == ["kCustomKernel", "kCustomKernel", "kKernel", "kAllReduce"]
    reduce = steps[2]
    assert (reduce.name, reduce.grid, reduce.threads, reduce.shared_memory_bytes) == ("input_reduce_fusion", (4, 2, 1), (1024, 1, 1), 0)
    assert reduce.blocks == 8 and reduce.threads_per_block == 1024
    assert steps[3].name == "kAllReduce" and not steps[3].is_kernel and steps[3].blocks is None
    assert [k.name for k in kernels(THUNKS)] == ["gemm_fusion_dot_1", "triton_softmax_2", "input_reduce_fusion"]


def test_ptxas_report_gives_registers_spills_and_barriers_per_kernel():
    first, second = read_ptxas(PTXAS)
    assert (first.name, first.arch, first.registers, first.barriers, first.spills) == ("kernel", "sm_90a", 112, 1, False)
    assert (second.registers, second.spill_store_bytes, second.spill_load_bytes, second.stack_frame_bytes) == (255, 40, 36, 48)
    assert second.spills


def test_ptx_arch_and_entries():
    ptx = ".version 8.8\n.target sm_90a\n.address_size 64\n\n.visible .entry kernel(\n\t.param .u64 p\n)\n"
    assert ptx_arch(ptx) == "sm_90a" and ptx_entries(ptx) == ["kernel"]
    assert ptx_arch("") is None and ptx_entries("") == []


def test_shared_memory_refusal_read_from_the_compilers_words():
    text = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Shared memory size limit exceeded: requested 524288, available: 232448, context: []"
    refusal = shared_memory_refusal(text)
    assert (refusal.requested_bytes, refusal.available_bytes, refusal.exceeded_by_bytes) == (524288, 232448, 291840)
    assert refusal.message.startswith("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Shared memory size limit exceeded")
    assert shared_memory_refusal("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 bytes") is None


# ------------------------------------------------------------------ deviceless XLA:GPU compiles

M = N = K = 512


def _matmul(bm: int, bn: int, bk: int, stages: int):
    """A bf16 Pallas-Triton matmul, (bm, K) x (K, bn) blocks, the K loop in the kernel."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    def kernel(x_ref, y_ref, o_ref):
        def step(i, acc):
            return acc + plt.dot(x_ref[:, pl.ds(i * bk, bk)], y_ref[pl.ds(i * bk, bk), :])
        o_ref[...] = jax.lax.fori_loop(0, K // bk, step, jnp.zeros((bm, bn), jnp.float32)).astype(o_ref.dtype)

    def matmul(x, y):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((M, N), jnp.bfloat16), grid=(M // bm, N // bn),
            in_specs=[pl.BlockSpec((bm, K), lambda i, j: (i, 0)), pl.BlockSpec((K, bn), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
            compiler_params=plt.CompilerParams(num_warps=8, num_stages=stages))(x, y)
    return matmul


BF16 = [jax.ShapeDtypeStruct((M, K), jnp.bfloat16), jax.ShapeDtypeStruct((K, N), jnp.bfloat16)]


@functools.cache
def _compiled(kind: str, chip: str):
    spec = spec_text(get_chip(chip).target_config)
    if kind == "matmul":
        return compile_deviceless(_matmul(128, 128, 64, 3), BF16, spec)
    f32 = [jax.ShapeDtypeStruct((256, 256), jnp.float32)] * 2
    return compile_deviceless(lambda x, y: jax.nn.softmax(jnp.tanh(x @ y), axis=-1).sum(0), f32, spec)


@needs_plugin
@pytest.mark.parametrize("chip", ["h100", "a100"])
def test_jnp_function_compiles_for_a_gpu_without_one(chip):
    compiled = _compiled("jnp", chip)
    assert compiled.device_kind == get_chip(chip).device_kind and compiled.devices == 1
    assert "HloModule" in compiled.hlo and "fusion" in compiled.hlo
    launched = kernels(compiled.thunk_sequence)
    assert launched and all(k.blocks and k.threads_per_block for k in launched)
    arch = "sm_90a" if chip == "h100" else "sm_80"
    assert {ptx_arch(text) for text in compiled.ptx.values()} == {arch}
    # every kernel launched has its PTX: the thunk's name is the PTX's entry
    assert {k.name for k in launched} <= {e for text in compiled.ptx.values() for e in ptx_entries(text)}


@needs_plugin
@pytest.mark.parametrize("chip, shared_memory", [("h100", 98304), ("a100", 65536)])
def test_pallas_triton_matmul_launch_is_what_the_compiler_measured(chip, shared_memory):
    """128x128x64 blocks, 3 stages: the thunk's shared memory is what was measured by hand (98304 B on H100, 65536 B on A100)."""
    (launch,) = kernels(_compiled("matmul", chip).thunk_sequence)
    assert (launch.grid, launch.threads, launch.shared_memory_bytes) == ((4, 4, 1), (256, 1, 1), shared_memory)


@needs_plugin
@pytest.mark.parametrize("chip, requested", [("h100", 524288), ("a100", 393216)])
def test_an_over_budget_pallas_triton_kernel_is_refused_with_the_compilers_figures(chip, requested):
    """256x256x128 blocks, 4 stages: 4 copies of the two input blocks on Hopper, 3 on Ampere (the
    figures tell the shared-memory estimate how many buffers Triton keeps per chip)."""
    with pytest.raises(Exception) as refused:
        compile_deviceless(_matmul(256, 256, 128, 4), BF16, spec_text(get_chip(chip).target_config))
    refusal = shared_memory_refusal(str(refused.value))
    assert refusal is not None and (refusal.requested_bytes, refusal.available_bytes) == (requested, get_chip(chip).shared_mem_per_block)
    assert "RESOURCE_EXHAUSTED: Shared memory size limit exceeded" in refusal.message


@needs_plugin
def test_a_multi_gpu_topology_compiles_spmd():
    assert len(cuda_devices(spec_text("h100_sxm.txtpb"), "1x1x8")) == 8


@needs_plugin
@pytest.mark.skipif(ptxas_path() is None, reason="no ptxas (the GPU extra's nvidia-cuda-nvcc-cu12)")
def test_ptxas_gives_the_matmuls_registers_on_h100():
    compiled = _compiled("matmul", "h100")
    (launch,) = kernel_launches(compiled.thunk_sequence, compiled.ptx, ptxas_path())
    assert launch.ptxas_error is None and launch.ptxas is not None
    assert launch.ptxas.arch == "sm_90a" and 0 < launch.ptxas.registers <= 255 and not launch.ptxas.spills
    # the block's 256 threads fit the SM's registers
    assert launch.ptxas.registers * launch.launch.threads_per_block <= get_chip("h100").registers_per_sm


def test_kernel_launches_without_ptxas_still_give_each_launch():
    (launch, *_) = kernel_launches(THUNKS, {"1.ptx": ".target sm_90a\n.visible .entry gemm_fusion_dot_1("}, None)
    assert launch.name == "gemm_fusion_dot_1" and launch.ptxas is None and launch.ptxas_error is None


def test_a_ptx_ptxas_refuses_is_said_per_kernel(tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'ptxas fatal   : Unsupported .version 9.0; current version is 8.8' >&2\nexit 255\n")
    fake.chmod(0o755)
    (launch, *_) = kernel_launches(THUNKS, {"1.ptx": ".version 9.0\n.target sm_90a\n.visible .entry gemm_fusion_dot_1("}, str(fake))
    assert launch.ptxas is None and "Unsupported .version 9.0" in launch.ptxas_error


# ------------------------------------------------------------------ the compile path the seam's Backend takes

def test_compile_path_says_which_chips_compile_here():
    from inspector.families.gpu.compile.path import GpuCompilePath

    assert GpuCompilePath(get_chip("b200")).available().startswith("b200 has no XLA target config")
    assert GpuCompilePath(get_chip("h100")).available() == plugin_missing()
    with GpuCompilePath(get_chip("h100")).lowering_capture() as captured:
        assert captured == []


@needs_plugin
def test_compile_path_devices_and_refusal():
    import dataclasses

    from inspector.families.gpu.compile.path import GpuCompilePath

    from inspector.compilation.compile_errors import parse_compile_error

    path = GpuCompilePath(dataclasses.replace(get_chip("a100"), devices=2))
    devices = path.devices()
    assert len(devices) == 2 and {d.device_kind for d in devices} == {"NVIDIA A100-SXM4-80GB"}
    assert path.device_count() == 2 and path.mesh().devices.size == 1 and path.keeps_kernel_dumps
    words = "RESOURCE_EXHAUSTED: Shared memory size limit exceeded: requested 393216, available: 166912, context: []"
    assert parse_compile_error(words).status == "RESOURCE_EXHAUSTED"
    assert path.shared_memory(words).available_bytes == get_chip("a100").shared_mem_per_block


# ------------------------------------------------------------------ the extra installed, jax as quiet as before

def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python with none of the variables the inspector sets (as a user's own)."""
    ours = ("JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL", "GLOG_minloglevel", "INSPECTOR_DEVICELESS", "PYTHONWARNINGS")
    env = {k: v for k, v in os.environ.items() if k not in ours}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


no_gpu_here = pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="a GPU machine: jax opens the GPU")


@needs_plugin
@no_gpu_here
def test_import_jax_stays_quiet_with_the_cuda_plugin_installed(tmp_path):
    """Without the CUDA runtime wheel, each of jaxlib's GPU modules logs "Could not find cuda drivers"."""
    done = _python("import jax", tmp_path)
    assert done.returncode == 0 and done.stderr == ""


@needs_plugin
@no_gpu_here
def test_the_inspectors_process_keeps_the_cpu_backend_and_prints_nothing(tmp_path):
    done = _python("import inspector, jax; print(jax.default_backend(), len(jax.devices()))", tmp_path)
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, ["cpu", "1"], "")


@needs_plugin
@no_gpu_here
def test_a_user_process_whose_jax_failed_the_plugins_check_still_compiles_for_a_gpu(tmp_path):
    """JAX_PLATFORMS unset: jax's start-up check of the CUDA libraries fails (no cuDNN) and the
    plugin registers no topology; the inspector initializes it again with the check skipped."""
    done = _python("import os, jax; jax.devices()\n"
                   "from inspector.jax_internals.cuda_topology import cuda_devices\n"
                   "from inspector.families.gpu.jax.target_configs import spec_text\n"
                   "print(len(cuda_devices(spec_text('h100_sxm.txtpb'), '1x1x2')), os.environ.get('JAX_SKIP_CUDA_CONSTRAINTS_CHECK'))",
                   tmp_path)
    assert "Unable to load cuDNN" in done.stderr  # jax's own check failed first: the case tested
    assert (done.returncode, done.stdout.split()) == (0, ["2", "None"]), done.stderr[-2000:]


def test_triton_keeps_num_stages_buffers_on_hopper_and_one_fewer_on_ampere():
    """The measured sweep (tests/bench/gpu_triton_smem.py): every figure the compiler gave, fitted
    or refused, is the loop's two input tiles times the buffers Triton keeps, num_stages on Hopper
    and num_stages - 1 (at least 1) on Ampere."""
    import json

    from conftest import ROOT

    rows = json.loads((ROOT / "tests/data/gpu/triton_smem.json").read_text())["rows"]
    assert len(rows) >= 60 and {r["chip"] for r in rows} == {"h100", "h200", "a100"}
    for row in rows:
        tiles = (row["bm"] * row["bk"] + row["bk"] * row["bn"]) * 2
        hopper = get_chip(row["chip"]).compute_capability.startswith("9")
        buffers = row["num_stages"] if hopper else max(1, row["num_stages"] - 1)
        measured = row["shared_memory_bytes"] if row["fits"] else row["requested_bytes"]
        assert measured == buffers * tiles, row
        assert row["fits"] == (measured <= get_chip(row["chip"]).shared_mem_per_block), row
