"""Mosaic GPU kernels (Pallas's Hopper backend) get the compiler's figures as Pallas-Triton kernels
do: samples/gpu_mosaic_matmul.py compiled deviceless for h100 and h200, its launch's shared memory
read from the kernel's module in check and the GPU kernels table, Mosaic GPU's refusal at the
kernel's line, and an a100 said as Hopper-only in one line. Compile-only, the smallest shapes."""
from __future__ import annotations

import re

import pytest

from inspector.families.gpu.compile.errors import shared_memory_refusal
from inspector.jax_internals.cuda_topology import plugin_missing

MATMUL = "samples/gpu_mosaic_matmul.py:matmul"
SMALL = "bf16[128,128] bf16[128,128]"  # one (128, 128) output tile, K in two steps

needs_gpu_extra = pytest.mark.skipif(plugin_missing() is not None,
                                     reason="the GPU extra (jax's CUDA plugin) is not installed")


def test_mosaic_gpu_refusal_is_read_with_its_figures():
    refusal = shared_memory_refusal("ValueError while lowering: Mosaic GPU kernel exceeds available shared memory: "
                                    "smem_bytes=393480 > max_smem_bytes=232448")
    assert refusal is not None and refusal.compiler == "Mosaic GPU"
    assert (refusal.requested_bytes, refusal.available_bytes) == (393480, 232448)
    assert refusal.message.startswith("Mosaic GPU kernel exceeds")


def test_a_mosaic_refusal_is_weighed_against_the_targets_limit():
    """Mosaic GPU checks against 227 KiB whatever the target: the finding gives the chip's figure."""
    from types import SimpleNamespace

    from inspector.compilation.compile_errors import CompileError
    from inspector.families.gpu.verdict import compiler_verdict

    stages = SimpleNamespace(hlo=None, compile_error=CompileError(
        message="ValueError while lowering: Mosaic GPU kernel exceeds available shared memory: "
                "smem_bytes=300000 > max_smem_bytes=150000", status="LOWERING_FAILED"))
    kernel = SimpleNamespace(call=SimpleNamespace(name="kernel", source="k.py:3"))
    (found,), fits, most = compiler_verdict([], stages, "h100", [kernel])
    assert (fits, most, found.code) == (False, 300000, "compile-shared-memory-oom")
    assert found.data["limit"] == 232448 and "max_concurrent_steps" in found.data["fix"]


@needs_gpu_extra
def test_the_compilers_figure_on_each_hopper(cli):
    code, out, err = cli("check", MATMUL, "--target", "h100,h200", "--args", SMALL)
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip().startswith(("h100", "h200"))}
    assert set(rows) == {"h100", "h200"}
    # its BlockSpecs' swizzle transforms are read (jax's block_aval asserts there are none)
    assert "kernels: kernel (samples/gpu_mosaic_matmul.py:" in out and "analysis-failed" not in out
    for row in rows.values():  # the compiler figure: the launch's (no longer "-")
        assert re.search(r"\bfits\s+[\d.]+ KiB", row), row


@needs_gpu_extra
def test_the_kernel_is_in_the_gpu_kernels_table(cli):
    code, out, err = cli("show", MATMUL, "--target", "h100", "--view", "pallas", "--args", SMALL)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.strip().startswith("kernel ") and "KiB" in line)
    assert re.search(r"1x1x1\s+128x1x1\s+[\d.]+ KiB", row), row  # one warpgroup


@needs_gpu_extra
def test_over_shared_memory_is_refused_at_the_kernels_line(cli):
    # K=256 is 4 steps; all 4 in flight keep 4 x (16 + 16 + 32) KiB of tiles, over 227 KiB
    code, out, err = cli("check", MATMUL, "--target", "h100", "--set", "max_concurrent_steps=4",
                         "--args", "bf16[128,256] bf16[256,128]")
    assert code == 1, err
    line = " ".join(out.split())
    assert re.search(r"compile-shared-memory-oom h100: kernel at samples/gpu_mosaic_matmul.py:\d+: Mosaic GPU kernel "
                     r"exceeds available shared memory", line), out
    assert "max_concurrent_steps" in line


@needs_gpu_extra
def test_a100_is_said_hopper_only_in_one_line(cli):
    code, out, err = cli("check", MATMUL, "--target", "a100", "--args", SMALL)
    assert code == 1, err
    assert "Traceback" not in out + err
    assert re.search(r"Mosaic GPU .*Hopper", " ".join(out.split())), out
