"""FlashAttention as Pallas TPU kernels (forward and backward), with the jnp reference.

Online softmax: a running max ``m`` and sum ``l`` per query row, the accumulator rescaled by
``exp(m_prev - m_new)`` at each kv block, one division at the end. The forward grid is
(batch*heads, q blocks, kv blocks) with the kv axis last and "arbitrary": the scratch
accumulators carry across it. Causal blocks above the diagonal are skipped, not masked: their
compute is guarded by ``pl.when`` and their index maps are clamped so no DMA fetches them.

The backward pass (FlashAttention-2) recomputes the probabilities from the saved logsumexp:
one kernel accumulates dk and dv over q blocks, another dq over kv blocks, each with its own
block sizes (``BlockSizes`` backward fields). ``jax.grad`` works through ``jax.custom_vjp``.

Every pallas_call passes a ``pl.CostEstimate`` counted from the shapes: only the blocks the
causal mask needs, and the k/v fetches the clamped index maps imply.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .block_sizes import LANES, BlockSizes  # LANES: m and l scratch are lane-dense (block_q, 128), stored unmasked
from .cost import nbytes, transfers

__all__ = ["BlockSizes", "flash_attention", "reference"]

# A large finite negative instead of -inf, so exp(m_prev - m_new) never sees inf - inf.
MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


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


def _causal_mask(s, qi, kj, block_q, block_k):
    rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
    cols = kj * block_k + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    return jnp.where(rows >= cols, s, MASK_VALUE)


def _last_needed(qi, block_q, block_k):
    """The last kv block q block qi sees under the causal mask (jnp or numpy)."""
    return (qi * block_q + block_q - 1) // block_k


def _first_needed(kj, block_q, block_k):
    """The first q block that sees any key of kv block kj under the causal mask."""
    return (kj * block_k) // block_q


def _needed(qi, kj, block_q, block_k):
    """Does q block qi see any key of kv block kj under the causal mask?"""
    return kj <= _last_needed(qi, block_q, block_k)


def _dot(a, b, contract_a: int, contract_b: int):
    return jax.lax.dot_general(a, b, (((contract_a,), (contract_b,)), ((), ())), preferred_element_type=jnp.float32)


def online_softmax_update(s, v_ref, m_sc, l_sc, acc_sc, visible=None):
    """Fold one block of scores ``s`` (bq, bk) into the running max, sum and accumulator.
    ``visible`` (the element mask, where one applies) zeroes the probabilities of masked keys:
    a row that sees no key of the block would otherwise give each exp(MASK - MASK) = 1."""
    m_prev = m_sc[:, :1]
    m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
    p = jnp.exp(s - m_new)
    if visible is not None:
        p = jnp.where(visible, p, 0.0)
    alpha = jnp.exp(m_prev - m_new)
    l_sc[...] = jnp.broadcast_to(alpha * l_sc[:, :1] + p.sum(axis=-1, keepdims=True), l_sc.shape)
    m_sc[...] = jnp.broadcast_to(m_new, m_sc.shape)
    acc_sc[...] = acc_sc[...] * alpha + _dot(p.astype(v_ref.dtype), v_ref[...], 1, 0)


def normalise(acc, l):
    """acc / l, with 0 for rows that saw no key (l == 0: fully masked, or every block skipped)
    instead of 0 / 0, as JAX's own flash attention does."""
    return acc / jnp.where(l == 0.0, 1.0, l)


def block_grid(seq_q: int, seq_k: int, bq: int, bk: int):
    """(q block, kv block) index of every step of one batch-head's (q blocks, kv blocks) grid."""
    return np.meshgrid(np.arange(seq_q // bq), np.arange(seq_k // bk), indexing="ij")


# ----------------------------------------------------------------------------- forward


def _fwd_kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, m_sc, l_sc, acc_sc, *, causal, sm_scale, block_q, block_k):
    qi, kj = pl.program_id(1), pl.program_id(2)

    @pl.when(kj == 0)
    def _init():
        m_sc[...] = jnp.full(m_sc.shape, MASK_VALUE, jnp.float32)
        l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    def _step():
        s = _dot(q_ref[...], k_ref[...], 1, 1) * sm_scale
        if causal:
            s = _causal_mask(s, qi, kj, block_q, block_k)
        online_softmax_update(s, v_ref, m_sc, l_sc, acc_sc)

    if causal:
        pl.when(_needed(qi, kj, block_q, block_k))(_step)  # skip blocks above the diagonal
    else:
        _step()

    @pl.when(kj == pl.num_programs(2) - 1)
    def _finish():
        o_ref[...] = normalise(acc_sc[...], l_sc[:, :1]).astype(o_ref.dtype)
        # a row that saw no key: lse = +inf, so the backward's exp(s - lse) is 0, not inf
        lse_ref[...] = jnp.where(l_sc[...] == 0.0, jnp.inf, m_sc[...] + jnp.log(l_sc[...]))


def _fwd_cost(bh, seq_q, seq_k, d, bq, bk, causal, dtype) -> pl.CostEstimate:
    """Per needed (q block, kv block): q k^T and p v (4 bq bk d flops), exp of the scores and of
    the rescale (bq bk + bq); per q block one log of the lane-dense l (bq x 128). k and v are
    fetched once per run of an unchanged (clamped) kv index."""
    i, j = block_grid(seq_q, seq_k, bq, bk)
    needed = int(_needed(i, j, bq, bk).sum()) if causal else i.size
    kv = np.minimum(j, _last_needed(i, bq, bk)) if causal else j
    nq = seq_q // bq
    moved = (2 * nq * nbytes((bq, d), dtype)  # q in, o out
             + 2 * transfers(kv.ravel()) * nbytes((bk, d), dtype)  # k, v
             + nq * nbytes((bq, LANES), jnp.float32))  # lse out
    return pl.CostEstimate(flops=bh * needed * 4 * bq * bk * d,
                           transcendentals=bh * (needed * (bq * bk + bq) + nq * bq * LANES),
                           bytes_accessed=bh * moved)


def _forward(q, k, v, causal, sm_scale, block_sizes):
    bh, seq_q, d = q.shape
    seq_k = k.shape[1]
    block_sizes = block_sizes.fit(seq_q, seq_k)
    bq, bk = block_sizes.block_q, block_sizes.block_k

    def kv_index(b, i, j):
        if causal:  # clamp to the last block this q block needs: unchanged index, no new DMA
            j = jnp.minimum(j, _last_needed(i, bq, bk))
        return (b, j, 0)

    kernel = functools.partial(_fwd_kernel, causal=causal, sm_scale=sm_scale, block_q=bq, block_k=bk)
    out, lse = pl.pallas_call(
        kernel,
        out_shape=(jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((bh, seq_q, LANES), jnp.float32)),
        grid=(bh, seq_q // bq, seq_k // bk),
        in_specs=[
            pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
            pl.BlockSpec((None, bk, d), kv_index),
            pl.BlockSpec((None, bk, d), kv_index),
        ],
        out_specs=[
            pl.BlockSpec((None, bq, d), lambda b, i, j: (b, i, 0)),
            pl.BlockSpec((None, bq, LANES), lambda b, i, j: (b, i, 0)),
        ],
        scratch_shapes=[
            pltpu.VMEM((bq, LANES), jnp.float32),
            pltpu.VMEM((bq, LANES), jnp.float32),
            pltpu.VMEM((bq, d), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        cost_estimate=_fwd_cost(bh, seq_q, seq_k, d, bq, bk, causal, q.dtype),
        name="flash_attention_fwd",
    )(q, k, v)
    return out, lse


# ----------------------------------------------------------------------------- backward


def _dkdv_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_sc, dv_sc, *,
                 causal, sm_scale, block_q, block_k):
    kj, qi = pl.program_id(1), pl.program_id(2)

    @pl.when(qi == 0)
    def _init():
        dk_sc[...] = jnp.zeros(dk_sc.shape, jnp.float32)
        dv_sc[...] = jnp.zeros(dv_sc.shape, jnp.float32)

    def _step():
        q, k, v, do = q_ref[...], k_ref[...], v_ref[...], do_ref[...]
        s = _dot(q, k, 1, 1) * sm_scale  # (bq, bk)
        if causal:
            s = _causal_mask(s, qi, kj, block_q, block_k)
        p = jnp.exp(s - lse_ref[:, :1])
        dv_sc[...] += _dot(p.astype(do.dtype), do, 0, 0)  # p^T do
        dp = _dot(do, v, 1, 1)  # do v^T
        ds = p * (dp - delta_ref[:, :1]) * sm_scale
        dk_sc[...] += _dot(ds.astype(q.dtype), q, 0, 0)  # ds^T q

    if causal:
        pl.when(_needed(qi, kj, block_q, block_k))(_step)
    else:
        _step()

    @pl.when(qi == pl.num_programs(2) - 1)
    def _finish():
        dk_ref[...] = dk_sc[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_sc[...].astype(dv_ref.dtype)


def _dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, dq_sc, *, causal, sm_scale, block_q, block_k):
    qi, kj = pl.program_id(1), pl.program_id(2)

    @pl.when(kj == 0)
    def _init():
        dq_sc[...] = jnp.zeros(dq_sc.shape, jnp.float32)

    def _step():
        q, k, v, do = q_ref[...], k_ref[...], v_ref[...], do_ref[...]
        s = _dot(q, k, 1, 1) * sm_scale
        if causal:
            s = _causal_mask(s, qi, kj, block_q, block_k)
        p = jnp.exp(s - lse_ref[:, :1])
        ds = p * (_dot(do, v, 1, 1) - delta_ref[:, :1]) * sm_scale
        dq_sc[...] += _dot(ds.astype(k.dtype), k, 1, 0)

    if causal:
        pl.when(_needed(qi, kj, block_q, block_k))(_step)
    else:
        _step()

    @pl.when(kj == pl.num_programs(2) - 1)
    def _finish():
        dq_ref[...] = dq_sc[...].astype(dq_ref.dtype)


def _bwd_cost(kernel, bh, seq_q, seq_k, d, bq, bk, causal, dtype) -> pl.CostEstimate:
    """Per needed block: dk/dv recomputes q k^T and adds p^T do, do v^T, ds^T q (8 bq bk d flops);
    dq recomputes q k^T and adds do v^T, ds k (6 bq bk d); each one exp(s - lse) (bq bk). The
    operands walked along the inner axis are fetched once per run of an unchanged (clamped)
    index; the others once per outer block."""
    i, j = block_grid(seq_q, seq_k, bq, bk)
    needed = int(_needed(i, j, bq, bk).sum()) if causal else i.size
    nq, nk = seq_q // bq, seq_k // bk
    row, kv_row, stat = nbytes((bq, d), dtype), nbytes((bk, d), dtype), nbytes((bq, LANES), jnp.float32)
    if kernel == "dkv":  # grid (kv block j, q block i): q, do, lse, delta along i; k, v in, dk, dv out per j
        rows = np.maximum(i, _first_needed(j, bq, bk)) if causal else i
        runs = transfers(rows.T.ravel())
        moved, flops = runs * (2 * row + 2 * stat) + 4 * nk * kv_row, 8
    else:  # grid (q block i, kv block j): k, v along j; q, do, lse, delta in, dq out per i
        cols = np.minimum(j, _last_needed(i, bq, bk)) if causal else j
        runs = transfers(cols.ravel())
        moved, flops = runs * 2 * kv_row + nq * (3 * row + 2 * stat), 6
    return pl.CostEstimate(flops=bh * needed * flops * bq * bk * d, transcendentals=bh * needed * bq * bk,
                           bytes_accessed=bh * moved)


def _backward(q, k, v, out, lse, do, causal, sm_scale, block_sizes):
    bh, seq_q, d = q.shape
    seq_k = k.shape[1]
    block_sizes = block_sizes.fit(seq_q, seq_k)
    delta = jnp.sum(do.astype(jnp.float32) * out.astype(jnp.float32), axis=-1, keepdims=True)
    delta = jnp.broadcast_to(delta, (bh, seq_q, LANES))
    semantics = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))

    bq, bk = block_sizes.dkv

    def q_rows(b, j, i):  # dk/dv grid (b, kv block j, q block i): skip q blocks wholly above the diagonal
        if causal:
            i = jnp.maximum(i, _first_needed(j, bq, bk))
        return (b, i, 0)

    kv_block = lambda b, j, i: (b, j, 0)
    dk, dv = pl.pallas_call(
        functools.partial(_dkdv_kernel, causal=causal, sm_scale=sm_scale, block_q=bq, block_k=bk),
        out_shape=(jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)),
        grid=(bh, seq_k // bk, seq_q // bq),
        in_specs=[pl.BlockSpec((None, bq, d), q_rows), pl.BlockSpec((None, bk, d), kv_block),
                  pl.BlockSpec((None, bk, d), kv_block), pl.BlockSpec((None, bq, d), q_rows),
                  pl.BlockSpec((None, bq, LANES), q_rows), pl.BlockSpec((None, bq, LANES), q_rows)],
        out_specs=[pl.BlockSpec((None, bk, d), kv_block), pl.BlockSpec((None, bk, d), kv_block)],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=semantics, cost_estimate=_bwd_cost("dkv", bh, seq_q, seq_k, d, bq, bk, causal, q.dtype),
        name="flash_attention_bwd_dkdv",
    )(q, k, v, do, lse, delta)

    bq, bk = block_sizes.dq

    def kv_cols(b, i, j):
        if causal:
            j = jnp.minimum(j, _last_needed(i, bq, bk))
        return (b, j, 0)

    q_block = lambda b, i, j: (b, i, 0)
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, causal=causal, sm_scale=sm_scale, block_q=bq, block_k=bk),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(bh, seq_q // bq, seq_k // bk),
        in_specs=[pl.BlockSpec((None, bq, d), q_block), pl.BlockSpec((None, bk, d), kv_cols),
                  pl.BlockSpec((None, bk, d), kv_cols), pl.BlockSpec((None, bq, d), q_block),
                  pl.BlockSpec((None, bq, LANES), q_block), pl.BlockSpec((None, bq, LANES), q_block)],
        out_specs=pl.BlockSpec((None, bq, d), q_block),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=semantics, cost_estimate=_bwd_cost("dq", bh, seq_q, seq_k, d, bq, bk, causal, q.dtype),
        name="flash_attention_bwd_dq",
    )(q, k, v, do, lse, delta)
    return dq, dk, dv


# ----------------------------------------------------------------------------- public


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _flash(q, k, v, causal, sm_scale, block_sizes):
    return _forward(q, k, v, causal, sm_scale, block_sizes)[0]


def _flash_fwd(q, k, v, causal, sm_scale, block_sizes):
    out, lse = _forward(q, k, v, causal, sm_scale, block_sizes)
    return out, (q, k, v, out, lse)


def _flash_bwd(causal, sm_scale, block_sizes, residuals, do):
    return _backward(*residuals, do, causal, sm_scale, block_sizes)


_flash.defvjp(_flash_fwd, _flash_bwd)


def flash_attention(q, k, v, *, causal: bool = True, sm_scale: float | None = None,
                    block_sizes: BlockSizes = BlockSizes()):
    """Attention over q, k, v of shape (batch*heads, seq, head_dim); differentiable."""
    if q.ndim != 3 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"flash_attention wants q (BH, Sq, D) and k, v (BH, Sk, D); got {q.shape}, {k.shape}, {v.shape}")
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return _flash(q, k, v, causal, scale, block_sizes)


# The public name block_sparse_attention shares _dot by, here at the end so that no kernel's line
# moves; the function keeps its own name: the lowered modules carry names and lines in their source
# locations (what the UI shows, what the compile cache keys by).
dot = _dot
