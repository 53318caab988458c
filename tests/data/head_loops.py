"""Attention over several heads in one block, the heads in straight-line code (a Python loop or an
unrolled fori_loop): what libtpu keeps of the heads' scores, against the estimate (issue 28).

Written by the team to test one claim before any compile: where the body sums a head's
exponentials on the MXU (or not at all), libtpu computes the heads one after another and keeps
about one head's scores beyond the blocks; where it sums them on the VPU it keeps a share of all
the heads' (vmem.py, UNROLLED_SUMMED_SHARE). maxdiffusion's cross attention (held out, round
three) was the only kernel on record of the first kind. tests/test_vmem_head_loops.py holds libtpu's
verdicts (tests/data/vmem_truth_heads.json) against the estimate.

q is (S, heads x 128), k and v (KV, heads x 128), all heads in one block: the grid runs over
query blocks, and k and v stay resident (their index maps are constant).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

D = 128


def _scores(q_ref, k_ref, h):
    q = q_ref[:, pl.ds(h * D, D)]
    k = k_ref[:, pl.ds(h * D, D)]
    return jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def _exp(s):
    return jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))


def _ones_matmul_kernel(q_ref, k_ref, v_ref, o_ref, *, heads):
    """The row sum as a second matmul of the exponentials against a block of ones."""
    ones = jnp.ones((k_ref.shape[0], D), q_ref.dtype)
    for h in range(heads):
        p = _exp(_scores(q_ref, k_ref, h)).astype(v_ref.dtype)
        num = jnp.dot(p, v_ref[:, pl.ds(h * D, D)], preferred_element_type=jnp.float32)
        den = jnp.dot(p, ones, preferred_element_type=jnp.float32)
        o_ref[:, pl.ds(h * D, D)] = (num / den).astype(o_ref.dtype)


def _unrolled_fori_kernel(q_ref, k_ref, v_ref, o_ref, *, heads):
    """The same in an unrolled fori_loop, each head's result scaled by its MXU row sum's inverse."""
    ones = jnp.ones((k_ref.shape[0], D), q_ref.dtype)

    def head(h, carry):
        p = _exp(_scores(q_ref, k_ref, h)).astype(v_ref.dtype)
        num = jnp.dot(p, v_ref[:, pl.ds(h * D, D)], preferred_element_type=jnp.float32)
        den = jnp.dot(p, ones, preferred_element_type=jnp.float32)
        o_ref[:, pl.ds(h * D, D)] = (num * pl.reciprocal(den, approx=True)).astype(o_ref.dtype)
        return carry

    jax.lax.fori_loop(0, heads, head, 0, unroll=True)


def _unnormalised_kernel(q_ref, k_ref, v_ref, o_ref, *, heads):
    """exp(s - max) @ v with no row sum at all (the caller normalises)."""
    for h in range(heads):
        p = _exp(_scores(q_ref, k_ref, h)).astype(v_ref.dtype)
        o_ref[:, pl.ds(h * D, D)] = jnp.dot(p, v_ref[:, pl.ds(h * D, D)],
                                            preferred_element_type=jnp.float32).astype(o_ref.dtype)


def _vpu_sum_kernel(q_ref, k_ref, v_ref, o_ref, *, heads):
    """The control: the row sum on the VPU, as most attention kernels write it."""
    for h in range(heads):
        p = _exp(_scores(q_ref, k_ref, h))
        den = jnp.sum(p, axis=-1, keepdims=True)
        num = jnp.dot(p.astype(v_ref.dtype), v_ref[:, pl.ds(h * D, D)], preferred_element_type=jnp.float32)
        o_ref[:, pl.ds(h * D, D)] = (num / den).astype(o_ref.dtype)


def _call(kernel, q, k, v, block_q):
    heads = q.shape[1] // D
    width = heads * D
    return pl.pallas_call(
        functools.partial(kernel, heads=heads),
        grid=(q.shape[0] // block_q,),
        in_specs=[pl.BlockSpec((block_q, width), lambda i: (i, 0)),
                  pl.BlockSpec((k.shape[0], width), lambda i: (0, 0)),
                  pl.BlockSpec((v.shape[0], width), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_q, width), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(q, k, v)


def ones_matmul(q, k, v, block_q=256):
    return _call(_ones_matmul_kernel, q, k, v, block_q)


def unrolled_fori(q, k, v, block_q=256):
    return _call(_unrolled_fori_kernel, q, k, v, block_q)


def unnormalised(q, k, v, block_q=256):
    return _call(_unnormalised_kernel, q, k, v, block_q)


def vpu_sum(q, k, v, block_q=256):
    return _call(_vpu_sum_kernel, q, k, v, block_q)


def _heads(x):
    return x.reshape(x.shape[0], -1, D).transpose(1, 0, 2).astype(jnp.float32)


def reference(q, k, v, **_):
    s = jnp.einsum("hqd,hkd->hqk", _heads(q), _heads(k), precision=jax.lax.Precision.HIGHEST)
    o = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), _heads(v), precision=jax.lax.Precision.HIGHEST)
    return o.transpose(1, 0, 2).reshape(q.shape).astype(q.dtype)


def unnormalised_reference(q, k, v, **_):
    s = jnp.einsum("hqd,hkd->hqk", _heads(q), _heads(k), precision=jax.lax.Precision.HIGHEST)
    p = jnp.exp(s - s.max(-1, keepdims=True))
    o = jnp.einsum("hqk,hkd->hqd", p, _heads(v), precision=jax.lax.Precision.HIGHEST)
    return o.transpose(1, 0, 2).reshape(q.shape).astype(q.dtype)


def _inputs():
    k1, k2, k3 = jax.random.split(jax.random.key(3), 3)
    q = (jax.random.normal(k1, (512, 4 * D), jnp.float32) * 0.1).astype(jnp.bfloat16)
    k = jax.random.normal(k2, (256, 4 * D), jnp.float32).astype(jnp.bfloat16)
    v = jax.random.normal(k3, (256, 4 * D), jnp.float32).astype(jnp.bfloat16)
    return q, k, v


_TOL = {"args": _inputs, "atol": 3e-2, "rtol": 3e-2, "params": {"block_q": [256, 128]}}
INSPECT = {
    "ones_matmul": dict(_TOL, reference="reference"),
    "unrolled_fori": dict(_TOL, reference="reference"),
    "unnormalised": dict(_TOL, reference="unnormalised_reference"),
    "vpu_sum": dict(_TOL, reference="reference"),
}
