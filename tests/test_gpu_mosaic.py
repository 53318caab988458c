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
    # 256x256 output tiles: 4 steps of (256x64 + 64x256) bf16 tiles and the output tile, over 227 KiB
    code, out, err = cli("check", MATMUL, "--target", "h100", "--set", "bm=256", "--set", "bn=256",
                         "--args", "bf16[256,128] bf16[128,256]")
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
