"""Kernels whose largest values are (rows, 1) row statistics, written by the team to test the VMEM
estimate's statistics rules before they were compiled (issue 28): one statistic, in its rows / 8
vregs, is certain where they are the body's largest values (vmem.STATISTICS_CERTAIN), and beside a
matmul result held whole a "fits" leaves room for 0.4 of them (rule row_statistics).
tests/test_vmem_row_statistics.py holds libtpu's verdicts (tests/data/vmem_truth_statistics.json) against
the estimate.

- rms_norm: x * rsqrt(mean(x^2) + eps) * w over 128-wide rows, a grid over row blocks;
- centred: (x - mean) / (max - min) per row, three statistics of one block;
- online_softmax: attention over 128-wide kv chunks in a rolled fori_loop inside the kernel, the row
  max, the row sum and the accumulator carried (Pallas-Unbound's style, written anew).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _rms_norm_kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    o_ref[...] = x * jax.lax.rsqrt(ms + 1e-6) * w_ref[...]


def rms_norm(x, w, block_rows=512):
    rows, dim = x.shape
    return pl.pallas_call(
        _rms_norm_kernel, grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, dim), lambda i: (i, 0)), pl.BlockSpec((1, dim), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_rows, dim), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, w)


def rms_norm_reference(x, w, **_):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def _centred_kernel(x_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    spread = jnp.max(x, axis=-1, keepdims=True) - jnp.min(x, axis=-1, keepdims=True)
    o_ref[...] = (x - mean) / (spread + 1e-6)


def centred(x, block_rows=512):
    rows, dim = x.shape
    return pl.pallas_call(
        _centred_kernel, grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, dim), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, dim), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def centred_reference(x, **_):
    spread = x.max(-1, keepdims=True) - x.min(-1, keepdims=True)
    return (x - x.mean(-1, keepdims=True)) / (spread + 1e-6)


def _online_softmax_kernel(q_ref, k_ref, v_ref, o_ref, *, chunk):
    q = q_ref[...]
    rows = q.shape[0]

    def step(j, carry):
        m, l, acc = carry
        start = pl.multiple_of(j * chunk, chunk)
        s = jnp.dot(q, k_ref[pl.ds(start, chunk), :].T, preferred_element_type=jnp.float32)
        m_new = jnp.maximum(m, s.max(axis=-1, keepdims=True))
        alpha = jnp.exp(m - m_new)
        p = jnp.exp(s - m_new)
        l_new = alpha * l + p.sum(axis=-1, keepdims=True)
        acc_new = alpha * acc + jnp.dot(p.astype(v_ref.dtype), v_ref[pl.ds(start, chunk), :],
                                        preferred_element_type=jnp.float32)
        return m_new, l_new, acc_new

    init = (jnp.full((rows, 1), -1e30, jnp.float32), jnp.zeros((rows, 1), jnp.float32),
            jnp.zeros((rows, q.shape[1]), jnp.float32))
    _, l, acc = jax.lax.fori_loop(0, k_ref.shape[0] // chunk, step, init)
    o_ref[...] = (acc / l).astype(o_ref.dtype)


def online_softmax(q, k, v, block_q=512, chunk=128):
    return pl.pallas_call(
        functools.partial(_online_softmax_kernel, chunk=chunk), grid=(q.shape[0] // block_q,),
        in_specs=[pl.BlockSpec((block_q, q.shape[1]), lambda i: (i, 0)),
                  pl.BlockSpec(k.shape, lambda i: (0, 0)), pl.BlockSpec(v.shape, lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_q, q.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(q, k, v)


def online_softmax_reference(q, k, v, **_):
    s = jnp.dot(q.astype(jnp.float32), k.astype(jnp.float32).T, precision=jax.lax.Precision.HIGHEST)
    return jnp.dot(jax.nn.softmax(s, axis=-1), v.astype(jnp.float32),
                   precision=jax.lax.Precision.HIGHEST).astype(q.dtype)


def _rows():
    return jax.random.normal(jax.random.key(5), (1024, 128), jnp.float32)


def _norm_inputs():
    return _rows(), jax.random.normal(jax.random.key(6), (1, 128), jnp.float32)


def _attention_inputs():
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    return tuple((jax.random.normal(key, (n, 128), jnp.float32) * 0.3).astype(jnp.bfloat16)
                 for key, n in ((k1, 512), (k2, 512), (k3, 512)))


INSPECT = {
    "rms_norm": {"args": _norm_inputs, "reference": "rms_norm_reference", "params": {"block_rows": [256, 512]}},
    "centred": {"args": _rows, "reference": "centred_reference", "params": {"block_rows": [256, 512]}},
    "online_softmax": {"args": _attention_inputs, "reference": "online_softmax_reference", "atol": 2e-2, "rtol": 2e-2,
                       "params": {"block_q": [256, 128], "chunk": [128]}},
}
