"""Kernels measured on the chip to check the time estimate, not to set it ("heldout." entries of
tests/bench/chip_corpus.py): JAX's grouped matmuls and paged attention at working sizes, and two
kernels written for this, a scalar-prefetch row gather and a row-blocked layer norm.

Nothing in the inspector was derived from their measurements: they were measured in the same
session as the step-cost probes (chip_probes.py), before the estimate used those.
"""
import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import megablox
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel

megablox_gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")

# 16 experts, tokens routed with a skew (a few busy experts, two idle)
TOKENS, D_IN, D_OUT = 8192, 1024, 1024
GROUPS = np.array([1900, 1200, 900, 800, 700, 600, 500, 400, 350, 300, 250, 292, 0, 0, 0, 0], np.int32)
assert GROUPS.sum() == TOKENS


def gmm(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    return megablox.gmm(lhs, rhs, group_sizes, jnp.bfloat16, (tm, tk, tn))


def tgmm(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    return megablox_gmm.tgmm(lhs, rhs, group_sizes, jnp.float32, (tm, tk, tn))


def _gmm_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    lhs = jax.random.normal(k1, (TOKENS, D_IN), jnp.bfloat16)
    rhs = (jax.random.normal(k2, (len(GROUPS), D_IN, D_OUT), jnp.float32) / 32).astype(jnp.bfloat16)
    return lhs, rhs, jnp.asarray(GROUPS)


def _tgmm_inputs():
    k1, k2 = jax.random.split(jax.random.key(1))
    return (jax.random.normal(k1, (D_IN, TOKENS), jnp.bfloat16), jax.random.normal(k2, (TOKENS, D_OUT), jnp.bfloat16),
            jnp.asarray(GROUPS))


# decode attention over a paged cache: 16 sequences of up to 2048 tokens, 8 query heads on 8 kv heads
BATCH, HEADS, PAGE, PAGES_PER_SEQ = 16, 8, 16, 128


def paged_attention(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block: int = 8):
    return paged_attention_kernel.paged_attention(q, k_pages, v_pages, lengths, page_indices,
                                                  pages_per_compute_block=pages_per_compute_block)


def _paged_inputs():
    total = BATCH * PAGES_PER_SEQ
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)
    q = jax.random.normal(k1, (BATCH, HEADS, 128), jnp.bfloat16)
    k_pages = jax.random.normal(k2, (HEADS, total, PAGE, 128), jnp.bfloat16)
    v_pages = jax.random.normal(k3, (HEADS, total, PAGE, 128), jnp.bfloat16)
    rng = np.random.default_rng(0)
    lengths = rng.integers(PAGE * PAGES_PER_SEQ // 2, PAGE * PAGES_PER_SEQ, BATCH).astype(np.int32)
    pages = rng.permutation(total).reshape(BATCH, PAGES_PER_SEQ).astype(np.int32)
    return q, k_pages, v_pages, jnp.asarray(lengths), jnp.asarray(pages)


# an embedding lookup: one (8, width) row group of the table per id, the ids prefetched to SMEM
IDS, TABLE_GROUPS = 8192, 4096


def gather(ids, table):
    width = table.shape[-1]

    def body(ids_ref, t_ref, o_ref):
        o_ref[...] = t_ref[...]

    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(ids.shape[0],),
        in_specs=[pl.BlockSpec((1, 8, width), lambda i, ids_ref: (ids_ref[i], 0, 0))],
        out_specs=pl.BlockSpec((1, 8, width), lambda i, ids_ref: (i, 0, 0)))
    return pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((ids.shape[0], 8, width), table.dtype))(ids, table)


def gather_wide(ids, table):
    """gather on a table 8x wider: 32 KiB a step."""
    return gather(ids, table)


def _gather_inputs(width):
    ids = np.random.default_rng(1).integers(0, TABLE_GROUPS, IDS).astype(np.int32)
    return jnp.asarray(ids), jax.random.normal(jax.random.key(3), (TABLE_GROUPS, 8, width), jnp.float32)


def layer_norm(x, scale, rows: int = 64):
    """Each block of rows normalised over its last dim."""
    def body(x_ref, s_ref, o_ref):
        v = x_ref[...]
        mean = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mean) ** 2, axis=-1, keepdims=True)
        o_ref[...] = ((v - mean) * jax.lax.rsqrt(var + 1e-6) * s_ref[...]).astype(o_ref.dtype)

    n, d = x.shape
    return pl.pallas_call(
        body, grid=(n // rows,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((rows, d), lambda i: (i, 0)), pl.BlockSpec((1, d), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((rows, d), lambda i: (i, 0)))(x, scale)


def _norm_inputs():
    k1, k2 = jax.random.split(jax.random.key(4))
    return jax.random.normal(k1, (16384, 1024), jnp.float32), jax.random.normal(k2, (1, 1024), jnp.float32)


INSPECT = {
    "gmm": {"args": _gmm_inputs, "params": {"tm": [128, 256, 512], "tk": [128, 512], "tn": [128, 512]}},
    "tgmm": {"args": _tgmm_inputs, "params": {"tm": [128, 256, 512], "tk": [128, 512], "tn": [128, 512]}},
    "paged_attention": {"args": _paged_inputs, "params": {"pages_per_compute_block": [8, 4, 16]}},
    "gather": {"args": functools.partial(_gather_inputs, 128)},
    "gather_wide": {"args": functools.partial(_gather_inputs, 1024)},
    "layer_norm": {"args": _norm_inputs, "params": {"rows": [64, 8, 512]}},
}
