"""The Pallas model's walk of pipelines nested in a kernel (pltpu.emit_pipeline inside a
pallas_call body), on kernels held out from its writing (tests/data/heldout5; round five):
four tpu-inference kernels that run
pltpu.emit_pipeline inside a pallas_call body, the style the nested-pipeline walk reads, run the
way a new user runs them at small shapes: show on the CPU and on v5e, check (the estimate on
three generations, libtpu's compile on v5e), diff in interpret mode (tests/test_corpus_heldout.py,
this round's row). A correct kernel gets no error finding, and the estimate never says "does not
fit" where libtpu fits it.

- DeepSeek-V4 rope (three entries): the pipeline gets its buffers from the caller
  (allocations=, a BufferedRef subclass that gathers rows by position, an input_output buffer),
  which the inspector did not see at all before this round (now an info: not walked);
- 2-D quantized matmul (two entries): the pipeline windows the pallas_call's VMEM blocks, so its
  copies stay in VMEM (the walk counted them as HBM reads before this round);
- DeepSeek-V4 projection into a paged cache: a walked pipeline over HBM refs whose body writes
  the results by hand (paged DMAs), which the walk dropped as if they were the pipeline's copies;
- GDN decode: the pipeline's grid is computed in the kernel, so it is not walked (an info). Its
  diff is a true error: the state written back from a VMEM buffer at pipeline step b is waited
  at step b + 2, but step b + 1 already prefetches the next states into that buffer, so what
  reaches HBM depends on when the DMAs run (eager DMAs match the reference, the interpreter's
  order does not: tokens 0-7 get the states of tokens 4-11)."""
from __future__ import annotations


import pytest

from conftest import HeldOut, errors, shared_report
from inspector.base.chips import get_chip
from inspector.compilation.target import load_target

ROUND = HeldOut("heldout5")


@pytest.mark.parametrize("name", ["w8a8_int8", "w8a16_int8"])
def test_a_pipeline_over_the_calls_vmem_blocks_moves_nothing_from_hbm(name):
    """A (1, 2) grid of (8, 16384) bf16 activations, (128, 16384) int8 weights and (128, 128) f32
    scales, each block fetched once: 4.38 MiB from HBM. The body's pipeline copies 8192-wide slices
    of those blocks within VMEM (2 steps per grid step); the walk said 9 MiB before this round."""
    [k] = shared_report(ROUND.names[name], "cpu").pallas
    [pipeline] = k.pipelines
    assert pipeline.steps == 2 and pipeline.hbm_bytes_read == 0 and pipeline.onchip_bytes > 0
    assert k.walk.hbm_bytes_read == 8 * 16384 * 2 + 256 * 16384 + 128 * 256 * 4
    assert k.walk.hbm_bytes_written == 8 * 256 * 2


def test_the_pipelines_blocks_and_the_copies_its_body_starts_are_both_traffic():
    """The (1, 2, 2) pipeline reads four (2048, 256) bf16 weight blocks (4 MiB), the (16, 2048)
    activations at each step (4 x 64 KiB) and the positions once; ape (4 KiB) is the call's VMEM
    block. The paged writes its body starts by hand (16 tokens x 2 slots x 512 B per tile, one
    tile late; 14 of 16 tokens have a slot) are HBM writes, counted at their most (every pl.when
    taken): 28 KiB really, at most 144 KiB. They were dropped as pipeline copies (16 KiB: the
    epilogue's only)."""
    [k] = shared_report(ROUND.names["proj_and_save_state_rows"], "cpu").pallas
    [pipeline] = k.pipelines
    assert pipeline.steps == 4 and [o.transfers for o in pipeline.operands] == [4, 4, 1]
    assert k.walk.hbm_bytes_read == 4 * 2048 * 256 * 2 + 4 * 16 * 2048 * 2 + 16 * 4 + 4 * 256 * 4
    assert 14 * 2 * 2 * 512 <= k.walk.hbm_bytes_written <= 144 * 1024
    assert not errors(k.findings) and "pipeline-not-walked" not in {f.code for f in k.findings}


def test_a_pipeline_whose_grid_the_kernel_computes_is_said_not_walked():
    [k] = shared_report(ROUND.names["gdn_decode"], "cpu").pallas
    assert k.pipelines == []
    [f] = [f for f in k.findings if f.code == "pipeline-not-walked"]
    assert f.severity == "info" and "computed inside the kernel" in f.message


@pytest.mark.parametrize("name", ["rope", "qnorm_rope", "rope_quant"])
def test_a_pipeline_given_its_allocations_is_said_not_walked(name):
    """emit_pipeline(...)(..., allocations=) under pl.with_scoped makes no scope of its own, and
    its CosSinRef gathers rows by position whatever its index map says: it went unseen (no walk,
    no finding); now an info says it is not walked, and its copies are the body's DMAs."""
    [k] = shared_report(ROUND.names[name], "cpu").pallas
    assert k.pipelines == []
    [f] = [f for f in k.findings if f.code == "pipeline-not-walked"]
    assert f.severity == "info" and "allocations=" in f.message
    assert k.call.dmas and k.walk.hbm_bytes_read > 0


@pytest.mark.libtpu
def test_a_pipeline_traced_from_jaxs_cache_gets_its_own_grid_not_the_last_one_noted():
    """The same kernel at two sizes, then the first again: jax's trace cache runs no Python the
    third time, so the note of its pipeline is the first trace's, not the second's (a full test
    run once moved the bytes of nine truth rows this way: the latest note of the line was taken)."""
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs

    def walked(rows: int) -> int:
        target = load_target("tests/data/pipelines/cached_pipeline.py:doubled", args=f"f32[{rows},128]")
        (p,) = make_report(target, get_chip("tpu-v5e"), Needs(compile=False, pallas=True)).pallas
        (pipe,) = p.pipelines
        return pipe.steps

    assert walked(64) == 8
    assert walked(256) == 32
    assert walked(64) == 8
