# Held-out kernel for jax-inspector (round thirteen; the chip's fourth held-out round), vendored from:
#   https://github.com/apple/axlearn/blob/16d17fb689055ab207eada66676d95cfdc965b2c/axlearn/common/flash_attention/tpu_decoding.py
# and, for get_tpu_dot_precision and NEG_INF, axlearn/common/flash_attention/common.py and
# axlearn/common/attention_bias.py (seen 2026-12-06).
# Licence: Apache License 2.0 (the repository's LICENSE; the file's header below).
#
# Verbatim: the kernel, _tpu_decoding_kernel, with one change: `pl.dot(a, b, precision=...)` (gone
# from jax's Pallas) is `jax.lax.dot(a, b, precision=..., preferred_element_type=jnp.float32)`,
# what pl.dot did with no transposes (it accumulated in f32).
# TPUDecoding.__call__'s body is below as tpu_decoding, for the case it takes without a mask
# function (mask_fn None: the sparsity is the padding past each sequence's length) and with no
# explicit bias: the MaskFnAttentionBias / split / build_mask machinery is not vendored, its
# kv_seq_len (target_positions[:, -1] + 1) is an input, self.cfg's block size and softmax scale are
# keywords, `pltpu.TPUCompilerParams` is `pltpu.CompilerParams`, and the logging is dropped.
# get_tpu_dot_precision is common.py's without its CPU branch (it asks jax.default_backend(),
# which is the CPU where these compile without a TPU); NEG_INF is attention_bias.py's -1e15.
# Ours, below the "ours" line: INSPECT.
# Style: decode attention over a padded KV cache with scalar prefetch: three SMEM tables
# (each sequence's length, its list of non-empty KV blocks, their count) go in through a
# PrefetchScalarGridSpec; the K/V index map reads the block list (kv_block_offset[b, j]) so a
# (batch, kv heads, blocks) grid visits only blocks below a sequence's length, the grid's last
# extent being the largest count (a run-time value); the body is an online softmax under pl.when,
# q as a (q heads per kv head, head_dim) block, K and V in (head_dim, block) layout.
#
# Copyright © 2025 Apple Inc.
"""Implements TPU decoding.

Unlike GPU, TPU blocks are sequential (except when there're two cores). Therefore, unlike GPU
decoding, there's no need to parallelize over the KV sequence length. As the result, it works
very similar to full attention. The grid dimensions are
(batch_size, num_kv_heads, num_kv_blocks).

The main reason to use the kernel is that it can take advantage of the fact that most KV blocks
are padding in practical decoding scenarios. Also, it can take advantage of sparsity in
`mask_fn`.

Performance note:
1. When kv_seq_len == padded_kv_seq_len:
    This kernels performs similarly to non-fused (i.e. XLA) attention, or within 10% slower.
2. When kv_seq_len < padded_kv_seq_len or `mask_fn` has sparsity:
    This kernel provides speed up roughly equal to padded_kv_seq_len / kv_seq_len or number
    of masked kv blocks / total kv blocks.

The main reason why non-fused attention is faster when kv are not padded is that the non-fused
matmuls can flatten the non-head dimensions, thus having larger non-contracting dimensions.
This leads to have better utilization of the matrix and memory units.
"""
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NEG_INF = -1e15  # axlearn.common.attention_bias.NEG_INF
MaskFn = None  # the type of axlearn.common.attention_bias.MaskFn; none is used here


def get_tpu_dot_precision(dtype) -> jax.lax.Precision:
    """Get the suitable DotAlgorithmPreset for the given dtype.

    TPU Pallas lowering doesn't yet support DotAlgorithmPreset. Use Precision instead.
    """
    if dtype == jnp.float32:
        # HIGHEST uses BF16_BF16_F32_X6, which emulates higher precision with 6 BF16 passes.
        # Note: jax.lax.Precision.HIGH (BF16_BF16_F32_X3) is not yet supported. We should use it
        # when it's supported as it's twice as fast and precision is ok.
        return jax.lax.Precision.HIGHEST
    if dtype == jnp.bfloat16:
        return jax.lax.Precision.DEFAULT
    raise ValueError(f"Unsupported dtype {dtype}")


def _tpu_decoding_kernel(
    # Scalars.
    kv_seq_len_ref,
    kv_block_offset,
    kv_block_offset_size,
    # Inputs.
    q_ref,
    k_ref,
    v_ref,
    b_ref,
    # Outputs.
    o_ref,
    # Scatch.
    m_i,
    l_i,
    o_scratch,
    # Compile time args.
    softmax_scale: float,
    mask_fn: Optional[MaskFn],
):
    batch_index = pl.program_id(0)
    non_empty_kv_block_index = pl.program_id(2)
    _, block_k = k_ref.shape
    precision = get_tpu_dot_precision(q_ref.dtype)

    # o is the buffer where we accumulate the output on sram.
    # m_i and l_i (see FlashAttention paper) are updated during the k,v loop.
    @pl.when(non_empty_kv_block_index == 0)
    def init():
        m_i[...] = jnp.full_like(m_i, NEG_INF)
        l_i[...] = jnp.zeros_like(l_i)
        o_scratch[...] = jnp.zeros_like(o_scratch)

    # Note: on CPU interpret mode, pl.program_id() cannot appear in functions decorated by
    # pl.when.
    kv_offset = kv_block_offset[batch_index, non_empty_kv_block_index] * block_k
    kv_seq_len = kv_seq_len_ref[batch_index]
    num_non_empty_kv_blocks = kv_block_offset_size[batch_index]

    # Different batch may have different number of-non empty kv blocks.
    @pl.when(non_empty_kv_block_index < num_non_empty_kv_blocks)
    def compute():
        q = q_ref[...]
        k = k_ref[...].astype(q.dtype)
        qk = jax.lax.dot(q, k, precision=precision, preferred_element_type=jnp.float32)
        if softmax_scale != 1.0:
            qk *= softmax_scale
        if b_ref is not None:
            qk += b_ref[...]
            qk = jnp.maximum(qk, NEG_INF)
        # Note: Pallas TPU requires the use of lax.broadcasted_iota instead of jnp.arange as only
        # 2D range is supported.
        block_kv_indices = kv_offset + lax.broadcasted_iota(jnp.int32, qk.shape, 1)
        kv_mask = block_kv_indices < kv_seq_len
        if mask_fn is not None:
            kv_mask = kv_mask & mask_fn(kv_seq_len - 1, block_kv_indices)
        qk = jnp.where(kv_mask, qk, NEG_INF)

        m_prev = m_i[...]
        l_prev = l_i[...]
        o_prev = o_scratch[...]

        # We need to make sure each array has two dims, or we get TPU Mosaic lowering errors.
        m_curr = qk.max(axis=-1, keepdims=True)
        m_next = jnp.maximum(m_prev, m_curr)
        correction = jnp.exp(m_prev - m_next)
        l_prev_corr = correction * l_prev
        # Use m_next instead of m_curr to avoid a correction on l_curr.
        s_curr = jnp.exp(qk - m_next)
        l_curr = s_curr.sum(axis=-1, keepdims=True)
        l_next = l_prev_corr + l_curr
        o_prev_corr = correction * o_prev
        v = v_ref[...].astype(q.dtype)
        o_curr = jax.lax.dot(s_curr.astype(v.dtype), v.T, precision=precision, preferred_element_type=jnp.float32)

        o_next = o_prev_corr + o_curr

        m_i[...] = m_next
        l_i[...] = l_next
        o_scratch[...] = o_next

    @pl.when(non_empty_kv_block_index == num_non_empty_kv_blocks - 1)
    def final():
        # We keep an unscaled version of o during the scan over kv_seq_len. Scaling it
        # by the last l_i gives us the correct final output. See section 3.1.1 in the
        # FlashAttention-2 paper: https://arxiv.org/pdf/2307.08691.
        o_ref[...] = (o_scratch[...] / l_i[...]).astype(o_ref.dtype)


@partial(jax.jit, static_argnames=["tpu_block_size", "softmax_scale"])
def tpu_decoding(query, key, value, kv_seq_len, *, tpu_block_size: int = 512, softmax_scale: float = 1.0):
    """TPUDecoding.__call__ with no mask function and no explicit bias: query [batch, 1, heads,
    head_dim], key / value [batch, padded kv length, kv heads, head_dim], kv_seq_len [batch]."""
    mask_fn = None
    bias = None

    # Pallas TPU doesn't support pl.load(..., mask=xxx), so we kv len must divide block size.
    # However, we can reduce the block size to support the case where
    # padded_kv_seq_len < block_size.
    block_size = min(tpu_block_size, key.shape[1])
    orig_q_shape = query.shape
    q_seq_len = query.shape[1]
    block_kv = block_size

    q = query.squeeze(1)
    # Convert to bnhs which is the native shape of KV in the kv cache. These two transposes
    # should be elided by the compiler. See `BaseQKVLinear.init_states` from attention.py.
    k = jnp.einsum("bsnh->bnhs", key)
    v = jnp.einsum("bsnh->bnhs", value)
    bs, kv_heads, head_dim, padded_kv_seq_len = k.shape
    kv_seq_len = jnp.broadcast_to(jnp.asarray(kv_seq_len), (bs,))
    # Computes a full block map num_kv_blocks * num_kv_blocks.
    # Use a padding to ensure padding blocks aren't counted towards `kv_block_offset_size`.
    padding = -1
    with jax.ensure_compile_time_eval():
        padded_num_kv_blocks = pl.cdiv(padded_kv_seq_len, block_size)
        offset = lax.broadcasted_iota(
            jnp.int32, (padded_num_kv_blocks, padded_num_kv_blocks), 1
        )

    # Dynamically slice the rows according to the query position (which is kv_seq_len - 1).
    kv_block_offset = offset[(kv_seq_len - 1) // block_size]
    # Count the number of blocks with position < kv_seq_len.
    kv_block_offset_size = jnp.count_nonzero(
        (kv_block_offset != padding) & (kv_block_offset * block_size < kv_seq_len[:, None]),
        axis=1,
    )
    # Replace padding with the last valid kv block's index. See
    # https://docs.jax.dev/en/latest/pallas/tpu/sparse.html#sparse-access-patterns-on-dense-data
    kv_block_offset = jnp.where(
        kv_block_offset == padding, kv_block_offset.max(axis=1, keepdims=True), kv_block_offset
    )

    q = q.reshape(bs, kv_heads, -1, head_dim)
    q_seq_head = q.shape[-2]  # = q_seq_len * num_q_heads_per_kv_head
    assert q_seq_head <= 512

    def kv_index_map(
        batch_idx, head_idx, kv_block_idx, kv_seq_len, kv_block_offset, kv_block_offset_size
    ):
        del kv_seq_len, kv_block_offset_size
        return (batch_idx, head_idx, 0, kv_block_offset[batch_idx, kv_block_idx])

    q_spec = pl.BlockSpec(
        (None, None, q_seq_head, head_dim), lambda b, h, j, *args: (b, h, 0, 0)
    )
    kv_spec = pl.BlockSpec((None, None, head_dim, block_kv), kv_index_map)
    bias_spec = None

    out = pl.pallas_call(
        partial(_tpu_decoding_kernel, softmax_scale=softmax_scale, mask_fn=mask_fn),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3,
            in_specs=[
                q_spec,
                kv_spec,
                kv_spec,
                bias_spec,
            ],
            out_specs=q_spec,
            scratch_shapes=[
                # VMEM requires 2D arrays.
                pltpu.VMEM((q_seq_head, 1), jnp.float32),
                pltpu.VMEM((q_seq_head, 1), jnp.float32),
                pltpu.VMEM((q_seq_head, head_dim), jnp.float32),
            ],
            grid=(bs, kv_heads, kv_block_offset_size.max()),
        ),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(kv_seq_len, kv_block_offset, kv_block_offset_size, q, k, v, bias)
    return out.reshape(orig_q_shape)


# ----------------------------------------------------------------------------- ours


def axlearn_tpu_decoding(query, key, value, kv_seq_len, tpu_block_size: int = 512):
    return tpu_decoding(query, key, value, kv_seq_len, tpu_block_size=tpu_block_size,
                        softmax_scale=1.0 / 128 ** 0.5)


def _reference(query, key, value, kv_seq_len, tpu_block_size: int = 512):
    bs, _, heads, dim = query.shape
    kv_heads = key.shape[2]
    q = query.reshape(bs, kv_heads, heads // kv_heads, dim).astype(jnp.float32)
    s = jnp.einsum("bngd,bsnd->bngs", q, key.astype(jnp.float32)) / dim ** 0.5
    s = jnp.where(jnp.arange(key.shape[1])[None, None, None, :] < kv_seq_len[:, None, None, None], s, NEG_INF)
    o = jnp.einsum("bngs,bsnd->bngd", jax.nn.softmax(s, axis=-1), value.astype(jnp.float32))
    return o.reshape(query.shape).astype(query.dtype)


# 32 sequences decoding one token, 32 query heads on 8 kv heads of 128, a cache padded to 8192
# positions (1 GiB of bf16 K and V), each sequence 2048 to 8192 long: the grid skips the blocks
# past a sequence's length
INSPECT = {
    "axlearn_tpu_decoding": {
        "args": "bf16[32,1,32,128] bf16[32,8192,8,128] bf16[32,8192,8,128] s32[32]",
        "int_ranges": {"kv_seq_len": (2048, 8193)},
        "params": {"tpu_block_size": [512, 256, 1024]},
        "reference": "_reference",
        "atol": 0.05,
        "rtol": 0.05,
    },
}
