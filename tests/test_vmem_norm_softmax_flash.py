"""The VMEM estimate (and every view and check) on LayerNorm, row softmax and flash attention kernels
held out from its fitting (tests/data/heldout8; round eight): four Pallas TPU kernels from three
repositories nobody on the team had read (google/flax's ogbg_molpcba example, AMLeng/tpu-kernels,
aabhimittal/TPU-Native-Pallas-FlashAttention), run the way a new user runs them at small shapes:
every view on the CPU and on v5e, check (the estimate on three generations, libtpu's compile on
v5e: tests/test_corpus_heldout.py). A correct kernel gets no error finding, and the estimate never says "does not fit" where
libtpu fits it: tests/data/vmem_truth_heldout8.json holds libtpu's verdicts at shapes across the
VMEM limits (make_vmem_truth.py --heldout8), which the estimate is held to here without compiling
again.

- flax's fused LayerNorm (the GNN example's): a 1-D grid of (block_size, dim) row blocks, rows
  padded up to the block, gamma and beta as rank-1 (dim,) blocks, the body in f32, no
  compiler_params at all; dim 64 (the model's latent size), a last dim under the 128 lanes;
- AMLeng's row softmax: (bm, hidden) slabs of full rows, in and out, the body's max/exp/sum/divide
  in f32, no compiler_params, no scratch;
- TPU-Native-Pallas-FlashAttention's forward (MIT): a (batch, heads, q blocks, kv blocks) grid, GQA
  in the k/v index map, head_dim 64, a second output (the f32 log-sum-exp) as (1, 1, block_q, 1)
  blocks, three f32 VMEM scratch buffers, an online softmax under pl.when with block skipping;
- its fused-RoPE forward (MIT): the same with four 2-D cos/sin tables as extra inputs indexed by
  the q or kv block, q and k rotated in f32 in the body.

Two of the four files are MIT, not Apache: the vendored check names them."""
from __future__ import annotations

from conftest import HeldOut, truth_outcome
from inspector.compilation.target import load_target

ROUND = HeldOut("heldout8")


def test_the_estimate_never_says_does_not_fit_where_libtpu_fits():
    _, outcome = truth_outcome("vmem_truth_heldout8.json")
    assert outcome["false error"] == []


# Measured first with the rules of e9c2d10, no change made for these kernels: 41 agree, 6
# undecided, none "does not fit" where libtpu fits, and four "fits" where libtpu runs out:
# - AMLeng's softmax, bf16[4096,8192], bm 256 on v5e and bm 512 on v6e and TPU7x: the blocks alone
#   (16 and 32 MiB, exactly the limit), no body value; libtpu needs 23.8 and 47.92 MiB, the blocks
#   and an f32 copy of a block. Its f32 exponentials were taken as built in the output block they
#   are stored into, which is bf16: too narrow (body_dots._built_in_ref);
# - the fused-RoPE attention, blocks (2048, 512), causal, on v5e: 14.5 MiB counted of 16, libtpu
#   needs 17.41: the RoPE'd q and k the matmul needs whole beside the scores, now room a "fits"
#   leaves (vmem.py).
# With those fixed (and what is certain within the register file of the limit taken as over, a
# value only reductions read not counted, values counted in their vreg tiles): 42 agree, 9
# undecided, 0 wrong. Undecided: flax's LayerNorm (4 rows: at dim 64 its values are twice their
# elements' bytes, and x and out may be placed whole in VMEM by XLA, which copies them out of their
# TPU layout), AMLeng's softmax where libtpu
# fits (3: room for a second f32 block-sized value), the fused RoPE at (2048, 512) on v5e and
# (4096, 1024) on TPU7x (2).
# Since a "fits" leaves room for row statistics where they are the body's largest values
# (rule row_statistics: LayerNorm's (rows, 1) mean and variance take rows / 8 vregs each),
# LayerNorm at blocks 8192 and 16384 on v5e and 16384 on v6e, which libtpu fits at 6.49-13.21 MiB with
# their blocks placed outside the limit, are undecided (room in the body means placement is not relied
# on); at 16384 and 2048 on TPU7x, whose blocks alone reach the 32 MiB limit, a body value beside them
# is over, as libtpu says (43.70 and 35.00 MiB). 41 agree, 10 undecided.


def test_the_estimate_against_libtpu_across_the_limits():
    """51 rows (17 shapes on three chips, chosen from the blocks' sizes before the estimate was
    looked at), 14 that libtpu fits and 37 it runs out on: 41 agree, 10 undecided, no "fits" where
    libtpu runs out and no "does not fit" where it fits (above). Held at that, so that a change
    that does worse fails here. 46 now: AMLeng's softmax, which has no matmul, leaves no room for a
    second value of its size (libtpu kept one: tests/data/second_values.py)."""
    rows, outcome = truth_outcome("vmem_truth_heldout8.json")
    assert len(rows) == 51 and sum(not r["compiler_fits"] for r in rows) == 37
    assert outcome["false error"] == [], outcome["false error"]
    assert outcome["short"] == [], outcome["short"]
    assert len(outcome["agree"]) >= 46, {k: len(v) for k, v in outcome.items()}


def test_the_flash_attention_runs_on_the_cpu_and_matches_its_reference():
    """head_dim 64, GQA, the f32 log-sum-exp output: the interpreter's result is the reference's."""
    from inspector.run import run_diff

    result = run_diff(load_target(ROUND.names["pallasflash_attention"]), runs=0)
    assert result.ok and [l.ok for l in result.outputs] == [True]
