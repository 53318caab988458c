"""Regenerate tests/data/vmem_truth.json: libtpu's verdict (fits or not, and its VMEM figure) for
every pallas_call target of the corpus, each combination of its INSPECT params, on every TPU
generation, beside the inspector's static estimate. tests/test_corpus.py checks the estimate
against it. Run from the repository root (takes a while: one real compile per row):

    .venv/bin/python tests/data/make_vmem_truth.py [TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --styles
    .venv/bin/python tests/data/make_vmem_truth.py --heldout [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout6 [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout7 [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout8 [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout9 [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout10 [PART-OF-A-TARGET ...]
    .venv/bin/python tests/data/make_vmem_truth.py --heldout11 [PART-OF-A-TARGET ...]

``--styles`` writes tests/data/vmem_truth_styles.json instead, from the kernels written in the
styles of third-party ones (tests/data/third_party_styles.py; tests/test_pallas_third_party_styles.py).

``--heldout`` writes tests/data/vmem_truth_heldout.json: the vendored third-party kernels of
tests/data/heldout3/ at shapes that straddle the limits (HELDOUT), on v5e, v6e and TPU7x. The
estimate's shares were not fitted on them (tests/test_corpus_model_kernels.py measures it against them).

``--heldout6`` writes tests/data/vmem_truth_heldout6.json the same way from the kernels of
tests/data/heldout6/ (HELDOUT6), without the estimate's figures (the rules change; the test
recomputes them): libtpu's verdicts only.

``--heldout7`` writes tests/data/vmem_truth_heldout7.json the same way from the kernels of
tests/data/heldout7/ (HELDOUT7): libtpu's verdicts only.

``--heldout8`` writes tests/data/vmem_truth_heldout8.json the same way from the kernels of
tests/data/heldout8/ (HELDOUT8): libtpu's verdicts only.

``--heldout9`` writes tests/data/vmem_truth_heldout9.json the same way from the kernels of
tests/data/heldout9/ (HELDOUT9): libtpu's verdicts only.

``--heldout10`` writes tests/data/vmem_truth_heldout10.json the same way from the kernels of
tests/data/heldout10/ (HELDOUT10): libtpu's verdicts only.

``--heldout11`` writes tests/data/vmem_truth_heldout11.json the same way from the kernels of
tests/data/heldout11/ (HELDOUT11): libtpu's verdicts only.

``--heads`` writes tests/data/vmem_truth_heads.json the same way from the team's own kernels of
tests/data/head_loops.py (HEADS: attention over several heads in straight-line code, written to
test one claim of the estimate): libtpu's verdicts only.

``--statistics`` writes tests/data/vmem_truth_statistics.json the same way from the team's own
kernels of tests/data/row_statistics.py (STATISTICS: row statistics the body's largest values).

``--reductions`` writes tests/data/vmem_truth_reductions.json the same way from the team's own
kernels of tests/data/row_reductions.py (REDUCTIONS: one block reduced along its rows 1 to 4 times).

``--checks`` writes tests/data/vmem_truth_checks.json from CHECKS: shapes of kernels on record not
compiled before, on a grid around the limits, whose verdicts were predicted before compiling to check
the rules of 2026-12-03 (tests/test_vmem_estimate_checks.py).

``--gated`` writes tests/data/vmem_truth_gated.json the same way from the team's own kernels of
tests/data/gated_units.py (GATED: two matmul results that meet, SwiGLU's); ``--second`` writes
tests/data/vmem_truth_second.json from tests/data/second_values.py (SECOND: values the size of the
largest a body computes, with and without matmuls, and more results that meet).

``--quantized`` writes tests/data/vmem_truth_quantized.json from the team's kernels of
tests/data/quantized_matmul.py (QUANTIZED: fp8, int8 and bf16 blocked matmuls with scales, megablox's
gmm) on v5e, v5p, v6e and TPU7x: the shapes the causes were found on, then PREDICTED's, whose
verdicts were written to tests/data/vmem_predictions_quantized.json before they were compiled.

``--variants`` writes tests/data/vmem_truth_variants.json from the team's kernels of
tests/data/quantized_variants.py (VARIANTS: quantized matmuls in other styles and dtypes, megablox's
gmm, gmm with a transposed rhs, f32 gmm and tgmm at other tilings) on v5e, v5p, v6e and TPU7x;
``--predict-variants`` writes, without compiling, the estimate's verdict on each of those rows to
tests/data/vmem_predictions_variants.json (run it first: the predictions are made before the compiles).
``--variants2`` and ``--predict-variants2`` do the same for VARIANTS2, a second round predicted with the
rules as they stood after the first round (tests/data/vmem_truth_variants2.json,
tests/data/vmem_predictions_variants2.json).
``--block-scaled`` and ``--predict-block-scaled`` do the same for BLOCK_SCALED (issue 56: quantized
matmuls with per-block scales, megablox's gmm with a ragged K and into an existing output;
tests/data/vmem_truth_block_scaled.json, tests/data/vmem_predictions_block_scaled.json);
``--block-scaled2`` and ``--predict-block-scaled2`` a second round of them, predicted with the rules after
the first (tests/data/vmem_truth_block_scaled2.json, tests/data/vmem_predictions_block_scaled2.json).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("vmem_truth.json")
STYLES_OUT = Path(__file__).with_name("vmem_truth_styles.json")
STYLES = "tests/data/third_party_styles.py"
HELDOUT_OUT = Path(__file__).with_name("vmem_truth_heldout.json")
HELDOUT_CHIPS = ("tpu-v5e", "tpu-v6e", "tpu-7x")
HELDOUT6_OUT = Path(__file__).with_name("vmem_truth_heldout6.json")
HELDOUT7_OUT = Path(__file__).with_name("vmem_truth_heldout7.json")
HELDOUT8_OUT = Path(__file__).with_name("vmem_truth_heldout8.json")
HELDOUT9_OUT = Path(__file__).with_name("vmem_truth_heldout9.json")
HELDOUT10_OUT = Path(__file__).with_name("vmem_truth_heldout10.json")
HELDOUT11_OUT = Path(__file__).with_name("vmem_truth_heldout11.json")
HEADS_OUT = Path(__file__).with_name("vmem_truth_heads.json")
STATISTICS_OUT = Path(__file__).with_name("vmem_truth_statistics.json")
REDUCTIONS_OUT = Path(__file__).with_name("vmem_truth_reductions.json")
GATED_OUT = Path(__file__).with_name("vmem_truth_gated.json")
SECOND_OUT = Path(__file__).with_name("vmem_truth_second.json")
CHECKS_OUT = Path(__file__).with_name("vmem_truth_checks.json")
QUANTIZED_OUT = Path(__file__).with_name("vmem_truth_quantized.json")
QUANTIZED_CHIPS = ("tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x")
CORPUS = ["samples/jax_kernels.py", "samples/attention.py", "samples/matmul.py", "samples/moe.py", "samples/bugs.py"]
MAX_COMBINATIONS = 8  # per target: the first combinations INSPECT offers (the defaults first)
# Shapes and blocks that straddle the VMEM limits (the corpus's own shapes fit everywhere):
# (target, example inputs, every combination of these params).
STRESS = [
    ("samples/jax_kernels.py:flash_attention", "f32[1,1,4096,128] f32[1,1,4096,128] f32[1,1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_k_major": [1024, 4096], "block_k": [512, 1024]}),
    ("samples/jax_kernels.py:matmul", "f32[4096,4096] f32[4096,4096]",
     {"bm": [512, 1024, 2048], "bn": [512, 1024, 2048], "bk": [512, 1024, 2048]}),
    ("samples/jax_kernels.py:splash_mha_causal", "bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_kv": [1024, 2048, 4096], "block_kv_compute": [1024]}),
    ("samples/jax_kernels.py:gmm", None, {"tm": [256, 512], "tk": [128, 256], "tn": [128, 256]}),
    ("samples/attention.py:flash", "bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_k": [512, 1024, 2048]}),
    ("samples/matmul.py:tiled", "bf16[4096,4096] bf16[4096,4096]",
     {"bm": [1024, 2048], "bn": [1024, 2048], "bk": [1024, 2048]}),
]

H3 = "tests/data/heldout3/"
WAN_Q = "bf16[1,18944,5120] bf16[1,512,5120] bf16[1,512,5120]"
WAN_ROPE = "bf16[1,18944,5120] bf16[1,18944,5120] f32[5120] f32[5120] c64[1,1,18944,64]"
WKV = " ".join(["f32[4,4096,32,64]"] * 6 + ["f32[4,32,64,64]"])
# The held-out kernels (tests/data/heldout3/) at production-like shapes whose blocks straddle the
# limits: 16 MiB scoped on v5e, 32 MiB on v6e and TPU7x, 64 MiB where the kernel sets
# vmem_limit_bytes (cross attention, rmsnorm+rope). Left out: maxtext_ring_ag (a collective: on one
# chip Mosaic refuses it) and maxtext_gather_reduce_sc (a SparseCore pl.kernel: no pallas_call).
HELDOUT = [
    (H3 + "sglang_biased_topk.py:biased_topk_pallas", "f32[8192,256] f32[256]",
     {"block_tokens": [1024, 2048, 4096], "topk": [8, 2]}),
    (H3 + "recurrentgemma_lru.py:lru_pallas_scan", "f32[2,4096,4096] f32[2,4096,4096] f32[2,4096]",
     {"max_seq_block_size": [512, 1024, 2048], "reverse": [False]}),
    (H3 + "recurrentgemma_lru.py:lru_pallas_scan", "f32[2,4096,4096] f32[2,4096,4096] f32[2,4096]",
     {"max_seq_block_size": [1024], "reverse": [True]}),
    (H3 + "sglang_fused_mlp.py:fused_mlp", "bf16[4096,4096] bf16[4096,28672] bf16[14336,4096]",
     {"b_seq": [128, 256, 512], "b_inter": [256, 512]}),
    (H3 + "maxtext_rwkv7_wkv.py:wkv7_pallas", WKV,  # the chunked form allows chunks of 128 at most
     {"algorithm": ["recurrent"], "chunk_size": [1024, 2048, 4096]}),
    (H3 + "maxtext_ragged_attention.py:ragged_mqa", "bf16[8,128,128] bf16[8,32768,128] bf16[8,32768,128] i32[8]",
     {"block_size": [4096, 8192, 16384]}),
    (H3 + "maxtext_ragged_attention.py:ragged_mqa", "bf16[8,512,128] bf16[8,32768,128] bf16[8,32768,128] i32[8]",
     {"block_size": [2048, 4096, 8192]}),
    (H3 + "maxtext_ragged_attention.py:ragged_mha", "f32[2,1,4,128] f32[2,8192,4,128] f32[2,8192,4,128] i32[2]",
     {"block_size": [2048, 8192]}),
    (H3 + "sglang_h0_clone.py:clone_slots_inplace", None, None),
    (H3 + "maxtext_moe_topk.py:fused_topk_gating", "f32[8,8192,256]", {"k": [8]}),  # top_k: no Mosaic rule
    (H3 + "maxdiffusion_rmsnorm_rope.py:fused_rmsnorm_rope_pallas", WAN_ROPE,
     {"q_heads": [40], "block_s": [1024, 2048, 4096], "head_block": [8, 10], "norm_mode": ["exact"]}),
    (H3 + "maxdiffusion_rmsnorm_rope.py:fused_rmsnorm_rope_pallas", WAN_ROPE,
     {"q_heads": [40], "block_s": [2048], "norm_mode": ["fused"]}),
    (H3 + "maxdiffusion_cross_attention.py:cross_attention_pallas", WAN_Q,
     {"heads": [40], "block_q": [1024, 2400, 4096], "head_block": [10, 20], "sum_mode": ["mxu", "vpu"]}),
    (H3 + "sglang_paged_row_write.py:paged_row_write", "bf16[65536,8192] bf16[1024,8192] i32[1024] bool[1024]",
     {"run": [256, 512]}),
]

H6 = "tests/data/heldout6/"
# Round six (tests/data/heldout6/): shapes whose blocks or body values straddle the limits: 32 MiB
# set by the kernel (jaxite's polymul, tops' chunk_fwd_h), else 16 MiB on v5e, 32 MiB on v6e and
# TPU7x. One job per shape, kernels interleaved, so that a run stopped early still has each kernel.
POLY, BAT = H6 + "jaxite_polymul.py:_decomposed_vector_matrix_polymul", H6 + "jaxite_polymul.py:negacyclic_vector_matrix_polymul_bat"
CHUNK_H, RECUR = H6 + "tops_gla_chunk_fwd_h.py:chunk_fwd_h", H6 + "tops_gla_fused_recurrent.py:fused_recurrent_gla_fwd"
CHUNK_O = H6 + "tops_gla_chunk_fwd_o.py:chunk_gla_fwd_o"
GLA = lambda b, t: " ".join([f"f32[{b},{t},2,128]"] * 2)
QKV = lambda t: " ".join([f"f32[1,{t},2,128]"] * 3)
QKV1 = lambda t: " ".join([f"f32[1,{t},1,128]"] * 3)


def gla_o(t: int, d: int, bt: int) -> str:
    """q, v, g, A, h of chunk_gla_fwd_o: one sequence of t tokens, 2 heads, K = V = d, chunks of bt."""
    return f"f32[1,{t},2,{d}] f32[1,{t},2,{d}] f32[1,{t},2,{d}] f32[1,{t},2,{bt}] f32[1,{t // bt},2,{d},{d}]"


HELDOUT6 = [
    (POLY, "i32[6,1024] i32[6,3,1024]", {}),
    (BAT, "u32[18,1024] u8[18,3,1024,4,4]", {}),
    (CHUNK_H, GLA(2, 4096), {"chunk_size": [128]}),
    (RECUR, QKV(4096), {}),
    (POLY, "i32[4,2048] i32[4,3,2048]", {}),
    (BAT, "u32[18,2048] u8[18,3,2048,4,4]", {}),
    (CHUNK_H, GLA(2, 8192), {"chunk_size": [128], "split_size": [1024]}),
    (RECUR, QKV(8192), {}),
    (POLY, "i32[2,4096] i32[2,3,4096]", {}),
    (BAT, "u32[18,1536] u8[18,3,1536,4,4]", {}),
    (CHUNK_H, GLA(2, 8192), {"chunk_size": [128]}),
    (RECUR, QKV(2048), {}),
    (BAT, "u32[18,512] u8[18,3,512,4,4]", {}),
    (CHUNK_H, GLA(1, 12288), {"chunk_size": [256], "split_size": [2048]}),
    (RECUR, QKV(6144), {}),
    (CHUNK_O, gla_o(2048, 1024, 256), {"chunk_size": [256]}),
    (RECUR, QKV(16384), {}),
    (CHUNK_O, gla_o(2048, 1024, 512), {"chunk_size": [512]}),
    (CHUNK_H, GLA(4, 16384), {"chunk_size": [256], "split_size": [8192]}),
    (CHUNK_O, gla_o(2048, 1024, 1024), {"chunk_size": [1024]}),
    (RECUR, QKV(32768), {}),
    (CHUNK_O, gla_o(1024, 2048, 128), {"chunk_size": [128]}),
    # one head, one grid step: where XLA hands the whole output to the kernel in VMEM (the rows
    # above: at 2 x 16384 tokens on v5e and v6e, not at 2 x 32768)
    (RECUR, QKV1(16384), {}),
    (RECUR, QKV1(32768), {}),
    (RECUR, QKV1(65536), {}),
]


H7 = "tests/data/heldout7/"
# Round seven (tests/data/heldout7/): none of these kernels sets vmem_limit_bytes, so the limits are
# 16 MiB scoped on v5e, 32 MiB on v6e and TPU7x. Shapes chosen from the blocks' sizes alone (before
# the estimate was looked at): double-buffered blocks of about 7-8 MiB (under everywhere), 14-20 MiB
# (near or over v5e), 28-32 MiB (over v5e, near v6e/TPU7x), 48-68 MiB (over all). One job per shape,
# kernels interleaved, so that a run stopped early still has each kernel.
DRD = H7 + "jllm_decode_ragged_dot.py:decode_ragged_dot_entry"
RD = H7 + "jllm_ragged_decode.py:ragged_decode"
RU = H7 + "jllm_ragged_update.py:ragged_update"
MM = H7 + "easydel_matmul.py:easydel_matmul"
DRD_K = "bf16[64,7168] bf16[64,7168,128] i32[64]"  # experts' (k, m) = (7168, 128): 1.75 MiB a group
DRD_M = "bf16[64,128] bf16[64,128,7168] i32[64]"  # (128, 7168): the same bytes, the output block wide
RD_ARGS = "bf16[16,16,128] bf16[16,8192,128] bf16[16,8192,128] i32[16] i32[16]"
RU_ARGS = "bf16[8,32,4096,128] bf16[4,32,2048,128] i32[4] i32[4] i32[4]"
MM_ARGS = "bf16[4096,4096] bf16[4096,4096]"


def mm(bm: int, bk: int, bn: int) -> dict:
    return {"blocksize_m": [bm], "blocksize_k": [bk], "blocksize_n": [bn]}


HELDOUT7 = [
    (DRD, DRD_K, {"block_g": [2], "block_compute": [8]}),
    (RD, RD_ARGS, {"block_bs": [8], "block_kv": [1024]}),
    (RU, RU_ARGS, {"time_window": [128]}),
    (MM, MM_ARGS, mm(512, 512, 512)),
    (DRD, DRD_K, {"block_g": [4], "block_compute": [8]}),
    (RD, RD_ARGS, {"block_bs": [8], "block_kv": [2048]}),
    (RU, RU_ARGS, {"time_window": [256]}),
    (MM, MM_ARGS, mm(1024, 512, 1024)),
    (DRD, DRD_K, {"block_g": [8], "block_compute": [8]}),
    (RD, RD_ARGS, {"block_bs": [4], "block_kv": [4096]}),
    (RU, RU_ARGS, {"time_window": [512]}),
    (MM, MM_ARGS, mm(512, 2048, 512)),
    (DRD, DRD_M, {"block_g": [8], "block_compute": [8]}),
    (RD, RD_ARGS, {"block_bs": [8], "block_kv": [4096]}),
    (RU, RU_ARGS, {"time_window": [1024]}),
    (MM, MM_ARGS, mm(1024, 1024, 1024)),
    (DRD, DRD_K, {"block_g": [16], "block_compute": [8]}),
    (RD, RD_ARGS, {"block_bs": [16], "block_kv": [2048]}),
    (MM, MM_ARGS, mm(2048, 1024, 1024)),
    (DRD, DRD_K, {"block_g": [4], "block_compute": [8], "block_n": [16]}),
    (RD, RD_ARGS, {"block_bs": [8], "block_kv": [8192]}),
    (MM, MM_ARGS, mm(2048, 512, 2048)),
]


H8 = "tests/data/heldout8/"
# Round eight (tests/data/heldout8/): none of these kernels sets vmem_limit_bytes, so the limits are
# 16 MiB scoped on v5e, 32 MiB on v6e and TPU7x. Shapes chosen from the blocks' sizes alone (before
# the estimate was looked at), counting each block's logical bytes (a last dim of 64 or 1 counted
# as it is, not padded to 128 lanes) twice: about 7-8 MiB, 14-20 MiB, 28-32 MiB, 48-68 MiB. The
# attention rows keep block_k at 128 so that the (block_q, block_k) f32 scores stay the size of a
# block. One job per shape, kernels interleaved, so that a run stopped early still has each kernel.
LN = H8 + "flax_layer_norm.py:flax_layer_norm"
SM = H8 + "amleng_softmax.py:amleng_softmax"
FA = H8 + "pallasflash_flash_attention.py:pallasflash_attention"
ROPE = H8 + "pallasflash_fused_rope.py:pallasflash_rope_attention"
LN64 = "f32[65536,64] f32[64] f32[64]"  # dim 64: the model's latent size, under the 128 lanes
LN1K = "f32[8192,1024] f32[1024] f32[1024]"
SM_ARGS = "bf16[4096,8192]"
ROPE_ARGS = "bf16[1,2,16384,128] bf16[1,1,16384,128] bf16[1,1,16384,128] f32[16384,128] f32[16384,128]"


def fa_args(seq: int) -> str:
    """q, k, v of the flash attention: head_dim 64, GQA with two query heads on one kv head."""
    return f"bf16[1,2,{seq},64] bf16[1,1,{seq},64] bf16[1,1,{seq},64]"


def attn(bq: int, bk: int) -> dict:
    return {"block_q": [bq], "block_k": [bk], "causal": [False]}


HELDOUT8 = [
    (LN, LN64, {"block_size": [8192]}),                           # 8 MiB of blocks
    (SM, SM_ARGS, {"bm": [128]}),                                 # 8 MiB
    (FA, fa_args(16384), attn(16384, 128)),                       # 8.2 MiB
    (ROPE, ROPE_ARGS, {**attn(2048, 512), "causal": [True]}),     # 7.5 MiB
    (LN, LN64, {"block_size": [16384]}),                          # 16 MiB
    (SM, SM_ARGS, {"bm": [256]}),                                 # 16 MiB
    (FA, fa_args(32768), attn(32768, 128)),                       # 16.3 MiB
    (ROPE, ROPE_ARGS, {**attn(4096, 1024), "causal": [True]}),    # 15 MiB
    (LN, LN1K, {"block_size": [1024]}),                           # 16 MiB
    (SM, SM_ARGS, {"bm": [512]}),                                 # 32 MiB
    (FA, fa_args(65536), attn(65536, 128)),                       # 32.6 MiB
    (ROPE, ROPE_ARGS, {**attn(8192, 2048), "causal": [True]}),    # 30 MiB
    (LN, LN1K, {"block_size": [2048]}),                           # 32 MiB
    (SM, SM_ARGS, {"bm": [1024]}),                                # 64 MiB
    (FA, fa_args(131072), attn(131072, 128)),                     # 65 MiB
    (ROPE, ROPE_ARGS, {**attn(16384, 4096), "causal": [True]}),   # 60 MiB
    (LN, LN64, {"block_size": [65536]}),                          # 64 MiB
]


H9 = "tests/data/heldout9/"
# Round nine (tests/data/heldout9/): none of these kernels sets vmem_limit_bytes, so the limits are
# 16 MiB scoped on v5e, 32 MiB on v6e and TPU7x. Shapes chosen from the blocks' sizes alone (before
# the estimate was looked at), each block's logical bytes counted twice (scratch and blocks that
# never move included): about 8-9.5 MiB, 16-17.5 MiB, 32-35 MiB, 48-64 MiB. Sequences at most 32768.
# One job per shape, kernels interleaved, so that a run stopped early still has each kernel.
LA = H9 + "xma_linear_attention.py:xma_linear_attention"
CONV = H9 + "xma_causal_conv.py:xma_causal_conv"
DEC = H9 + "unbound_flash_decoding.py:unbound_flash_decoding"
UFA = H9 + "unbound_flash_attention.py:unbound_flash_attention"
CONV_ARGS = "f32[1,8192,1024] f32[4,1024] f32[1,1024]"  # kernel width 4, the history 8 rows


def la_args(heads: int) -> str:
    """q, k, v of the linear attention: head_dim 128 in f32, heads a multiple of 8 (no sublane
    padding in the (S, heads, 128) blocks). The heads, not the sequence block, make the larger
    shapes: the body's Python loop over heads keeps each compile cheap where (S, S) values would
    not."""
    return " ".join([f"f32[1,4096,{heads},128]"] * 3)


def dec_args(seq: int, dim: int = 128) -> str:
    """q (one token) and the whole K and V cache of two heads."""
    return f"bf16[1,2,1,{dim}] bf16[1,2,{seq},{dim}] bf16[1,2,{seq},{dim}]"


def ufa_args(seq: int) -> str:
    return " ".join([f"bf16[1,1,{seq},128]"] * 3)


HELDOUT9 = [
    (LA, la_args(8), {"block_s": [256], "block_v": [128]}),        # 8 MiB of q/k/v/y, 9.5 with the state
    (CONV, CONV_ARGS, {"block_s": [512]}),                         # 8 MiB
    (DEC, dec_args(8192), {"block_kv": [128]}),                    # 8 MiB (the whole K and V)
    (UFA, ufa_args(4096), {"block_q": [4096], "block_kv": [128]}),  # 8 MiB
    (LA, la_args(8), {"block_s": [512], "block_v": [128]}),        # 17.5 MiB
    (CONV, CONV_ARGS, {"block_s": [1024]}),                        # 16 MiB
    (DEC, dec_args(16384), {"block_kv": [128]}),                   # 16 MiB
    (UFA, ufa_args(8192), {"block_q": [8192], "block_kv": [128]}),  # 16 MiB
    (LA, la_args(16), {"block_s": [512], "block_v": [128]}),       # 35 MiB
    (CONV, CONV_ARGS, {"block_s": [2048]}),                        # 32 MiB
    (DEC, dec_args(32768), {"block_kv": [128]}),                   # 32 MiB
    (UFA, ufa_args(16384), {"block_q": [16384], "block_kv": [128]}),  # 32 MiB
    (LA, la_args(48), {"block_s": [256], "block_v": [128]}),       # 57 MiB
    (CONV, CONV_ARGS, {"block_s": [4096]}),                        # 64 MiB
    (DEC, dec_args(32768, 256), {"block_kv": [128]}),              # 64 MiB (head_dim 256)
    (UFA, ufa_args(32768), {"block_q": [16384], "block_kv": [128]}),  # 48 MiB
]


H10 = "tests/data/heldout10/"
# Round ten (tests/data/heldout10/): kernels whose body computes matmul results in straight-line
# code and does something other than a softmax with them (an element-wise epilogue, a LayerNorm, a
# LoRA gather-matmul unrolled over the block's tokens). None sets vmem_limit_bytes: 16 MiB scoped
# on v5e, 32 MiB on v6e and TPU7x. Shapes chosen from the blocks' bytes (B: each pipelined block
# twice, blocks that never move once) and the f32 matmul results' bytes (R: the straight-line
# results together), before the estimate was looked at: B below the limit and B + R near or over
# it, so that what libtpu keeps of R decides. Every grid has at least two steps along the axes the
# maps follow (double buffers). One job per shape, kernels interleaved.
KMR = H10 + "keras_matmul_relu.py:keras_matmul_relu"
GSW = H10 + "maxkernel_gemm_swish.py:maxkernel_gemm_swish"
GST = H10 + "maxkernel_gemm_swish_tanh.py:maxkernel_gemm_swish_tanh"
GLN = H10 + "maxkernel_gemm_layernorm.py:maxkernel_gemm_layernorm"
BGMV = H10 + "vllm_lora_bgmv.py:vllm_lora_bgmv"


def kmr_args(m: int, k: int, n: int) -> str:
    return f"f32[{m},{k}] f32[{k},{n}]"


def gsw_args(rows: int, k: int, n: int) -> str:
    """x, the (out, in) weight, the bias."""
    return f"f32[{rows},{k}] f32[{n},{k}] f32[{n}]"


def gst_args(m: int, k: int, n: int) -> str:
    return f"f32[{m},{k}] f32[{k},{n}] f32[{n}]"


def gln_args(rows: int, k: int, n: int) -> str:
    """x, y, the (in, out) weight, its bias, LayerNorm's scale and bias."""
    return f"f32[{rows},{k}] f32[{rows},{n}] f32[{k},{n}] f32[{n}] f32[{n}] f32[{n}]"


def bgmv_args(tokens: int, dim: int, loras: int, rank: int) -> str:
    """The adapter index per token, the tokens, the adapters (N, L, D) in bf16."""
    return f"i32[{tokens}] bf16[{tokens},{dim}] bf16[{loras},{rank},{dim}]"


def bgmv(tb: int, rb: int, db: int) -> dict:
    return {"token_block": [tb], "rank_block": [rb], "dim_block": [db]}


HELDOUT10 = [
    (KMR, kmr_args(2048, 128, 2048), {"tile_m": [1024], "tile_n": [1024]}),  # B 10 MiB, R 4
    (GSW, gsw_args(1024, 256, 2048), {"b_batch": [512]}),                     # B 11, R 4
    (GST, gst_args(2048, 256, 2048), {"bM": [1024], "bN": [1024]}),           # B 12, R 4
    (GLN, gln_args(256, 128, 4096), {"block_size": [128]}),                   # B 10.1, R 2
    (BGMV, bgmv_args(64, 512, 8, 1024), bgmv(32, 512, 256)),                  # B 4.2, R 2 (32 x 64 KiB)
    (KMR, kmr_args(2048, 256, 2048), {"tile_m": [1024], "tile_n": [1024]}),  # B 12, R 4
    (GSW, gsw_args(1024, 512, 2048), {"b_batch": [512]}),                     # B 14, R 4
    (GST, gst_args(2048, 384, 4096), {"bM": [1024], "bN": [2048]}),           # B 25, R 8
    (GLN, gln_args(768, 128, 2048), {"block_size": [384]}),                   # B 13.4, R 3
    (BGMV, bgmv_args(128, 512, 16, 1024), bgmv(64, 512, 256)),                # B 8.6, R 8 (64 x 128 KiB)
    (KMR, kmr_args(2048, 384, 4096), {"tile_m": [1024], "tile_n": [2048]}),  # B 25, R 8
    (GSW, gsw_args(2048, 256, 2048), {"b_batch": [1024]}),                    # B 20, R 8
    (GST, gst_args(2048, 512, 4096), {"bM": [1024], "bN": [2048]}),           # B 28, R 8
    (GLN, gln_args(512, 128, 4096), {"block_size": [256]}),                   # B 18.3, R 4
    (BGMV, bgmv_args(256, 512, 8, 512), bgmv(128, 256, 256)),                 # B 2.5, R 16 (128 x 128 KiB)
    (KMR, kmr_args(2048, 512, 4096), {"tile_m": [1024], "tile_n": [2048]}),  # B 28, R 8
    (GSW, gsw_args(2048, 256, 3072), {"b_batch": [1024]}),                    # B 29, R 12
    (GLN, gln_args(768, 128, 4096), {"block_size": [384]}),                   # B 26.4, R 6
    (BGMV, bgmv_args(256, 256, 16, 1024), bgmv(128, 512, 128)),               # B 4.8, R 32 (128 x 256 KiB)
]


H11 = "tests/data/heldout11/"
# Round eleven (tests/data/heldout11/): kernels with a rolled loop inside the body (JetStream's chunked
# prefill attention: a fori_loop over the KV chunks, no carries, each step's (chunk, chunk) f32
# scores; GDN-2's WY solve: a fori_loop carrying a (16, 16) matrix), matmuls with an element-wise
# epilogue stored into the output block through jitted helpers (pallas-forge's SwiGLU / GeGLU: two
# matmul results, jax.nn.silu / jax.nn.gelu; GDN-2's recompute: matmuls and exp products through
# jnp.clip / jnp.nan_to_num), and GDN-2's chunk scores ((128, 128, 128) f32 values built element-wise
# in straight-line code). Shapes chosen from the blocks' bytes (B: each pipelined block twice,
# blocks that never move once, scratch once) and the body's values' bytes, before the estimate was
# looked at: B below the limit and B plus the matmul results (R) or the per-step scores (S) near or
# over it. Limits: pallas-forge and JetStream set none (16 MiB v5e, 32 v6e / TPU7x); GDN-2 sets
# vmem_limit_bytes itself (scores 100 MiB, solve 96, recompute 64: above TPU7x's 64 MiB of VMEM for
# the first two). The two fixed-shape GDN-2 kernels (head_dim 128, chunk 256 hard-coded) get one
# shape each.
SWIGLU = H11 + "pallas_forge_glu.py:pallas_forge_swiglu"
GEGLU = H11 + "pallas_forge_glu.py:pallas_forge_geglu"
PREFILL = H11 + "jetstream_chunked_prefill.py:jetstream_chunked_prefill"
SCORES = H11 + "gdn2_fwd.py:gdn2_chunk_scores"
SOLVE = H11 + "gdn2_fwd.py:gdn2_wy_solve"
RECOMPUTE = H11 + "gdn2_fwd.py:gdn2_recompute_wy"


def glu_args(dtype: str, m: int, k: int, n: int) -> str:
    """x (M, K), w_gate and w_up (K, N)."""
    return f"{dtype}[{m},{k}] {dtype}[{k},{n}] {dtype}[{k},{n}]"


def glu(bm: int, bn: int) -> dict:
    return {"block_m": [bm], "block_n": [bn]}


def prefill_args(dtype: str, chunk: int, heads: int, kv_heads: int, head_dim: int = 128) -> str:
    """q (chunk, heads, head_dim); K/V pages (kv_heads, 16 pages, 128 tokens, head_dim); the length;
    a 16-page table (2048 tokens)."""
    pages = f"{dtype}[{kv_heads},16,128,{head_dim}]"
    return f"{dtype}[{chunk},{heads},{head_dim}] {pages} {pages} i32[] i32[16]"


def recompute_args(dtype: str, d: int) -> str:
    """q, k, v, w, b, g (1, 512, 1, D): two 256-token chunks of one head; A (1, 1, 2, 256, 256) f32."""
    x = f"{dtype}[1,512,1,{d}]"
    return " ".join([x] * 6) + " f32[1,1,2,256,256]"


HELDOUT11 = [
    (SWIGLU, glu_args("f32", 2048, 256, 2048), glu(1024, 1024)),    # B 14 MiB, R 8 (two 4 MiB f32 results)
    (SWIGLU, glu_args("f32", 1024, 512, 2048), glu(512, 1024)),     # B 14, R 4
    (SWIGLU, glu_args("f32", 2048, 512, 2048), glu(1024, 1024)),    # B 20, R 8
    (SWIGLU, glu_args("f32", 2048, 256, 4096), glu(1024, 2048)),    # B 26, R 16
    (GEGLU, glu_args("bf16", 2048, 512, 2048), glu(1024, 1024)),    # B 10, R 8
    (GEGLU, glu_args("bf16", 4096, 256, 2048), glu(2048, 1024)),    # B 12, R 16
    (GEGLU, glu_args("bf16", 2048, 512, 4096), glu(1024, 2048)),    # B 18, R 16
    (GEGLU, glu_args("bf16", 4096, 512, 4096), glu(2048, 2048)),    # B 28, R 32
    (PREFILL, prefill_args("f32", 512, 8, 2), {}),                  # B 7 (group 4), S 1 MiB per (chunk, chunk) value
    (PREFILL, prefill_args("f32", 1024, 8, 2), {}),                 # B 14, S 4
    (PREFILL, prefill_args("f32", 1024, 4, 2), {}),                 # B 8 (group 2), S 4
    (PREFILL, prefill_args("f32", 2048, 2, 2), {}),                 # B 10 (group 1), S 16
    (PREFILL, prefill_args("bf16", 2048, 2, 2), {}),                # B 6, S 16
    (SCORES, " ".join(["f32[1,512,1,128]"] * 4), {}),               # B 2 of 100; (128, 128, 128) f32 values, 8 MiB each
    (SOLVE, "f32[1,1,2,256,256]", {}),                              # B 1 of 96; a (16, 16) carry
    (RECOMPUTE, recompute_args("f32", 1536), {}),                   # B 30.5 of 64, values (256, D) f32 1.5 MiB each
    (RECOMPUTE, recompute_args("f32", 2048), {}),                   # B 40.5, values 2 MiB each
    (RECOMPUTE, recompute_args("f32", 2560), {}),                   # B 50.5, values 2.5 MiB each
    (RECOMPUTE, recompute_args("bf16", 3072), {}),                  # B 42.5, values 3 MiB each
    (RECOMPUTE, recompute_args("bf16", 4096), {}),                  # B 56.5, values 4 MiB each
]

HEAD_LOOPS = "tests/data/head_loops.py:"


def heads_args(heads: int) -> str:
    """q (4096, heads x 128), k and v (2048, heads x 128), bf16."""
    width = heads * 128
    return f"bf16[4096,{width}] bf16[2048,{width}] bf16[2048,{width}]"


# each kernel at 4 and 8 heads, query blocks of 256 to 1024 rows (a head's scores: 2 to 8 MiB f32)
HEADS = [(HEAD_LOOPS + kernel, heads_args(heads), {"block_q": [256, 512, 1024]})
         for kernel in ("ones_matmul", "unrolled_fori", "unnormalised", "vpu_sum") for heads in (4, 8)]


ROW_STATISTICS = "tests/data/row_statistics.py:"
# block rows whose blocks alone sit under each limit and whose one certain statistic takes them over
# (7168 on v5e, 14336 on v6e), or within one statistic of it (6144, 12288)
STATISTICS = [(ROW_STATISTICS + kernel, f"f32[{2 * rows},128]" + (" f32[1,128]" if kernel == "rms_norm" else ""),
               {"block_rows": [rows]}) for kernel in ("rms_norm", "centred") for rows in (4096, 6144, 7168, 12288, 14336)] + \
    [(ROW_STATISTICS + "online_softmax", f"bf16[{2 * bq},128] bf16[{s},128] bf16[{s},128]", {"block_q": [bq], "chunk": [128]})
     for bq, s in ((4096, 2048), (8192, 2048), (8192, 8192), (16384, 2048))]


ROW_REDUCTIONS = "tests/data/row_reductions.py:"
# per kernel, block rows whose blocks alone sit under each limit, and where the statistics that wait
# take them over or leave them just under (on v5e at 16 MiB, on v6e and TPU7x at 32)
REDUCTIONS = [(ROW_REDUCTIONS + kernel, f"f32[{2 * rows},{dim}]", {"block_rows": [rows]})
              for kernel, dim, sizes in (("one_max", 128, (4096, 6144, 7168, 12288, 14336)),
                                         ("mean_max", 128, (4096, 6144, 7168, 12288, 14336)),
                                         ("four_stats", 128, (4096, 6144, 7168, 12288, 14336)),
                                         ("wide_centred", 512, (1024, 1536, 1792, 3072, 3584)),
                                         ("layer_norm_256", 256, (2048, 3072, 3584, 6144, 7168)),
                                         ("layer_norm_1024", 1024, (256, 512, 768, 1024, 1536)),
                                         ("layer_norm_2048", 2048, (128, 256, 384, 512, 768)),
                                         ("shifted_square", 128, (4096, 6144, 7168, 12288, 14336)),
                                         ("shifted_square_1024", 1024, (256, 512, 768, 1024, 1536)),
                                         ("centred_1024", 1024, (256, 512, 768, 1024, 1536)),
                                         ("row_softmax_1024", 1024, (256, 512, 768, 1024, 1536)))
              for rows in sizes]


GATED_UNITS = "tests/data/gated_units.py:"
GATED_BLOCKS = ((512, 1024), (1024, 1024), (1024, 2048), (2048, 1024), (2048, 2048))  # results of 2 to 16 MiB f32


def gated_args(kernel: str, bm: int, bn: int) -> str:
    """x (2 bm, K), w1 and w3 (K, 2 bn) (the down projection: (K, bn) and w2 (bn, K)); K 256, 1024 to
    sum over a grid axis."""
    dtype = "bf16" if kernel.endswith("bf16") else "f32"
    k = 1024 if kernel == "swiglu_acc" else 256
    if kernel == "swiglu_down":
        return f"f32[{2 * bm},{k}] f32[{k},{bn}] f32[{k},{bn}] f32[{bn},{k}]"
    return f"{dtype}[{2 * bm},{k}] {dtype}[{k},{2 * bn}] {dtype}[{k},{2 * bn}]"


GATED = [(GATED_UNITS + kernel, gated_args(kernel, bm, bn),
          {"block_m": [bm], "block_n": [bn]} | ({"block_k": [256]} if kernel == "swiglu_acc" else {}))
         for kernel in ("swiglu_f32", "swiglu_bf16", "geglu_bf16", "swiglu_down", "swiglu_acc")
         for bm, bn in GATED_BLOCKS]


SECOND_VALUES = "tests/data/second_values.py:"


def second_args(kernel: str, a: int, b: int = 0) -> str:
    """Two blocks along the first axis: (2 rows, 4096) bf16 rows; the cross-entropy's x (2 a, 1024),
    w (1024, 2 b) and labels; the gated units' x (2 a, K), weights (K, 2 b) (and bias rows)."""
    if kernel.endswith("_bf16") and not kernel.startswith("glu"):
        return f"bf16[{2 * a},4096]"
    if kernel.startswith("ce_"):
        return f"bf16[{2 * a},1024] bf16[1024,{2 * b}] i32[{2 * a},1]"
    if kernel == "scores_log_softmax":
        return f"bf16[{2 * a},256] bf16[256,4096]"
    if kernel == "swiglu_bias":
        return f"f32[{2 * a},256] f32[256,{2 * b}] f32[256,{2 * b}] f32[1,{2 * b}] f32[1,{2 * b}]"
    return f"bf16[{2 * a},512] bf16[512,{2 * b}] bf16[512,{2 * b}]"


# rows of 4096 whose blocks and one f32 value sit under each limit, and whose second value would take
# them over (256 and 320 on v5e, 512 and 640 on v6e and TPU7x); the cross-entropies' (block_b,
# block_v), sums of 2 to 16 MiB; the gated units' blocks as GATED's; the log-softmax of scores over
# 4096 columns, 2 to 12 MiB f32 per block
SECOND = [(SECOND_VALUES + k, second_args(k, rows), {"block_rows": [rows]})
          for k in ("log_softmax_bf16", "rms_tanh_bf16") for rows in (256, 320, 384, 512, 640)] + \
    [(SECOND_VALUES + k, second_args(k, bb, bv), {"block_b": [bb], "block_v": [bv], "block_h": [512]})
     for k in ("ce_lse", "ce_tiled") for bb, bv in ((512, 1024), (1024, 1024), (512, 2048), (1024, 2048), (2048, 2048))] + \
    [(SECOND_VALUES + k, second_args(k, bm, bn), {"block_m": [bm], "block_n": [bn]})
     for k in ("swiglu_bias", "glu_sigmoid_bf16") for bm, bn in GATED_BLOCKS] + \
    [(SECOND_VALUES + "scores_log_softmax", second_args("scores_log_softmax", bm), {"block_m": [bm]})
     for bm in (128, 256, 384, 512, 768)]


# qk-softmax and the log-softmax of scores (a softmax stored whole), four reductions, a LayerNorm and
# three reductions along rows (the statistics each chip keeps), SSD with 8 MiB b and c beside its
# 16 MiB x (TPU7x places the smallest first): new shapes around the limits
CHECKS = [("tests/data/heldout4/pallasbench_qk_softmax.py:pallas_qk_softmax", f"f32[{n},64] f32[{n},64]",
           {"block_q": [bq]}) for n, bq in ((14336, 128), (6144, 256), (3072, 512))] + \
    [(SECOND_VALUES + "scores_log_softmax", second_args("scores_log_softmax", bm), {"block_m": [bm]}) for bm in (320, 640)] + \
    [(ROW_REDUCTIONS + k, f"f32[{2 * rows},{dim}]", {"block_rows": [rows]})
     for k, rows, dim in (("four_stats", 10240, 128), ("four_stats", 5120, 128), ("layer_norm_256", 5120, 256))] + \
    [("tests/data/row_statistics.py:centred", "f32[20480,128]", {"block_rows": [10240]}),
     ("tests/data/heldout4/levanter_ssd_intra_chunk.py:ssd_intra_chunk_pallas_tpu",
      "f32[1,4096] f32[1,4096] f32[1,4096,512] f32[1,4096,512] f32[1,4096,1024]",
      {"query_block_size": [2048], "key_block_size": [1024], "value_block_size": [512]})]


QUANTIZED_MATMUL = "tests/data/quantized_matmul.py:"


def qmm_args(dtype: str, bm: int, bk: int, bn: int) -> str:
    """Two blocks along each axis: x (2 bm, 2 bk), w (2 bk, 2 bn), the row and column scales."""
    return f"{dtype}[{2 * bm},{2 * bk}] {dtype}[{2 * bk},{2 * bn}] f32[{2 * bm},1] f32[1,{2 * bn}]"


def qmm_job(kernel: str, dtype: str, bm: int, bk: int, bn: int) -> tuple:
    args = f"bf16[{2 * bm},{2 * bk}] s8[{2 * bk},{2 * bn}] f32[1,{2 * bn}]" if kernel == "qmm_w8" else \
        qmm_args(dtype, bm, bk, bn)
    return (QUANTIZED_MATMUL + kernel, args, {"bm": [bm], "bk": [bk], "bn": [bn]})


def gmm_job(m: int, k: int, n: int, groups: int, tm: int, tk: int, tn: int) -> tuple:
    return (QUANTIZED_MATMUL + "gmm", f"bf16[{m},{k}] bf16[{groups},{k},{n}] i32[{groups}]",
            {"tm": [tm], "tk": [tk], "tn": [tn]})


# the blocks the causes were found on (issue 48): K blocks of 256 to 4096, results of 1 to 8 MiB
QMM_BLOCKS = ((512, 512, 512), (512, 1024, 512), (1024, 512, 1024), (1024, 1024, 1024), (1024, 2048, 1024),
              (2048, 1024, 1024), (1024, 1024, 2048), (256, 2048, 256), (2048, 512, 512), (512, 4096, 512))
GMM_TILES = ((512, 1024, 1024), (512, 2048, 1024), (1024, 1024, 1024), (1024, 512, 1024), (512, 1024, 2048),
             (256, 2048, 2048), (1024, 1024, 512))
# new shapes whose verdicts were predicted before they were compiled
PREDICTED = [qmm_job("qmm", "f8e4m3fn", *b) for b in
             ((1536, 1024, 1024), (1024, 1536, 1024), (512, 3072, 512), (2048, 768, 1024), (1024, 1024, 1536))] + \
    [qmm_job("qmm_cast", "f8e5m2", *b) for b in ((1024, 1024, 1024), (2048, 1024, 1024), (1024, 2048, 1024), (512, 2048, 512))] + \
    [qmm_job("qmm_w8", "", *b) for b in ((1024, 2048, 1024), (2048, 1024, 1024), (1024, 1024, 2048), (512, 2048, 512))] + \
    [gmm_job(3072, 3072, 1536, 6, *t) for t in ((512, 1536, 768), (768, 1024, 768), (1024, 768, 768), (384, 3072, 768))]
VARIANTS_FILE = "tests/data/quantized_variants.py:"
VARIANTS_OUT = Path(__file__).with_name("vmem_truth_variants.json")
VARIANTS_PREDICTED = Path(__file__).with_name("vmem_predictions_variants.json")
# blocks chosen by their bytes alone, before the estimate was asked: double-buffered blocks from 7 to
# about 40 MiB, so that they straddle the 16 MiB of v5e and v5p and the 32 MiB of v6e and TPU7x;
# grids of 2 x 2 x 2 (the operands twice each block)
VARIANT_BLOCKS = ((512, 1024, 512), (1024, 1024, 1024), (2048, 1024, 512), (1024, 2048, 1024), (2048, 512, 1024),
                  (2048, 1024, 1024), (512, 4096, 512), (1536, 1024, 1024),
                  # and smaller ones, 6 to 13 MiB of blocks, around v5e's and v5p's 16 MiB
                  (1024, 512, 512), (1024, 1024, 512), (1024, 512, 1024), (2048, 512, 512), (512, 2048, 1024),
                  (768, 1024, 1024))


def variant_args(kernel: str, bm: int, bk: int, bn: int) -> str:
    m, k, n = 2 * bm, 2 * bk, 2 * bn
    return {"w8_out": f"bf16[{m},{k}] s8[{k},{n}] f32[1,{n}]", "w8_dequant": f"bf16[{m},{k}] s8[{k},{n}] f32[1,{n}]",
            "fp8_weight": f"bf16[{m},{k}] f8e4m3fn[{k},{n}] f32[1,{n}]",
            "int8_int8": f"s8[{m},{k}] s8[{k},{n}] f32[{m},1] f32[1,{n}]", "f32_bf16": f"f32[{m},{k}] bf16[{k},{n}]",
            "wt_bf16": f"bf16[{m},{k}] bf16[{n},{k}]", "cast_lhs": f"f32[{m},{k}] bf16[{k},{n}]"}[kernel]


def grouped_args(kernel: str) -> str:
    """gmm's lhs (8192, 3072) and rhs (16, 3072, 3072) (gmm_t's (16, n, k)); tgmm's lhs (4096, 8192), rhs (8192, 4096)."""
    dtype = "f32" if kernel == "gmm_f32" else "bf16"
    if kernel == "tgmm":
        return "bf16[4096,8192] bf16[8192,4096] i32[8]"
    return f"{dtype}[8192,3072] {dtype}[16,3072,3072] i32[16]"


GROUPED_TILES = {"gmm": ((2048, 512, 512), (2048, 1024, 512), (1024, 512, 1536), (2048, 768, 1024), (4096, 256, 512),
                         (1024, 1536, 1024), (1024, 512, 512), (512, 1024, 1024), (1024, 1024, 512)),
                 "gmm_t": ((2048, 512, 512), (1024, 512, 1536), (2048, 768, 1024), (1024, 1536, 1024), (1024, 1024, 512)),
                 "gmm_f32": ((1024, 512, 512), (1024, 1024, 512), (2048, 512, 512), (512, 1024, 1536), (1024, 768, 1024),
                             (512, 512, 1024)),
                 "tgmm": ((1024, 1024, 1024), (2048, 1024, 512), (512, 2048, 1024), (1024, 2048, 1024), (2048, 512, 2048),
                          (512, 1024, 512), (1024, 512, 1024))}
VARIANTS = [(VARIANTS_FILE + kernel, variant_args(kernel, *b), {"bm": [b[0]], "bk": [b[1]], "bn": [b[2]]})
            for b in VARIANT_BLOCKS
            for kernel in ("w8_out", "w8_dequant", "fp8_weight", "int8_int8", "f32_bf16", "wt_bf16")] + \
    [(VARIANTS_FILE + kernel, grouped_args(kernel), {"tm": [t[0]], "tk": [t[1]], "tn": [t[2]]})
     for kernel, tiles in GROUPED_TILES.items() for t in tiles]


VARIANTS2_OUT = Path(__file__).with_name("vmem_truth_variants2.json")
VARIANTS2_PREDICTED = Path(__file__).with_name("vmem_predictions_variants2.json")
# a second round, predicted with the rules as they stood after the first round's compiles: blocks of
# other sizes (not powers of two), a seventh style (cast_lhs), other tilings of the grouped matmuls
VARIANT2_BLOCKS = ((1280, 1024, 768), (768, 1536, 1024), (1536, 512, 1536), (384, 3072, 768), (2560, 512, 512),
                   (1280, 768, 1280))
GROUPED2_TILES = {"gmm": ((4096, 384, 768), (2048, 1536, 384), (1024, 3072, 768), (512, 768, 3072)),
                  "gmm_t": ((2048, 384, 1536), (4096, 768, 384)),
                  "gmm_f32": ((2048, 384, 768), (512, 1536, 1536)),
                  "tgmm": ((4096, 256, 1024), (512, 2048, 2048), (2048, 1024, 1024), (1024, 256, 4096))}
VARIANTS2 = [(VARIANTS_FILE + kernel, variant_args(kernel, *b), {"bm": [b[0]], "bk": [b[1]], "bn": [b[2]]})
             for b in VARIANT2_BLOCKS
             for kernel in ("w8_out", "w8_dequant", "fp8_weight", "int8_int8", "f32_bf16", "wt_bf16", "cast_lhs")] + \
    [(VARIANTS_FILE + kernel, grouped_args(kernel), {"tm": [t[0]], "tk": [t[1]], "tn": [t[2]]})
     for kernel, tiles in GROUPED2_TILES.items() for t in tiles]


BLOCK_SCALED_FILE = "tests/data/block_scaled.py:"
BLOCK_SCALED_OUT = Path(__file__).with_name("vmem_truth_block_scaled.json")
BLOCK_SCALED_PREDICTED = Path(__file__).with_name("vmem_predictions_block_scaled.json")
# issue 56: quantized matmuls with per-block scales and megablox's gmm in two more forms, blocks chosen
# by their bytes alone before the estimate was asked: double-buffered blocks and the f32 accumulator
# from about 11 to 38 MiB, around the 16 MiB of v5e and v5p and the 32 MiB of v6e and TPU7x, most of
# them with 2048-row blocks; grids of 2 x 2 x 2
BLOCK_SCALED_BLOCKS = ((1024, 1024, 1024), (2048, 1024, 512), (1024, 2048, 1024), (1536, 1024, 1024),
                       (2048, 768, 1024), (2048, 1024, 1024), (2560, 1024, 768), (2048, 2048, 1024),
                       (2048, 512, 2048))


def block_scaled_args(kernel: str, bm: int, bk: int, bn: int) -> str:
    """x, w and their scales, two blocks along each axis; w8_group's scale per bk / 8 rows of K."""
    m, k, n = 2 * bm, 2 * bk, 2 * bn
    fp8 = f"f8e4m3fn[{m},{k}] f8e4m3fn[{k},{n}] f32[{m},{k // 128}] f32[{k // 128},{n // 128}]"
    return {"w8_group": f"bf16[{m},{k}] s8[{k},{n}] f32[16,{n}]", "w8_group_loop": f"bf16[{m},{k}] s8[{k},{n}] f32[16,{n}]",
            "i8_dynamic": f"bf16[{m},{k}] s8[{k},{n}] f32[1,{n}]", "fp8_block2d": fp8, "fp8_block2d_whole": fp8}[kernel]


def block_scaled_job(kernel: str, bm: int, bk: int, bn: int) -> tuple:
    """w8_group's groups of bk / 8 rows: its scale blocks of 8 rows, a legal tile (64 to 256 rows a group)."""
    params = {"bm": [bm], "bk": [bk], "bn": [bn], **({"group": [bk // 8]} if kernel.startswith("w8_group") else {})}
    return (BLOCK_SCALED_FILE + kernel, block_scaled_args(kernel, bm, bk, bn), params)


def grouped_job(kernel: str, k: int, tm: int, tk: int, tn: int) -> tuple:
    """megablox's gmm on lhs (8192, k), rhs (16, k, 3072); gmm_into's existing output (8192, 3072) f32."""
    into = " f32[8192,3072]" if kernel == "gmm_into" else ""
    return (BLOCK_SCALED_FILE + kernel, f"bf16[8192,{k}] bf16[16,{k},3072] i32[16]{into}",
            {"tm": [tm], "tk": [tk], "tn": [tn]})


# tiles of 11 to 17 MiB of blocks and accumulator (gmm_into: 4 to 8 MiB more for its input block)
BLOCK_SCALED_TILES = ((512, 1024, 1024), (1024, 512, 1024), (1024, 1024, 512), (512, 2048, 512), (512, 1024, 1536),
                      (256, 2048, 1024), (1024, 768, 768), (512, 1536, 1024))
# fp8_block2d's scale blocks, (bk / 128, bm), need bk / 128 a multiple of 8: K blocks of 1024 and 2048 only
BLOCK_SCALED = [block_scaled_job(kernel, *b) for b in BLOCK_SCALED_BLOCKS
                for kernel in ("w8_group", "w8_group_loop", "i8_dynamic", "fp8_block2d", "fp8_block2d_whole")
                if not kernel.startswith("fp8") or b[1] % 1024 == 0] + \
    [grouped_job(kernel, k, *t) for t in BLOCK_SCALED_TILES for kernel, k in (("gmm_krem", 3136), ("gmm_into", 3072))]

BLOCK_SCALED2_OUT = Path(__file__).with_name("vmem_truth_block_scaled2.json")
BLOCK_SCALED2_PREDICTED = Path(__file__).with_name("vmem_predictions_block_scaled2.json")
# issue 56's second round, predicted with the rules after the first round's compiles: other blocks (1792 and 2560
# rows, 768 columns), 21 to 30 MiB of blocks and accumulator (v6e's and TPU7x's 32 MiB), other gmm tilings on
# 11 to 18 MiB (v5e's and v5p's 16)
BLOCK_SCALED2_BLOCKS = ((2048, 1024, 768), (1536, 2048, 1024), (2560, 512, 1024), (1792, 1024, 1024))
BLOCK_SCALED2_TILES = ((512, 768, 1536), (1024, 384, 1024), (256, 3072, 512), (2048, 512, 512))
BLOCK_SCALED2 = [block_scaled_job(kernel, *b) for b in BLOCK_SCALED2_BLOCKS
                 for kernel in ("w8_group", "w8_group_loop", "i8_dynamic", "fp8_block2d", "fp8_block2d_whole")
                 if not kernel.startswith("fp8") or b[1] % 1024 == 0] + \
    [grouped_job(kernel, k, *t) for t in BLOCK_SCALED2_TILES for kernel, k in (("gmm_krem", 3136), ("gmm_into", 3072))]


def predict_variants(jobs: list, out: Path, rules: str) -> None:
    """The estimate's verdict on every row of ``jobs``, per chip, written before they are compiled."""
    from inspector.base.chips import get_chip
    from inspector.verbs.checking import run_check
    from inspector.compilation.target import load_target

    rows = []
    for spec, args, grid in jobs:
        base = load_target(spec, args=args)
        params = {name: values[0] for name, values in grid.items()}
        target = dataclasses.replace(base, params=dict(base.params, **params))
        result = run_check(target, [get_chip(c) for c in QUANTIZED_CHIPS], estimate_only=True)
        for row in result.targets:
            rows.append({"target": spec, "args": args, "params": params, "chip": row.chip,
                         "predicted": {True: "fits", False: "does not fit", None: "undecided"}[row.fits]})
    out.write_text(json.dumps({"rules": rules, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}: {len(rows)} rows", file=sys.stderr)


QUANTIZED = [qmm_job("qmm", dtype, *b) for dtype in ("bf16", "f8e4m3fn", "f8e5m2", "f32") for b in QMM_BLOCKS] + \
    [gmm_job(4096, 2048, 2048, 8, *t) for t in GMM_TILES] + PREDICTED


def targets(files: list[str]) -> list[str]:
    from inspector.compilation.user_files import load_module

    found = []
    for file in files:
        table = getattr(load_module(file), "INSPECT", {}) or {}
        found += [f"{file}:{name}" for name in table]
    return found


def combinations(target) -> list[dict]:
    names = list(target.param_choices)
    combos = itertools.product(*(target.param_choices[n] for n in names))
    return [dict(zip(names, values)) for values in itertools.islice(combos, MAX_COMBINATIONS)]


def rows_for(spec: str, args: str | None = None, grid: dict | None = None, chip_names=None) -> list[dict]:
    from inspector.base.chips import CHIPS
    from inspector.base.errors import InspectorError
    from inspector.verbs.checking import run_check
    from inspector.compilation.target import load_target

    chips = [c for c in CHIPS if c.is_tpu and (chip_names is None or c.name in chip_names)]
    try:
        base = load_target(spec, args=args)
    except InspectorError as err:
        print(f"skip {spec}: {err}", file=sys.stderr)
        return []
    rows = []
    combos = ([dict(zip(grid, values)) for values in itertools.product(*grid.values())] if grid is not None
              else combinations(base) or [{}])
    for params in combos:
        target = dataclasses.replace(base, params=dict(base.params, **params))
        try:
            result = run_check(target, chips, use_cache=False)
        except InspectorError as err:
            print(f"skip {spec} {params}: {err}", file=sys.stderr)
            continue
        if not result.kernels:
            continue
        for row in result.targets:
            rows.append({"target": spec, "args": args, "params": params, "chip": row.chip, "estimate_bytes": row.vmem_bytes,
                         "estimate_fits": row.fits, "compiler_fits": row.compiler_fits,
                         "compiler_bytes": row.compiler_vmem_bytes, "compiler_message": row.compiler_message})
    return rows


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from inspector.base import environment
    environment.prepare()
    global OUT
    chip_names, only = None, []
    if argv[:1] == ["--styles"]:
        OUT, argv = STYLES_OUT, targets([STYLES])
    rounds = {"--heldout": (HELDOUT_OUT, HELDOUT, None), "--heldout6": (HELDOUT6_OUT, HELDOUT6, "six"),
              "--heldout7": (HELDOUT7_OUT, HELDOUT7, "seven"), "--heldout8": (HELDOUT8_OUT, HELDOUT8, "eight"),
              "--heldout9": (HELDOUT9_OUT, HELDOUT9, "nine"), "--heldout10": (HELDOUT10_OUT, HELDOUT10, "ten"),
              "--heldout11": (HELDOUT11_OUT, HELDOUT11, "eleven"), "--heads": (HEADS_OUT, HEADS, "heads"),
              "--statistics": (STATISTICS_OUT, STATISTICS, "statistics"),
              "--reductions": (REDUCTIONS_OUT, REDUCTIONS, "reductions"), "--gated": (GATED_OUT, GATED, "gated"),
              "--second": (SECOND_OUT, SECOND, "second"), "--checks": (CHECKS_OUT, CHECKS, "checks"),
              "--quantized": (QUANTIZED_OUT, QUANTIZED, "quantized"),
              "--variants": (VARIANTS_OUT, VARIANTS, "variants"), "--variants2": (VARIANTS2_OUT, VARIANTS2, "variants2"),
              "--block-scaled": (BLOCK_SCALED_OUT, BLOCK_SCALED, "block_scaled"),
              "--block-scaled2": (BLOCK_SCALED2_OUT, BLOCK_SCALED2, "block_scaled2")}
    if argv[:1] == ["--predict-variants"]:
        predict_variants(VARIANTS, VARIANTS_PREDICTED, "rule matmul_lowering (inspector/pallas/vmem_rules.py), before "
                         "the compiles of VARIANTS")
        return
    if argv[:1] == ["--predict-variants2"]:
        predict_variants(VARIANTS2, VARIANTS2_PREDICTED, "rule matmul_lowering, casts and dequantizations of a block "
                         "for the MXU no values of the body, masks made of indices never whole (after the compiles of "
                         "VARIANTS), before the compiles of VARIANTS2")
        return
    if argv[:1] == ["--predict-block-scaled"]:
        predict_variants(BLOCK_SCALED, BLOCK_SCALED_PREDICTED, "the rules of main at issue 56 (matmul_lowering an "
                         "unsure term, casts for the MXU no values of the body), before the compiles of BLOCK_SCALED")
        return
    if argv[:1] == ["--predict-block-scaled2"]:
        predict_variants(BLOCK_SCALED2, BLOCK_SCALED2_PREDICTED, "issue 56's rules (a does-not-fit on the certain part "
                         "alone, a matmul's spill bounded by its shapes), before the compiles of BLOCK_SCALED2")
        return
    if argv[:1] and argv[0] in rounds:
        OUT, held_jobs, number = rounds[argv[0]]
        chip_names, only = QUANTIZED_CHIPS if number in ("quantized", "variants", "variants2", "block_scaled", "block_scaled2") else HELDOUT_CHIPS, argv[1:]  # substrings of the targets to compile (the others are left out)
        jobs = [job for job in held_jobs if not only or any(word in job[0] for word in only)]
    else:
        jobs = [(spec, None, None) for spec in argv or targets(CORPUS)] + ([] if argv else STRESS)
        number = None
    table = {"jax": metadata.version("jax"), "libtpu": metadata.version("libtpu"), "seconds": 0, "rows": []}
    if number:
        folder = OUT.stem.replace("vmem_truth_", "")
        own = {"heads": "head_loops.py", "statistics": "row_statistics.py", "reductions": "row_reductions.py",
               "gated": "gated_units.py", "second": "second_values.py", "quantized": "quantized_matmul.py",
               "variants": "quantized_variants.py", "variants2": "quantized_variants.py",
               "block_scaled": "block_scaled.py", "block_scaled2": "block_scaled.py"}
        table["source"] = f"the team's own kernels (tests/data/{own[number]}): libtpu's verdict per chip and shape" \
            if number in own else f"the held-out round {number} (tests/data/{folder}/): libtpu's verdict per chip and shape" \
            if number != "checks" else "new shapes of kernels on record, predicted before compiling (CHECKS)"

    if only and OUT.exists():  # a partial run redoes its jobs and keeps the other rows
        kept = json.loads(OUT.read_text())
        redone = {(spec, args) for spec, args, _ in jobs}
        table["rows"] = [r for r in kept["rows"] if (r["target"], r["args"]) not in redone]
        table["seconds"] = kept.get("seconds", 0)
    t0 = time.time() - table["seconds"]
    for spec, args, grid in jobs:
        rows = rows_for(spec, args, grid, chip_names)
        if number:  # libtpu's verdicts only: the estimate's rules change
            rows = [{k: v for k, v in r.items() if not k.startswith("estimate_")} for r in rows]
        table["rows"] += rows
        table["seconds"] = round(time.time() - t0)  # the wall time of the compiles, for BENCHMARKS.md
        OUT.write_text(json.dumps(table, indent=1) + "\n")  # as it goes: a long run keeps what it has
        print(f"{spec}: {len(rows)} rows ({time.time() - t0:.0f} s)", file=sys.stderr)
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(table['rows'])} rows", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
