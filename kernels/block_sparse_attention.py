"""Block-sparse attention (the seed's sparse attention, done right) as a Pallas TPU kernel.

The element mask (here: a local window plus global tokens, optionally causal, optionally
segment ids) is classified per (q block, kv block) on the host: empty, partial or full. Each q
block row gets the list of its non-empty kv blocks, scalar-prefetched into SMEM; the grid walks
that list, so empty blocks are never loaded, full blocks skip the element mask, partial ones
apply it. The backward pass uses the dense masked reference (labelled: it is not a kernel).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .block_sizes import LANES, BlockSizes
from .cost import nbytes, transfers
from .flash_attention import MASK_VALUE, dot, normalise, online_softmax_update

__all__ = ["BlockSizes", "LocalGlobalMask", "block_layout", "block_sparse_attention", "reference"]

EMPTY, PARTIAL, FULL = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class LocalGlobalMask:
    """Query q sees key k when |q - k| <= window (k <= q too if causal), or either is one of the
    first ``global_tokens`` positions."""

    window: int = 256
    global_tokens: int = 16
    causal: bool = True

    def __call__(self, q, k):
        """q, k: broadcastable integer arrays (numpy or jnp)."""
        xp = jnp if isinstance(q, jax.Array) or isinstance(k, jax.Array) else np
        near = xp.abs(q - k) <= self.window
        if self.causal:
            near = near & (k <= q)
        glob = (k < self.global_tokens) | (q < self.global_tokens)
        return near | (glob & (k <= q) if self.causal else glob)


def block_layout(mask: LocalGlobalMask, seq_q: int, seq_k: int, bq: int, bk: int):
    """Per q block row: its non-empty kv blocks (padded by repeating the last) and their kinds."""
    nq, nk = seq_q // bq, seq_k // bk
    kinds = np.zeros((nq, nk), np.int32)
    for i in range(nq):
        rows = np.arange(i * bq, (i + 1) * bq)[:, None]
        for j in range(nk):
            m = mask(rows, np.arange(j * bk, (j + 1) * bk)[None, :])
            kinds[i, j] = FULL if m.all() else PARTIAL if m.any() else EMPTY
    counts = (kinds != EMPTY).sum(axis=1)
    width = max(int(counts.max()), 1)
    ids = np.zeros((nq, width), np.int32)
    row_kinds = np.zeros((nq, width), np.int32)
    for i in range(nq):
        nonempty = np.flatnonzero(kinds[i])
        ids[i, :len(nonempty)] = nonempty
        ids[i, len(nonempty):] = nonempty[-1] if len(nonempty) else 0  # same block again: no new DMA
        row_kinds[i, :len(nonempty)] = kinds[i, nonempty]
    return ids, row_kinds, kinds


def small_ints(table: np.ndarray) -> np.ndarray:
    """The narrowest of int8, int16, int32 that holds ``table`` (non-negative), as JAX's splash
    attention does for its SMEM tables: SMEM is 1 MiB, and a long sequence's tables add up."""
    top = int(table.max()) if table.size else 0
    for dtype in (np.int8, np.int16):
        if top <= np.iinfo(dtype).max:
            return table.astype(dtype)
    return table.astype(np.int32)


def reference(q, k, v, *, mask: LocalGlobalMask, segment_ids=None, sm_scale: float | None = None):
    """Dense masked attention in f32."""
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = jnp.einsum("bqd,bkd->bqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
    visible = mask(jnp.arange(q.shape[1])[:, None], jnp.arange(k.shape[1])[None, :])[None]
    if segment_ids is not None:
        visible = visible & (segment_ids[:, :, None] == segment_ids[:, None, :])
    p = jax.nn.softmax(jnp.where(visible, s, MASK_VALUE), axis=-1)
    p = jnp.where(visible.any(axis=-1, keepdims=True), p, 0.0)  # a row that sees no key: 0, as the kernel
    return jnp.einsum("bqk,bkd->bqd", p, v.astype(jnp.float32)).astype(q.dtype)


def _kernel(ids_ref, kinds_ref, q_ref, k_ref, v_ref, *rest, mask, sm_scale, bq, bk, width, segments):
    if segments:
        qseg_ref, kseg_ref, o_ref, m_sc, l_sc, acc_sc = rest
    else:
        o_ref, m_sc, l_sc, acc_sc = rest
    i, t = pl.program_id(1), pl.program_id(2)
    kind = kinds_ref[i * width + t].astype(jnp.int32)  # the SMEM tables are int8/int16 where they fit

    @pl.when(t == 0)
    def _init():
        m_sc[...] = jnp.full(m_sc.shape, MASK_VALUE, jnp.float32)
        l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    def _step(apply_mask: bool):
        s = dot(q_ref[...], k_ref[...], 1, 1) * sm_scale
        visible = None
        if apply_mask:
            j = ids_ref[i * width + t].astype(jnp.int32)
            rows = i * bq + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
            cols = j * bk + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
            visible = mask(rows, cols)
        if segments:
            same = qseg_ref[...] == kseg_ref[...]  # (bq, 1) == (1, bk)
            visible = same if visible is None else visible & same
        if visible is not None:
            s = jnp.where(visible, s, MASK_VALUE)
        online_softmax_update(s, v_ref, m_sc, l_sc, acc_sc, visible)

    pl.when(kind == FULL)(lambda: _step(apply_mask=False))  # fully visible: no element mask
    pl.when(kind == PARTIAL)(lambda: _step(apply_mask=True))

    @pl.when(t == pl.num_programs(2) - 1)
    def _finish():
        o_ref[...] = normalise(acc_sc[...], l_sc[:, :1]).astype(o_ref.dtype)  # rows that saw no key: 0


def _cost(bh, d, bq, bk, ids, kinds, dtype, segment_dtype=None) -> pl.CostEstimate:
    """Per non-empty block: q k^T and p v (4 bq bk d flops), exp of the scores and of the rescale
    (bq bk + bq); padding steps (kind EMPTY) compute nothing. k and v (and the kv segment ids) are
    fetched once per run of an unchanged block id along each row's list; q and o once per q block.
    The scalar-prefetch tables go to SMEM before the grid runs and are not counted."""
    nq = ids.shape[0]
    blocks = int((kinds != EMPTY).sum())
    runs = transfers(ids.ravel())
    moved = 2 * nq * nbytes((bq, d), dtype) + 2 * runs * nbytes((bk, d), dtype)
    if segment_dtype is not None:
        moved += nq * nbytes((bq, 1), segment_dtype) + runs * nbytes((1, bk), segment_dtype)
    return pl.CostEstimate(flops=bh * blocks * 4 * bq * bk * d, transcendentals=bh * blocks * (bq * bk + bq),
                           bytes_accessed=bh * moved)


def _forward(q, k, v, segment_ids, mask, sm_scale, block_sizes):
    bh, seq_q, d = q.shape
    seq_k = k.shape[1]
    bq, bk = block_sizes.block_q, block_sizes.block_k
    if seq_q % bq or seq_k % bk:
        raise ValueError(f"block_q={bq} and block_k={bk} must divide the sequence lengths {seq_q}, {seq_k}")
    ids, kinds, _ = block_layout(mask, seq_q, seq_k, bq, bk)
    width = ids.shape[1]
    segments = segment_ids is not None
    kv_block = lambda ids_ref, i, t: ids_ref[i * width + t].astype(jnp.int32)
    kv_index = lambda b, i, t, ids_ref, kinds_ref: (b, kv_block(ids_ref, i, t), 0)
    in_specs = [pl.BlockSpec((None, bq, d), lambda b, i, t, *_: (b, i, 0)),
                pl.BlockSpec((None, bk, d), kv_index), pl.BlockSpec((None, bk, d), kv_index)]
    operands = [q, k, v]
    if segments:
        in_specs += [pl.BlockSpec((None, bq, 1), lambda b, i, t, *_: (b, i, 0)),
                     pl.BlockSpec((None, 1, bk), lambda b, i, t, ids_ref, kinds_ref: (b, 0, kv_block(ids_ref, i, t)))]
        operands += [segment_ids[:, :, None], segment_ids[:, None, :]]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2, grid=(bh, seq_q // bq, width), in_specs=in_specs,
        out_specs=pl.BlockSpec((None, bq, d), lambda b, i, t, *_: (b, i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, LANES), jnp.float32), pltpu.VMEM((bq, LANES), jnp.float32),
                        pltpu.VMEM((bq, d), jnp.float32)],
    )
    kernel = functools.partial(_kernel, mask=mask, sm_scale=sm_scale, bq=bq, bk=bk, width=width, segments=segments)
    return pl.pallas_call(
        kernel, grid_spec=spec, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        cost_estimate=_cost(bh, d, bq, bk, ids, kinds, q.dtype, segment_ids.dtype if segments else None),
        name="block_sparse_attention",
    )(jnp.asarray(small_ints(ids.reshape(-1))), jnp.asarray(small_ints(kinds.reshape(-1))), *operands)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _attention(q, k, v, segment_ids, mask, sm_scale, block_sizes):
    return _forward(q, k, v, segment_ids, mask, sm_scale, block_sizes)


def _fwd(q, k, v, segment_ids, mask, sm_scale, block_sizes):
    return _forward(q, k, v, segment_ids, mask, sm_scale, block_sizes), (q, k, v, segment_ids)


def _bwd(mask, sm_scale, block_sizes, residuals, do):
    """Gradient through the dense reference: correct, but not a kernel (it materializes S x S)."""
    q, k, v, segment_ids = residuals
    _, vjp = jax.vjp(lambda q, k, v: reference(q, k, v, mask=mask, segment_ids=segment_ids, sm_scale=sm_scale), q, k, v)
    return (*vjp(do), None)


_attention.defvjp(_fwd, _bwd)


def block_sparse_attention(q, k, v, *, mask: LocalGlobalMask = LocalGlobalMask(), segment_ids=None,
                           sm_scale: float | None = None, block_sizes: BlockSizes = BlockSizes()):
    """Attention over q, k, v (batch*heads, seq, head_dim) where ``mask`` says which keys each
    query sees; ``segment_ids`` (batch*heads, seq) int32 further restricts it to equal ids."""
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return _attention(q, k, v, segment_ids, mask, scale, block_sizes)
