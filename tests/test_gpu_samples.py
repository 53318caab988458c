"""The GPU samples compile deviceless for NVIDIA targets: samples/gpu_attention.py's Pallas-Triton
FlashAttention (check's verdict per chip, and the compiler's refusal at the kernel's line when the
k/v tiles of num_stages steps overflow shared memory), and every entry of samples/jax_gpu_kernels.py
(jax's own Pallas-Triton kernels) through show's Pallas view with no error. Compile-only, small shapes."""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

from inspector.families.gpu.kernels.ptxas import ptxas_path
from inspector.jax_internals.cuda_topology import plugin_missing

pytestmark = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra (jax's CUDA plugin) is not installed")

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLASH = "samples/gpu_attention.py:flash"
SMALL = "bf16[1,256,2,64] bf16[1,256,2,64] bf16[1,256,2,64]"


def _entries(path: str) -> list[str]:
    """The INSPECT keys of a sample, read without importing it (collection stays fast)."""
    tree = ast.parse((ROOT / path).read_text())
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "INSPECT")
    assert isinstance(table, ast.Dict)
    return [k.value for k in table.keys if isinstance(k, ast.Constant)]


def test_flash_fits_on_each_chip_with_the_compilers_figure(cli):
    code, out, err = cli("check", FLASH, "--target", "h100,a100", "--args", SMALL)
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip().startswith(("h100", "a100"))}
    assert set(rows) == {"h100", "a100"} and all("KiB" in r and "fits" in r for r in rows.values())
    if ptxas_path() is not None:  # each chip's registers and spills, as ptxas built the kernel
        line = next(line for line in out.splitlines() if line.startswith("registers and spills"))
        assert re.search(r"h100 \d+/thread, 0 B spilled; a100 \d+/thread, 0 B spilled", line), line


def test_flash_over_shared_memory_is_refused_at_the_kernels_line(cli):
    # 256x128 bf16 tiles of k and v are 128 KiB a stage; four stages are over H100's 227 KiB
    code, out, err = cli("check", FLASH, "--target", "h100", "--args", "bf16[1,256,2,128] bf16[1,256,2,128] bf16[1,256,2,128]",
                         "--set", "block_k=256", "--set", "num_stages=4")
    assert code == 1, err
    line = next(line for line in out.splitlines() if "compile-shared-memory-oom" in line)
    assert "samples/gpu_attention.py:" in line and "Shared memory size limit exceeded" in out


@pytest.mark.parametrize("entry", _entries("samples/jax_gpu_kernels.py"))
def test_jax_gpu_kernel_opens_in_the_pallas_view(cli, entry):
    code, out, err = cli("show", f"samples/jax_gpu_kernels.py:{entry}", "--target", "h100", "--view", "pallas")
    assert code == 0, err
    assert "pallas_call at" in out and "XLA:GPU's kernels for h100" in out
    assert not [line for line in out.splitlines() if line.lstrip().startswith("error")], out


def test_the_parametrized_entries_are_every_kernel_the_sample_names():
    assert _entries("samples/jax_gpu_kernels.py") == ["attention", "layer_norm", "rms_norm", "softmax",
                                                     "decode_attention", "paged_attention"]


def test_a_pallas_tpu_kernel_for_a_gpu_is_said_to_be_written_for_tpu(cli):
    # jax's own words blame the install ("install jaxlib GPU"); the TPU kernel has no shared-memory budget
    code, out, err = cli("check", "samples/attention.py:flash", "--target", "h100", "--args",
                         "bf16[1,256,64] bf16[1,256,64] bf16[1,256,64]", "--set", "block_q=128", "--set", "block_k=128")
    assert code == 1, err
    errors = [line for line in out.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "compile-error" in errors[0] and "flash_attention_fwd at kernels/flash_attention.py:" in out
    assert "a Pallas TPU kernel (Mosaic's CompilerParams), which cannot compile for a GPU (h100)" in " ".join(out.split())
    assert "jaxlib" not in out and "shared memory" not in out and "VMEM" not in out
