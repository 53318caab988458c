"""Grouped matmul (the MoE expert layer): rows of ``lhs`` are assigned to groups by
``group_sizes`` and row block r of group g is multiplied by ``rhs[g]``. Same semantics as
``jax.lax.ragged_dot`` (rows past sum(group_sizes) are zero).

Row tiles of ``bm`` rows can straddle groups, so the grid walks a list of (row tile, group)
work items, computed from ``group_sizes`` with jnp and scalar-prefetched into SMEM. Items of
one tile are consecutive, so each output block is revisited only on consecutive steps; rows of
another group are zeroed before the matmul.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .block_sizes import TileSizes
from .cost import nbytes

__all__ = ["TileSizes", "ragged_dot", "reference", "work_items"]


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32).astype(lhs.dtype)


def work_items(group_sizes, m: int, bm: int):
    """(tile, group, first-of-tile, last-of-tile, valid) per work item, padded to a static
    length of m_tiles + groups; padding repeats the last item with valid=0."""
    g = group_sizes.shape[0]
    tiles = m // bm
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    t = jnp.arange(tiles)
    lo, hi = t * bm, (t + 1) * bm
    overlap = (starts[None, :] < hi[:, None]) & (ends[None, :] > lo[:, None]) & (group_sizes[None, :] > 0)
    # a tile no group covers still gets one item (group -1) so its output block is written (zeros)
    empty = ~overlap.any(axis=1)
    per_tile = jnp.where(empty, 1, overlap.sum(axis=1))
    first_item = jnp.cumsum(per_tile) - per_tile
    total = per_tile.sum()
    n = tiles + g
    item = jnp.arange(n)
    tile_of = jnp.clip(jnp.searchsorted(first_item, item, side="right") - 1, 0, tiles - 1)
    rank = item - first_item[tile_of]  # which overlapping group of the tile
    order = jnp.cumsum(overlap, axis=1) - 1  # rank of each overlapping group within its tile
    match = overlap[tile_of] & (order[tile_of] == rank[:, None])
    group_of = jnp.where(empty[tile_of], -1, jnp.argmax(match, axis=1))
    valid = item < total
    last = jnp.maximum(total - 1, 0)
    tile_of = jnp.where(valid, tile_of, tile_of[last])
    group_of = jnp.where(valid, group_of, group_of[last])
    first = valid & (rank == 0)
    last_of_tile = valid & (rank == per_tile[tile_of] - 1)
    return [x.astype(jnp.int32) for x in (tile_of, group_of, first, last_of_tile, valid)], starts, ends


def _kernel(tile_ref, group_ref, first_ref, last_ref, valid_ref, starts_ref, ends_ref,
            lhs_ref, rhs_ref, o_ref, acc_ref, *, bm):
    w, kk = pl.program_id(1), pl.program_id(2)
    group = group_ref[w]

    @pl.when((first_ref[w] == 1) & (kk == 0))
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    @pl.when((valid_ref[w] == 1) & (group >= 0))
    def _accumulate():
        g = jnp.maximum(group, 0)
        rows = tile_ref[w] * bm + jax.lax.broadcasted_iota(jnp.int32, lhs_ref.shape, 0)
        mine = (rows >= starts_ref[g]) & (rows < ends_ref[g])
        x = jnp.where(mine, lhs_ref[...], jnp.zeros_like(lhs_ref[...]))
        acc_ref[...] += jnp.dot(x, rhs_ref[...], preferred_element_type=jnp.float32)

    @pl.when((last_ref[w] == 1) & (kk == pl.num_programs(2) - 1))
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _cost(m, k, n, groups, tiles: TileSizes, dtype, out_dtype) -> pl.CostEstimate:
    """From the shapes alone (the work items are computed from group_sizes at run time): an upper
    bound that takes all m_tiles + groups items as real. Each item multiplies a (bm, k) row tile
    by (k, bn) per column tile. Grid (j, w, kk): with more than one k tile the lhs and rhs tiles
    change at every step, so every step fetches both; with one k tile a run of items on the same
    row tile (or group) reuses them, which this bound does not credit. Every output tile is
    written once: a tile's items are consecutive."""
    items, nt, kt = m // tiles.bm + groups, n // tiles.bn, k // tiles.bk
    steps = nt * items * kt
    moved = (steps * (nbytes((tiles.bm, tiles.bk), dtype) + nbytes((tiles.bk, tiles.bn), dtype))
             + nbytes((m, n), out_dtype))
    return pl.CostEstimate(flops=2 * items * tiles.bm * k * n, transcendentals=0, bytes_accessed=moved)


def ragged_dot(lhs, rhs, group_sizes, tiles: TileSizes = TileSizes()):
    """lhs (m, k), rhs (groups, k, n), group_sizes (groups,) int32 -> (m, n)."""
    (m, k), (g, k2, n) = lhs.shape, rhs.shape
    if k != k2 or group_sizes.shape != (g,):
        raise ValueError(f"ragged_dot: lhs {lhs.shape}, rhs {rhs.shape}, group_sizes {group_sizes.shape} do not match")
    for name, dim, tile in (("m", m, tiles.bm), ("k", k, tiles.bk), ("n", n, tiles.bn)):
        if dim % tile:
            raise ValueError(f"ragged_dot: {name}={dim} is not a multiple of its tile {tile}")
    items, starts, ends = work_items(group_sizes.astype(jnp.int32), m, tiles.bm)
    num_items = items[0].shape[0]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=7,
        grid=(n // tiles.bn, num_items, k // tiles.bk),  # items in the middle: revisits of a tile are consecutive
        in_specs=[
            pl.BlockSpec((tiles.bm, tiles.bk), lambda j, w, kk, tile, *_: (tile[w], kk)),
            pl.BlockSpec((None, tiles.bk, tiles.bn), lambda j, w, kk, tile, group, *_: (jnp.maximum(group[w], 0), kk, j)),
        ],
        out_specs=pl.BlockSpec((tiles.bm, tiles.bn), lambda j, w, kk, tile, *_: (tile[w], j)),
        scratch_shapes=[pltpu.VMEM((tiles.bm, tiles.bn), jnp.float32)],
    )
    return pl.pallas_call(
        functools.partial(_kernel, bm=tiles.bm), grid_spec=spec,
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "arbitrary")),
        cost_estimate=_cost(m, k, n, g, tiles, lhs.dtype, lhs.dtype),
        name="ragged_dot",
    )(*items, starts.astype(jnp.int32), ends.astype(jnp.int32), lhs, rhs)
