"""The VMEM estimate (and every view and check) on kernels held out from its fitting
(tests/data/heldout10; round ten): five Pallas TPU kernels whose body
computes matmul results in straight-line code and does something other than a softmax with them,
from three repositories nobody on the team had read (vllm-project/vllm's TPU LoRA kernel, the Keras
developer guide's fused Dense + ReLU, and three kernels Google's accelerator-agents MaxKernel
generator wrote for KernelBench level 2), run the way a new user runs them at small shapes: every
view on the CPU and on v5e, check (the estimate on three generations, libtpu's compile on v5e: tests/test_corpus_heldout.py). A
correct kernel gets no error finding at those shapes. tests/data/vmem_truth_heldout10.json holds
libtpu's verdicts at shapes across the VMEM limits (make_vmem_truth.py --heldout10), which the
estimate is held to here without compiling again, at what it measured with the rules as they
stood (56c87d5): four rows "does not fit" where libtpu fits, none "fits" where it runs out; all
agree since (below).

- vLLM's multi-LoRA bgmv: a (token, rank, dim) block grid, the adapter index per token
  scalar-prefetched, the (N, rank, dim) block of every adapter; the body a Python loop over the
  block's tokens, per token a (tokens, dim) x (rank, dim)^T matmul masked to its row and added to
  an f32 scratch accumulator;
- the Keras guide's fused matmul + ReLU: (tile_m, K) and (K, tile_n) blocks, one pl.dot, a
  jnp.maximum and a store into the (tile_m, tile_n) output block;
- MaxKernel's Dense + SiLU + scaling: the whole (out, in) weight as a block that never moves,
  transposed in the body (weight_ref[...].T) for the matmul;
- MaxKernel's Dense + SiLU / 2, clip, tanh, clip: a 2-D tiled grid, jnp.clip (a jitted helper);
- MaxKernel's Dense + LayerNorm over the features + residual add and multiply: the matmul result's
  row mean and variance, then the result used whole.

All five files are Apache-2.0."""
from __future__ import annotations

from conftest import HeldOut, truth_outcome
from inspector.compilation.target import load_target

ROUND = HeldOut("heldout10")


def kmr(m: int, k: int, n: int, tm: int, tn: int, chip: str) -> tuple:
    return ("keras_matmul_relu", f"f32[{m},{k}] f32[{k},{n}]", {"tile_m": tm, "tile_n": tn}, chip)


def gsw(rows: int, k: int, n: int, b: int, chip: str) -> tuple:
    return ("maxkernel_gemm_swish", f"f32[{rows},{k}] f32[{n},{k}] f32[{n}]", {"b_batch": b}, chip)


def gst(m: int, k: int, n: int, bm: int, bn: int, chip: str) -> tuple:
    return ("maxkernel_gemm_swish_tanh", f"f32[{m},{k}] f32[{k},{n}] f32[{n}]", {"bM": bm, "bN": bn}, chip)


def gln(rows: int, k: int, n: int, block: int, chip: str) -> tuple:
    return ("maxkernel_gemm_layernorm", f"f32[{rows},{k}] f32[{rows},{n}] f32[{k},{n}] f32[{n}] f32[{n}] f32[{n}]",
            {"block_size": block}, chip)


def bgmv(tokens: int, dim: int, loras: int, rank: int, tb: int, rb: int, db: int, chip: str) -> tuple:
    return ("vllm_lora_bgmv", f"i32[{tokens}] bf16[{tokens},{dim}] bf16[{loras},{rank},{dim}]",
            {"token_block": tb, "rank_block": rb, "dim_block": db}, chip)


# Measured with the rules of 56c87d5 (no change made for these kernels), 57 rows (19 shapes on three
# chips, chosen from the blocks' and the f32 matmul results' sizes before the estimate was looked
# at), 47 that libtpu fits and 10 it runs out on: 46 agree, 7 undecided, no "fits" where libtpu runs
# out, 4 "does not fit" where libtpu fits.
# - false errors: the estimate holds as certain "a value the body computes whole" (less the
#   registers) that libtpu never builds: in MaxKernel's Dense + SiLU the in-body transpose of the
#   whole weight (weight_ref[...].T, 4 MiB at in 512, out 2048); in its Dense + SiLU/clip/tanh an
#   element-wise value of the matmul result's size inside jnp.clip's jitted helper (4 and 8 MiB),
#   with room for a second. libtpu's figure is the blocks alone in all four (12.01, 14.01, 25.26,
#   28.21 MiB): it fuses the transpose into the matmul and builds the epilogue in the output block.
# - undecided: room for 0.8 of the straight-line matmul results (rule unrolled_dots) puts the total
#   over the limit where libtpu keeps none of them: the Keras kernel at an 8 MiB result on v6e
#   (libtpu 25.00 and 28.00 MiB, its blocks), MaxKernel's Dense + SiLU at a 12 MiB result on v6e and
#   TPU7x, vLLM's bgmv at 128 x 256 KiB of unrolled results on v5e (libtpu 4.90 MiB, its blocks
#   4.81); and the Dense + SiLU/clip/tanh on TPU7x at 8 MiB.
# Since a transpose only matmuls read is no value of its own, jitted helpers' equations are followed
# in place of their call, and (where the body holds no matmul result whole) a result that
# element-wise ops alone carry into a store of its size takes no room (libtpu builds it in the
# output block: 0.00-0.25 MiB beyond the blocks in these kernels' 16 compiles on v5e and v6e), all
# 57 agree; no other row on record changes.
FALSE_ERRORS = [gst(2048, 256, 2048, 1024, 1024, "tpu-v5e"), gsw(1024, 512, 2048, 512, "tpu-v5e"),
                gst(2048, 384, 4096, 1024, 2048, "tpu-v6e"), gst(2048, 512, 4096, 1024, 2048, "tpu-v6e")]
UNDECIDED = [kmr(2048, 384, 4096, 1024, 2048, "tpu-v6e"), kmr(2048, 512, 4096, 1024, 2048, "tpu-v6e"),
             gsw(2048, 256, 3072, 1024, "tpu-v6e"), gsw(2048, 256, 3072, 1024, "tpu-7x"),
             gst(2048, 384, 4096, 1024, 2048, "tpu-7x"), gst(2048, 512, 4096, 1024, 2048, "tpu-7x"),
             bgmv(256, 256, 16, 1024, 128, 512, 128, "tpu-v5e")]
# Since values that stream into reductions are not counted whole (body_dots._streams_into_reductions:
# jnp.var's centred and squared values, summed), MaxKernel's LayerNorm at 384-row blocks is
# undecided where libtpu runs out at 16.39 of 16 (v5e) and 33.75 of 32 (v6e): the certain figures
# had been over libtpu's (16.15 and 32.17 MiB; 22.05 where it needs 18.30), now 13.40 and 26.42
# and the matmul result whose LayerNorm is stored whole, held beside its output block (0.9 of it
# certain, rule stored_dot: libtpu kept 1.0-1.7x), takes the v5e row over, as libtpu says
STREAMED = [gln(768, 128, 4096, 384, "tpu-v6e")]
# Undecided since issue 56: a matmul's spill bounded by its shapes (its whole f32 result beside the
# blocks, rule matmul_lowering) takes these over the limit where libtpu fits them with its blocks and
# 0.00-0.25 MiB; and the v5e LayerNorm at 384 rows (16.39 of 16 where libtpu runs out), whose "does
# not fit" rested on its body's value, 15.87 MiB being certain
SPILL_BOUND = [gst(2048, 256, 2048, 1024, 1024, "tpu-v5e"), kmr(2048, 256, 2048, 1024, 1024, "tpu-v5e"),
               gsw(1024, 512, 2048, 512, "tpu-v5e"), gst(2048, 384, 4096, 1024, 2048, "tpu-v6e"),
               kmr(2048, 384, 4096, 1024, 2048, "tpu-v6e"), gst(2048, 512, 4096, 1024, 2048, "tpu-v6e"),
               gst(2048, 512, 4096, 1024, 2048, "tpu-7x"), kmr(2048, 512, 4096, 1024, 2048, "tpu-v6e"),
               kmr(2048, 512, 4096, 1024, 2048, "tpu-7x"), gsw(2048, 256, 3072, 1024, "tpu-v6e"),
               gsw(2048, 256, 3072, 1024, "tpu-7x")]
CERTAIN_ONLY = [gln(768, 128, 2048, 384, "tpu-v5e")]


def test_the_estimate_never_says_does_not_fit_where_libtpu_fits():
    _, outcome = truth_outcome("vmem_truth_heldout10.json")
    assert outcome["false error"] == []


def test_the_estimate_against_libtpu_across_the_limits():
    """57 rows, 10 that libtpu runs out on: all but STREAMED, SPILL_BOUND and CERTAIN_ONLY agree,
    the four that were false errors and the rows once undecided but those among them. Held at that, so that a change that does worse
    fails here."""
    rows, outcome = truth_outcome("vmem_truth_heldout10.json")
    assert len(rows) == 57 and sum(not r["compiler_fits"] for r in rows) == 10
    assert set(map(repr, [u for u in UNDECIDED + FALSE_ERRORS if u not in SPILL_BOUND])) <= set(map(repr, outcome["agree"]))
    assert sorted(map(repr, outcome["undecided"])) == sorted(map(repr, STREAMED + SPILL_BOUND + CERTAIN_ONLY))
    assert len(outcome["agree"]) == 44, {k: len(v) for k, v in outcome.items()}


def test_the_lora_kernel_runs_on_the_cpu_and_matches_its_reference():
    """The Python loop over the block's tokens, each its own adapter gathered by a scalar-prefetched
    index: the interpreter's output is the reference's."""
    from inspector.run import run_diff

    result = run_diff(load_target(ROUND.names["vllm_lora_bgmv"]), runs=0)
    assert result.ok and [l.ok for l in result.outputs] == [True]
