"""Quantized matmuls in other styles than tests/data/quantized_matmul.py's, and megablox's grouped
matmuls at other tilings, written to check rule matmul_lowering (what a matmul's lowering may spill:
its lhs laid out for the MXU, its result's partial sums) on kernels it was not read from (issue 48).
tests/test_vmem_quantized_variants.py holds libtpu's verdicts (tests/data/vmem_truth_variants.json)
against the estimate, and the verdicts the estimate gave before they were compiled
(tests/data/vmem_predictions_variants.json).

- w8_out: bf16 x (M, K) against an int8 w (K, N), w cast to bf16 in the body, the sum kept in the
  f32 output block itself (no scratch), the column scale applied in place at the last K step;
- w8_dequant: the same operands, w dequantized in the body before the matmul ((w * scale) in f32,
  then bf16), an f32 scratch accumulator, bf16 out;
- fp8_weight: bf16 x against a float8_e4m3fn w cast to bf16 in the body, f32 scratch, bf16 out;
- int8_int8: int8 x and w, an int32 matmul into an int32 scratch, both scales at the end, bf16 out;
- f32_bf16: f32 x against a bf16 w cast to f32 (an f32 matmul), summed in the f32 output block;
- wt_bf16: bf16 x against a bf16 w stored (N, K) (a weight in (out, in) layout: x @ w.T), f32 scratch;
- cast_lhs: an f32 x cast to bf16 in the body against a bf16 w, f32 scratch, bf16 out;
- gmm, gmm_t, gmm_f32: megablox's gmm, bf16 (rhs (groups, k, n)), bf16 with transpose_rhs (rhs
  (groups, n, k)), f32; tgmm: megablox's tgmm, bf16 (the weight gradient of a grouped matmul).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import megablox
from jax.experimental.pallas.ops.tpu.megablox.gmm import tgmm as megablox_tgmm

PARALLEL = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))


def _specs(bm, bk, bn, transposed=False):
    w = pl.BlockSpec((bn, bk), lambda i, j, k: (j, k)) if transposed else pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))
    return pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)), w


def _row(bm):
    return pl.BlockSpec((bm, 1), lambda i, j, k: (i, 0))


def _col(bn):
    return pl.BlockSpec((1, bn), lambda i, j, k: (0, j))


def _out(bm, bn):
    return pl.BlockSpec((bm, bn), lambda i, j, k: (i, j))


def _first(body):
    pl.when(pl.program_id(2) == 0)(body)


def _last(body):
    pl.when(pl.program_id(2) == pl.num_programs(2) - 1)(body)


# ------------------------------------------------------------------ w8_out: the sum in the output block

def _w8_out_kernel(x_ref, w_ref, ws_ref, o_ref):
    @_first
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], w_ref[...].astype(jnp.bfloat16), preferred_element_type=jnp.float32)

    @_last
    def _():
        o_ref[...] *= ws_ref[...]


def w8_out(x, w, ws, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_w8_out_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec, _col(bn)],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                          compiler_params=PARALLEL)(x, w, ws)


def w8_out_ref(x, w, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32)) * ws


# ------------------------------------------------------------------ w8_dequant: w dequantized before the matmul

def _w8_dequant_kernel(x_ref, w_ref, ws_ref, o_ref, acc_ref):
    @_first
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    w = (w_ref[...].astype(jnp.float32) * ws_ref[...]).astype(jnp.bfloat16)
    acc_ref[...] += jnp.dot(x_ref[...], w, preferred_element_type=jnp.float32)

    @_last
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def w8_dequant(x, w, ws, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_w8_dequant_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec, _col(bn)],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)], compiler_params=PARALLEL)(x, w, ws)


def w8_dequant_ref(x, w, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    w = (w.astype(jnp.float32) * ws).astype(jnp.bfloat16)
    return jnp.dot(x, w, preferred_element_type=jnp.float32).astype(jnp.bfloat16)


# ------------------------------------------------------------------ fp8_weight: bf16 x against an fp8 w

def _fp8_weight_kernel(x_ref, w_ref, ws_ref, o_ref, acc_ref):
    @_first
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...].astype(jnp.bfloat16), preferred_element_type=jnp.float32)

    @_last
    def _():
        o_ref[...] = (acc_ref[...] * ws_ref[...]).astype(o_ref.dtype)


def fp8_weight(x, w, ws, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_fp8_weight_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec, _col(bn)],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)], compiler_params=PARALLEL)(x, w, ws)


def fp8_weight_ref(x, w, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return (jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32)) * ws).astype(jnp.bfloat16)


# ------------------------------------------------------------------ int8_int8: an int32 matmul

def _int8_kernel(x_ref, w_ref, xs_ref, ws_ref, o_ref, acc_ref):
    @_first
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.int32)

    @_last
    def _():
        o_ref[...] = (acc_ref[...].astype(jnp.float32) * xs_ref[...] * ws_ref[...]).astype(o_ref.dtype)


def int8_int8(x, w, xs, ws, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_int8_kernel, grid=(m // bm, n // bn, k // bk),
                          in_specs=[x_spec, w_spec, _row(bm), _col(bn)], out_specs=_out(bm, bn),
                          out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.int32)], compiler_params=PARALLEL)(x, w, xs, ws)


def int8_int8_ref(x, w, xs, ws, bm=256, bk=512, bn=256):
    del bm, bk, bn
    acc = jnp.dot(x.astype(jnp.int32), w.astype(jnp.int32))
    return (acc.astype(jnp.float32) * xs * ws).astype(jnp.bfloat16)


# ------------------------------------------------------------------ f32_bf16: an f32 matmul of a bf16 weight

def _f32_bf16_kernel(x_ref, w_ref, o_ref):
    @_first
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], w_ref[...].astype(jnp.float32), preferred_element_type=jnp.float32)


def f32_bf16(x, w, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_f32_bf16_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                          compiler_params=PARALLEL)(x, w)


def f32_bf16_ref(x, w, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return jnp.dot(x, w.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)


# ------------------------------------------------------------------ wt_bf16: x @ w.T, w in (out, in) layout

def _wt_kernel(x_ref, w_ref, o_ref, acc_ref):
    @_first
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
                                        preferred_element_type=jnp.float32)

    @_last
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def wt_bf16(x, w, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[0]
    x_spec, w_spec = _specs(bm, bk, bn, transposed=True)
    return pl.pallas_call(_wt_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)], compiler_params=PARALLEL)(x, w)


def wt_bf16_ref(x, w, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return jnp.dot(x, w.T, preferred_element_type=jnp.float32).astype(jnp.bfloat16)


# ------------------------------------------------------------------ cast_lhs: an f32 x cast to bf16 in the body

def _cast_lhs_kernel(x_ref, w_ref, o_ref, acc_ref):
    @_first
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...].astype(jnp.bfloat16), w_ref[...], preferred_element_type=jnp.float32)

    @_last
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def cast_lhs(x, w, bm=256, bk=512, bn=256):
    (m, k), n = x.shape, w.shape[1]
    x_spec, w_spec = _specs(bm, bk, bn)
    return pl.pallas_call(_cast_lhs_kernel, grid=(m // bm, n // bn, k // bk), in_specs=[x_spec, w_spec],
                          out_specs=_out(bm, bn), out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)], compiler_params=PARALLEL)(x, w)


def cast_lhs_ref(x, w, bm=256, bk=512, bn=256):
    del bm, bk, bn
    return jnp.dot(x.astype(jnp.bfloat16), w, preferred_element_type=jnp.float32).astype(jnp.bfloat16)


# ------------------------------------------------------------------ megablox

def gmm(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    """lhs (m, k) rows sorted by group, rhs (groups, k, n)."""
    return megablox.gmm(lhs, rhs, sizes, jnp.float32, (tm, tk, tn))


def gmm_t(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    """rhs (groups, n, k): each group's weight in (out, in) layout."""
    return megablox.gmm(lhs, rhs, sizes, jnp.float32, (tm, tk, tn), transpose_rhs=True)


def gmm_f32(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    return megablox.gmm(lhs, rhs, sizes, jnp.float32, (tm, tk, tn))


def tgmm(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    """lhs (k, m), rhs (m, n): per group, lhs[:, rows of g] @ rhs[rows of g] -> (groups, k, n)."""
    return megablox_tgmm(lhs, rhs, sizes, jnp.float32, (tm, tk, tn))


def gmm_ref(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    del tm, tk, tn
    return jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32)


def gmm_t_ref(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    del tm, tk, tn
    return jax.lax.ragged_dot(lhs, jnp.swapaxes(rhs, 1, 2), sizes, preferred_element_type=jnp.float32)


def gmm_f32_ref(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    del tm, tk, tn
    return jax.lax.ragged_dot(lhs, rhs, sizes, preferred_element_type=jnp.float32,
                              precision=jax.lax.Precision.HIGHEST)


def tgmm_ref(lhs, rhs, sizes, tm=128, tk=128, tn=128):
    del tm, tk, tn
    ends = jnp.cumsum(sizes)
    rows = jnp.arange(rhs.shape[0])
    member = ((rows[:, None] < ends[None, :]) & (rows[:, None] >= (ends - sizes)[None, :])).astype(jnp.float32)
    return jnp.einsum("km,mg,mn->gkn", lhs.astype(jnp.float32), member, rhs.astype(jnp.float32),
                      precision=jax.lax.Precision.HIGHEST)


# ------------------------------------------------------------------ example inputs (small: the CPU runs them)

def _sizes(m: int, groups: int) -> np.ndarray:
    """Rows per group, uneven, one group empty: they sum to m."""
    weights = np.arange(1, groups + 1, dtype=np.int64) % 4
    sizes = m * weights // weights.sum()
    sizes[-1] += m - sizes.sum()
    return sizes.astype(np.int32)


def _normal(key, shape, scale=1.0):
    return jax.random.normal(key, shape, jnp.float32) * scale


def _weights(kind):
    def make():
        k1, k2 = jax.random.split(jax.random.key(2))
        x = _normal(k1, (512, 1024))
        w = _normal(k2, (1024, 512), 1 / 32)
        ws = jnp.linspace(0.5, 1.5, 512, dtype=jnp.float32)[None, :]
        if kind == "int8":
            return x.astype(jnp.bfloat16), jnp.round(w * 128).astype(jnp.int8), ws / 128
        if kind == "fp8":
            return x.astype(jnp.bfloat16), (w * 16).astype(jnp.float8_e4m3fn), ws / 16
        if kind == "int8_int8":
            return (jnp.round(x * 16).astype(jnp.int8), jnp.round(w * 128).astype(jnp.int8),
                    jnp.full((512, 1), 1 / 16, jnp.float32), ws / 128)
        if kind in ("f32_bf16", "cast_lhs"):
            return x, w.astype(jnp.bfloat16)
        return x.astype(jnp.bfloat16), w.T.astype(jnp.bfloat16)  # wt: (n, k)
    return make


def _grouped(kind):
    def make():
        k1, k2 = jax.random.split(jax.random.key(3))
        sizes = jnp.asarray(_sizes(512, 4))
        dtype = jnp.float32 if kind == "f32" else jnp.bfloat16
        if kind == "tgmm":
            return (_normal(k1, (256, 512)).astype(dtype), _normal(k2, (512, 256), 1 / 16).astype(dtype), sizes)
        rhs = _normal(k2, (4, 256, 256), 1 / 16)
        if kind == "t":
            rhs = jnp.swapaxes(rhs, 1, 2)
        return _normal(k1, (512, 256)).astype(dtype), rhs.astype(dtype), sizes
    return make


_BLOCKS = {"bm": [256], "bk": [512], "bn": [256]}
_TILES = {"tm": [128], "tk": [128], "tn": [128]}
INSPECT = {
    "w8_out": {"args": _weights("int8"), "reference": "w8_out_ref", "params": _BLOCKS},
    "w8_dequant": {"args": _weights("int8"), "reference": "w8_dequant_ref", "params": _BLOCKS},
    "fp8_weight": {"args": _weights("fp8"), "reference": "fp8_weight_ref", "params": _BLOCKS},
    "int8_int8": {"args": _weights("int8_int8"), "reference": "int8_int8_ref", "params": _BLOCKS},
    "f32_bf16": {"args": _weights("f32_bf16"), "reference": "f32_bf16_ref", "params": _BLOCKS},
    "wt_bf16": {"args": _weights("wt"), "reference": "wt_bf16_ref", "params": _BLOCKS},
    "cast_lhs": {"args": _weights("cast_lhs"), "reference": "cast_lhs_ref", "params": _BLOCKS},
    "gmm": {"args": _grouped("bf16"), "reference": "gmm_ref", "params": _TILES},
    "gmm_t": {"args": _grouped("t"), "reference": "gmm_t_ref", "params": _TILES},
    "gmm_f32": {"args": _grouped("f32"), "reference": "gmm_f32_ref", "params": _TILES},
    "tgmm": {"args": _grouped("tgmm"), "reference": "tgmm_ref", "params": _TILES},
}
