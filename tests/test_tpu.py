"""Deviceless compiles through libtpu, one small function per TPU generation."""
import json
import re

import jax

import pytest

from conftest import DATA
from inspector.compilation import compile_paths
from inspector.compilation.backends import Backend
from inspector.base.chips import CHIPS, get_chip
from inspector.base.errors import UsageError
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

FUNCS = str(DATA / "funcs.py")
pytestmark = pytest.mark.libtpu


@pytest.mark.parametrize("chip", [c for c in CHIPS if c.is_tpu], ids=lambda c: c.name)
def test_compiles_for_each_generation(chip):
    stages = capture(load_target(f"{FUNCS}:matmul", args="f32[256,512] f32[512,256]"), Backend(chip)).stages
    assert stages.compile_error is None
    assert stages.device_kind == chip.device_kind
    # TPU-optimized HLO keeps tiled layouts and the per-op backend_config the fusion view reads.
    assert ":T(8,128)" in stages.hlo
    assert '"estimated_cycles"' in stages.hlo
    assert stages.cost["flops"] == pytest.approx(2 * 256 * 512 * 256, rel=0.05)


def test_live_vmem_failure_is_a_finding_with_the_compilers_figures(cli_run):
    out = cli_run("show", "samples/attention.py:flash", "--target", "tpu-v5e", "--args",
                  "bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]", "--set", "block_q=4096",
                  "--set", "block_k=512", "--json")
    assert out.returncode == 1, out.stderr
    assert out.stderr == ""  # neither libtpu's start-up noise nor jax's logs reach the user
    report = json.loads(out.stdout)
    assert report["ok"] is False
    errors = {f["code"]: f for f in report["findings"] if f["severity"] == "error"}
    # the compile's refusal, and the estimate's own: the (4096, 512) f32 scores its softmax sums are held
    assert set(errors) == {"compile-vmem-oom", "vmem-over-limit"}
    assert "a matmul result whose softmax the body sums" in errors["vmem-over-limit"]["message"]
    finding = errors["compile-vmem-oom"]
    assert finding["data"]["limit_bytes"] == 16 * 2**20
    assert finding["data"]["used_bytes"] > finding["data"]["limit_bytes"]
    assert report["stages"]["compile_error"]["vmem"]["scope"] == "scoped"


def test_same_kernel_fits_the_larger_v6e_scoped_limit():
    target = load_target("samples/attention.py:flash", args="bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
                         sets=["block_q=4096", "block_k=512"])
    assert capture(target, Backend(get_chip("tpu-v6e"))).stages.compile_error is None


def test_mosaic_view_titles_each_kernel(cli_run):
    out = cli_run("show", "samples/attention.py:flash", "--target", "tpu-v6e", "--view", "mosaic",
                  "--args", "bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]")
    assert out.returncode == 0, out.stderr
    # Mosaic's passes and relayouts first, then each kernel's MLIR under its title
    title = next(line for line in out.stdout.splitlines() if line.startswith("// ====="))
    assert title.startswith("// ===== flash_attention_fwd") and "kernels/flash_attention.py:" in title
    assert out.stdout.index("relayout-insertion") < out.stdout.index(title)
    assert "tpu.memory_space<vmem>" in out.stdout and "dimension_semantics" in out.stdout


def test_mosaic_view_on_cpu_says_why_it_is_empty(cli_run):
    out = cli_run("show", "samples/attention.py:naive", "--args", "f32[1,8,8] f32[1,8,8] f32[1,8,8]", "--view", "mosaic")
    assert out.returncode == 0 and "not a TPU" in out.stdout


def test_missing_libtpu_is_one_line_and_local_targets_still_work(monkeypatch):
    monkeypatch.setattr(compile_paths, "libtpu_available", lambda: False)
    with pytest.raises(UsageError, match=rf"pip install 'jax\[tpu\]=={re.escape(jax.__version__)}'"):
        Backend(get_chip("tpu-v5e"))
    assert Backend(get_chip("cpu")).platform == "cpu"
