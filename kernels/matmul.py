"""Tiled matmul as a Pallas TPU kernel: (bm, bk) x (bk, bn) tiles, an f32 accumulator in VMEM
scratch, the reduction axis last and "arbitrary"."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .block_sizes import TileSizes  # per-chip defaults: TileSizes.for_chip("tpu-v6e")
from .cost import nbytes

__all__ = ["TileSizes", "matmul", "reference"]


def reference(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def _kernel(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _cost(m, k, n, tiles: TileSizes, dtype, out_dtype) -> pl.CostEstimate:
    """2 m k n flops. Grid (i, j, kk): the a tile (i, kk) and the b tile (kk, j) change every step
    when k has more than one tile (a is read n / bn times, b m / bm times); with one k tile a
    stays put across j (and b too when n is one tile). Each output tile is written once."""
    mt, nt, kt = m // tiles.bm, n // tiles.bn, k // tiles.bk
    steps = mt * nt * kt
    a_fetches = steps if kt > 1 else mt
    b_fetches = steps if kt > 1 else mt * nt if nt > 1 else 1
    moved = (a_fetches * nbytes((tiles.bm, tiles.bk), dtype) + b_fetches * nbytes((tiles.bk, tiles.bn), dtype)
             + mt * nt * nbytes((tiles.bm, tiles.bn), out_dtype))
    return pl.CostEstimate(flops=2 * m * k * n, transcendentals=0, bytes_accessed=moved)


def matmul(a, b, tiles: TileSizes = TileSizes(256, 512, 256)):
    """a (m, k) @ b (k, n); each dim must be a multiple of its tile."""
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"matmul: contraction dims differ: a {a.shape}, b {b.shape}")
    for name, dim, tile in (("m", m, tiles.bm), ("k", k, tiles.bk), ("n", n, tiles.bn)):
        if dim % tile:
            raise ValueError(f"matmul: {name}={dim} is not a multiple of its tile {tile}: pad it or pick another tile")
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // tiles.bm, n // tiles.bn, k // tiles.bk),
        in_specs=[pl.BlockSpec((tiles.bm, tiles.bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((tiles.bk, tiles.bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((tiles.bm, tiles.bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((tiles.bm, tiles.bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        cost_estimate=_cost(m, k, n, tiles, a.dtype, a.dtype),
        name="matmul",
    )(a, b)
