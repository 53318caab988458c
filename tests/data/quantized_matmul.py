"""Quantized blocked matmuls and JAX's megablox grouped matmul, written by the team to find what
libtpu keeps in VMEM for a matmul operand the chip's MXU cannot take (fp8 on TPU v5e, v5p and
v6e: Mosaic converts the block first) and what megablox's gmm takes on v5p (issue 48).
tests/test_vmem_quantized_matmul.py holds libtpu's verdicts (tests/data/vmem_truth_quantized.json)
against the estimate.

- qmm: x (M, K) and w (K, N) of one dtype (float8_e4m3fn, float8_e5m2, int8 or bf16) in
  (bm, bk) and (bk, bn) blocks, a (M, 1) row scale and a (1, N) column scale, an f32 (bm, bn)
  accumulator over the K axis of the grid, the scaled sum stored at the last step (bf16 out);
- qmm_cast: the same, but the body casts both blocks to bf16 itself before the matmul;
- qmm_w8: bf16 x against an 8-bit w (a weight-only quantized matmul), w cast to bf16 in the body;
- gmm: jax.experimental.pallas.ops.tpu.megablox.gmm, bf16 lhs (m, k), rhs (groups, k, n).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import megablox


def _qmm_kernel(x_ref, w_ref, xs_ref, ws_ref, o_ref, acc_ref, *, cast):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    x, w = x_ref[...], w_ref[...]
    if cast is not None:
        x, w = x.astype(cast), w.astype(cast)
    acc_ref[...] += jnp.dot(x, w, preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] * xs_ref[...] * ws_ref[...]).astype(o_ref.dtype)


def _qmm(x, w, xs, ws, bm, bk, bn, cast=None):
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        functools.partial(_qmm_kernel, cast=cast), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                  pl.BlockSpec((bm, 1), lambda i, j, kk: (i, 0)), pl.BlockSpec((1, bn), lambda i, j, kk: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, w, xs, ws)


def qmm(x, w, xs, ws, bm=256, bk=512, bn=256):
    return _qmm(x, w, xs, ws, bm, bk, bn)


def qmm_cast(x, w, xs, ws, bm=256, bk=512, bn=256):
    return _qmm(x, w, xs, ws, bm, bk, bn, cast=jnp.bfloat16)


def _w8_kernel(x_ref, w_ref, ws_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...].astype(x_ref.dtype), preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (acc_ref[...] * ws_ref[...]).astype(o_ref.dtype)


def qmm_w8(x, w, ws, bm=256, bk=512, bn=256):
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _w8_kernel, grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                  pl.BlockSpec((1, bn), lambda i, j, kk: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, w, ws)


def _reference(x, w, xs, ws):
    return (jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32)) * xs * ws).astype(jnp.bfloat16)


def qmm_ref(x, w, xs, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return _reference(x, w, xs, ws)


def qmm_cast_ref(x, w, xs, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return _reference(x, w, xs, ws)


def qmm_w8_ref(x, w, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return (jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32)) * ws).astype(x.dtype)


def group_sizes(m: int, groups: int) -> np.ndarray:
    """Rows per group as a router makes them, uneven, one group empty: they sum to m."""
    weights = np.arange(1, groups + 1, dtype=np.int64) % 4
    sizes = m * weights // weights.sum()
    sizes[-1] += m - sizes.sum()
    return sizes.astype(np.int32)


def gmm(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    """lhs (m, k) rows sorted by group, rhs (groups, k, n): out[rows of g] = lhs[rows of g] @ rhs[g]."""
    return megablox.gmm(lhs, rhs, sizes, jnp.float32, (tm, tk, tn))


def gmm_ref(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    del tm, tk, tn
    return jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32)


def _quantized(dtype, m, k, n):
    def make():
        k1, k2 = jax.random.split(jax.random.key(0))
        x = jax.random.normal(k1, (m, k), jnp.float32)
        w = jax.random.normal(k2, (k, n), jnp.float32) / np.sqrt(k)
        if jnp.issubdtype(dtype, jnp.integer):
            x, w = jnp.round(x * 16), jnp.round(w * 64)
        return (x.astype(dtype), w.astype(dtype), jnp.full((m, 1), 0.5, jnp.float32),
                jnp.linspace(0.5, 1.5, n, dtype=jnp.float32)[None, :])
    return make


def _gmm_inputs():
    k1, k2 = jax.random.split(jax.random.key(1))
    sizes = group_sizes(512, 4)
    return (jax.random.normal(k1, (512, 256), jnp.bfloat16),
            (jax.random.normal(k2, (4, 256, 256), jnp.float32) / 16).astype(jnp.bfloat16), jnp.asarray(sizes))


INSPECT = {
    "qmm": {"args": _quantized(jnp.float8_e4m3fn, 512, 1024, 512), "reference": "qmm_ref",
            "params": {"bm": [256], "bk": [512], "bn": [256]}},
    "qmm_cast": {"args": _quantized(jnp.float8_e5m2, 512, 1024, 512), "reference": "qmm_cast_ref",
                 "params": {"bm": [256], "bk": [512], "bn": [256]}},
    "qmm_w8": {"args": lambda: (_quantized(jnp.bfloat16, 512, 1024, 512)()[0],
                                _quantized(jnp.int8, 512, 1024, 512)()[1],
                                jnp.linspace(0.5, 1.5, 512, dtype=jnp.float32)[None, :]),
               "reference": "qmm_w8_ref", "params": {"bm": [256], "bk": [512], "bn": [256]}},
    "gmm": {"args": _gmm_inputs, "reference": "gmm_ref", "params": {"tm": [128], "tk": [128], "tn": [128]}},
}
