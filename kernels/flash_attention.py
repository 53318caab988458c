"""FlashAttention forward pass as a Pallas TPU kernel, with its jnp reference.

Online softmax: a running max ``m`` and sum ``l`` per query row, the accumulator rescaled by
``exp(m_prev - m_new)`` at each kv block, one division at the end. The grid is
(batch*heads, q blocks, kv blocks) with the kv axis last and "arbitrary" because the scratch
accumulators carry across it. Causal blocks above the diagonal are skipped: their compute is
guarded by ``pl.when`` and their k/v index maps are clamped so no DMA fetches them.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# A large finite negative instead of -inf, so exp(m_prev - m_new) never sees inf - inf.
MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)
LANES = 128  # m and l scratch are lane-dense (block_q, 128) so Mosaic stores them unmasked


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    block_q: int = 128
    block_k: int = 128

    def check(self, seq_q: int, seq_k: int) -> None:
        for name, block, seq in (("block_q", self.block_q, seq_q), ("block_k", self.block_k, seq_k)):
            if block <= 0 or seq % block:
                raise ValueError(f"{name}={block} must divide the sequence length {seq}")


def reference(q, k, v, *, causal: bool = True, sm_scale: float | None = None):
    """Plain softmax(q k^T) v in f32: what XLA makes of attention without a kernel."""
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = jnp.einsum("bqd,bkd->bqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
    if causal:
        rows = jnp.arange(q.shape[1])[:, None]
        cols = jnp.arange(k.shape[1])[None, :]
        s = jnp.where(rows >= cols, s, MASK_VALUE)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", p, v.astype(jnp.float32)).astype(q.dtype)


def _fwd_kernel(q_ref, k_ref, v_ref, o_ref, m_sc, l_sc, acc_sc, *, causal, sm_scale, block_q, block_k):
    qi, kj = pl.program_id(1), pl.program_id(2)

    @pl.when(kj == 0)
    def _init():
        m_sc[...] = jnp.full(m_sc.shape, MASK_VALUE, jnp.float32)
        l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    def _step():
        s = jax.lax.dot_general(
            q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        ) * sm_scale
        if causal:
            rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
            cols = kj * block_k + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
            s = jnp.where(rows >= cols, s, MASK_VALUE)
        m_prev = m_sc[:, :1]
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)
        l_sc[...] = jnp.broadcast_to(alpha * l_sc[:, :1] + p.sum(axis=-1, keepdims=True), l_sc.shape)
        m_sc[...] = jnp.broadcast_to(m_new, m_sc.shape)
        pv = jax.lax.dot_general(
            p.astype(v_ref.dtype), v_ref[...], (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32
        )
        acc_sc[...] = acc_sc[...] * alpha + pv

    if causal:
        # Skip kv blocks that lie wholly above the diagonal for this q block.
        pl.when(kj * block_k <= qi * block_q + block_q - 1)(_step)
    else:
        _step()

    @pl.when(kj == pl.num_programs(2) - 1)
    def _finish():
        o_ref[...] = (acc_sc[...] / l_sc[:, :1]).astype(o_ref.dtype)


def flash_attention(q, k, v, *, causal: bool = True, sm_scale: float | None = None,
                    block_sizes: BlockSizes = BlockSizes()):
    """Attention over q, k, v of shape (batch*heads, seq, head_dim)."""
    bh, seq_q, d = q.shape
    seq_k = k.shape[1]
    block_sizes.check(seq_q, seq_k)
    bq, bk = block_sizes.block_q, block_sizes.block_k
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)

    def kv_index(b, i, j):
        if causal:  # clamp to the last block this q block needs: unchanged index, no new DMA
            j = jnp.minimum(j, (i * bq + bq - 1) // bk)
        return (b, j, 0)

    kernel = functools.partial(_fwd_kernel, causal=causal, sm_scale=scale, block_q=bq, block_k=bk)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(bh, seq_q // bq, seq_k // bk),
        in_specs=[
            pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
            pl.BlockSpec((None, bk, d), kv_index),
            pl.BlockSpec((None, bk, d), kv_index),
        ],
        out_specs=pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
        scratch_shapes=[
            pltpu.VMEM((bq, LANES), jnp.float32),
            pltpu.VMEM((bq, LANES), jnp.float32),
            pltpu.VMEM((bq, d), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="flash_attention_fwd",
    )(q, k, v)
