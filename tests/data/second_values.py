"""Kernels written by the team to test three rules of the VMEM estimate before they were compiled
(issue 28; tests/test_vmem_second_values.py holds libtpu's verdicts, tests/data/vmem_truth_second.json):

1. A body without matmuls that computes several values of the size of the largest it computes
   (a bf16 block cast to f32, then its exponentials) keeps one of them beyond the blocks, not two:
   - log_softmax_bf16: x - max - log(sum(exp(x - max))) in f32, stored as bf16;
   - rms_tanh_bf16: tanh of the f32 block, scaled by its root mean square (one reduction).
2. A body that sums a matmul into an f32 scratch and then computes on the whole sum (a fused
   cross-entropy's log-sum-exp) keeps at most 1.7 values of the sum's size beyond its blocks and
   scratch (rule second_value), and at least one less the registers:
   - ce_lse: logits over a vocabulary block summed over the hidden axis, then the running max, sum
     of exponentials and the label's logit.
3. Two matmul results that meet in an element-wise op: v5e keeps at least 0.9 of the larger beyond
   the blocks, v6e 1.0, TPU7x 0.6 (rule met_result):
   - swiglu_bias: f32, each result plus a bias row before they meet;
   - glu_sigmoid_bf16: bf16 in and out, a contraction of 512, sigmoid for silu.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _rows(kernel, x, block_rows):
    rows, width = x.shape
    return pl.pallas_call(
        kernel, grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, width), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, width), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def _log_softmax_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    o_ref[...] = (shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))).astype(o_ref.dtype)


def log_softmax_bf16(x, block_rows=64):
    return _rows(_log_softmax_kernel, x, block_rows)


def _rms_tanh_kernel(x_ref, o_ref):
    y = jnp.tanh(x_ref[...].astype(jnp.float32) * 0.5)
    o_ref[...] = (y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6)).astype(o_ref.dtype)


def rms_tanh_bf16(x, block_rows=64):
    return _rows(_rms_tanh_kernel, x, block_rows)


def _ce_kernel(x_ref, w_ref, labels_ref, lse_ref, label_ref, acc, m_ref, l_ref, hit_ref, *, tiled):
    v, h = pl.program_id(1), pl.program_id(2)
    block_v = acc.shape[1]

    @pl.when((v == 0) & (h == 0))
    def _():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        hit_ref[...] = jnp.zeros_like(hit_ref)

    @pl.when(h == 0)
    def _():
        acc[...] = jnp.zeros_like(acc)

    acc[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(h == pl.num_programs(2) - 1)
    def _():
        logits = acc[...]
        cols = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1) + v * block_v
        hit_ref[...] += jnp.sum(jnp.where(cols == labels_ref[...], logits, 0.0), axis=-1, keepdims=True)
        m_prev = m_ref[...]
        m_next = jnp.maximum(m_prev, jnp.max(logits, axis=-1, keepdims=True))
        shift = jnp.tile(m_next, (1, block_v // 128)) if tiled else m_next
        l_ref[...] = l_ref[...] * jnp.exp(m_prev - m_next) + jnp.sum(jnp.exp(logits - shift), axis=-1, keepdims=True)
        m_ref[...] = m_next

    @pl.when((v == pl.num_programs(1) - 1) & (h == pl.num_programs(2) - 1))
    def _():
        lse = m_ref[...] + jnp.log(l_ref[...])
        lse_ref[...] = lse[:, :1] if tiled else lse
        label_ref[...] = hit_ref[...]


def _ce(x, w, labels, block_b, block_v, block_h, tiled):
    b, hidden = x.shape
    vocab = w.shape[1]
    column = pl.BlockSpec((block_b, 1), lambda i, j, k: (i, 0))
    statistic = pltpu.VMEM((block_b, 128 if tiled else 1), jnp.float32)
    return pl.pallas_call(
        functools.partial(_ce_kernel, tiled=tiled), grid=(b // block_b, vocab // block_v, hidden // block_h),
        in_specs=[pl.BlockSpec((block_b, block_h), lambda i, j, k: (i, k)),
                  pl.BlockSpec((block_h, block_v), lambda i, j, k: (k, j)), column],
        out_specs=[column, column],
        out_shape=[jax.ShapeDtypeStruct((b, 1), jnp.float32)] * 2,
        scratch_shapes=[pltpu.VMEM((block_b, block_v), jnp.float32), statistic, statistic,
                        pltpu.VMEM((block_b, 1), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "arbitrary")),
    )(x, w, labels)


def ce_lse(x, w, labels, block_b=128, block_v=256, block_h=128):
    """Per row of x @ w: the log-sum-exp over the vocabulary and the logit of its label ((B, 1))."""
    return _ce(x, w, labels, block_b, block_v, block_h, tiled=False)


def ce_tiled(x, w, labels, block_b=128, block_v=256, block_h=128):
    """ce_lse with (B, 128) running max and sum, the max tiled across the vocabulary block."""
    return _ce(x, w, labels, block_b, block_v, block_h, tiled=True)


def _scores_log_softmax_kernel(x_ref, w_ref, o_ref):
    s = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
    shifted = s - jnp.max(s, axis=-1, keepdims=True)
    o_ref[...] = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))


def scores_log_softmax(x, w, block_m=128):
    """Per block of rows of x, log_softmax(x @ w) over all of w's columns, f32."""
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        _scores_log_softmax_kernel, grid=(m // block_m,),
        in_specs=[pl.BlockSpec((block_m, k), lambda i: (i, 0)), pl.BlockSpec((k, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_m, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, w)


def _glu_kernel(x_ref, w1_ref, w3_ref, *rest, act, bias):
    b1_ref, b3_ref, o_ref = rest if bias else (None, None, rest[0])
    x = x_ref[...]
    gate = jnp.dot(x, w1_ref[...], preferred_element_type=jnp.float32)
    up = jnp.dot(x, w3_ref[...], preferred_element_type=jnp.float32)
    if bias:
        gate, up = gate + b1_ref[...], up + b3_ref[...]
    o_ref[...] = (act(gate) * up).astype(o_ref.dtype)


def _glu(x, w1, w3, biases, block_m, block_n, act):
    m, k = x.shape
    n = w1.shape[1]
    row = pl.BlockSpec((1, block_n), lambda i, j: (0, j))
    return pl.pallas_call(
        functools.partial(_glu_kernel, act=act, bias=bool(biases)), grid=(m // block_m, n // block_n),
        in_specs=[pl.BlockSpec((block_m, k), lambda i, j: (i, 0)), pl.BlockSpec((k, block_n), lambda i, j: (0, j)),
                  pl.BlockSpec((k, block_n), lambda i, j: (0, j))] + [row] * len(biases),
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x, w1, w3, *biases)


def swiglu_bias(x, w1, w3, b1, b3, block_m=256, block_n=256):
    return _glu(x, w1, w3, (b1, b3), block_m, block_n, jax.nn.silu)


def glu_sigmoid_bf16(x, w1, w3, block_m=256, block_n=256):
    return _glu(x, w1, w3, (), block_m, block_n, jax.nn.sigmoid)


# references, in f32 at the highest precision

def log_softmax_reference(x, **_):
    return jax.nn.log_softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


def rms_tanh_reference(x, **_):
    y = jnp.tanh(x.astype(jnp.float32) * 0.5)
    return (y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-6)).astype(x.dtype)


def ce_lse_reference(x, w, labels, **_):
    logits = jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
    lse = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    return [lse, jnp.take_along_axis(logits, labels, axis=-1)]


def scores_log_softmax_reference(x, w, **_):
    s = jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
    return jax.nn.log_softmax(s, axis=-1)


def _glu_reference(x, w1, w3, biases, act):
    hi, f32 = jax.lax.Precision.HIGHEST, jnp.float32
    gate = jnp.dot(x.astype(f32), w1.astype(f32), precision=hi)
    up = jnp.dot(x.astype(f32), w3.astype(f32), precision=hi)
    if biases:
        gate, up = gate + biases[0].astype(f32), up + biases[1].astype(f32)
    return (act(gate) * up).astype(x.dtype)


def swiglu_bias_reference(x, w1, w3, b1, b3, **_):
    return _glu_reference(x, w1, w3, (b1, b3), jax.nn.silu)


def glu_sigmoid_reference(x, w1, w3, **_):
    return _glu_reference(x, w1, w3, (), jax.nn.sigmoid)


def _normal(*shapes, dtype=jnp.float32, scale=1.0):
    def make():
        keys = jax.random.split(jax.random.key(5), len(shapes))
        return tuple((jax.random.normal(key, shape, jnp.float32) * scale).astype(dtype)
                     for key, shape in zip(keys, shapes))
    return make


def _ce_args():
    x, w = _normal((256, 256), (256, 512), dtype=jnp.bfloat16, scale=0.25)()
    labels = jax.random.randint(jax.random.key(6), (256, 1), 0, 512, jnp.int32)
    return x, w, labels


INSPECT = {
    "log_softmax_bf16": {"args": _normal((256, 512), dtype=jnp.bfloat16), "reference": "log_softmax_reference",
                         "params": {"block_rows": [64]}},
    "rms_tanh_bf16": {"args": _normal((256, 512), dtype=jnp.bfloat16), "reference": "rms_tanh_reference",
                      "params": {"block_rows": [64]}},
    "ce_lse": {"args": _ce_args, "reference": "ce_lse_reference", "params": {"block_b": [128], "block_v": [256]}},
    "ce_tiled": {"args": _ce_args, "reference": "ce_lse_reference", "params": {"block_b": [128], "block_v": [256]}},
    "scores_log_softmax": {"args": _normal((256, 256), (256, 512), dtype=jnp.bfloat16, scale=0.25),
                           "reference": "scores_log_softmax_reference", "params": {"block_m": [128]}},
    "swiglu_bias": {"args": _normal((512, 256), (256, 512), (256, 512), (1, 512), (1, 512), scale=0.25),
                    "reference": "swiglu_bias_reference", "params": {"block_m": [256], "block_n": [256]}},
    "glu_sigmoid_bf16": {"args": _normal((512, 512), (512, 512), (512, 512), dtype=jnp.bfloat16, scale=0.25),
                         "reference": "glu_sigmoid_reference", "params": {"block_m": [256], "block_n": [256]}},
}
