"""Gated linear units, written by the team to test one claim of the VMEM estimate before they were
compiled (issue 28): where two matmul results meet in an element-wise op (SwiGLU's
silu(x @ w1) * (x @ w3)), neither is built in the output block, and libtpu keeps at least 0.9 of one
of them beyond the blocks (pallas-forge's SwiGLU and GeGLU, held out round eleven: 0.92-2.03).
tests/test_vmem_gated_units.py holds libtpu's verdicts (tests/data/vmem_truth_gated.json) against the
estimate.

- swiglu_f32: f32 x, weights and output, the whole contraction in one block (pallas-forge's form);
- swiglu_bf16: bf16 in and out, f32 results;
- geglu_bf16: gelu for silu;
- swiglu_down: the product feeds a third matmul (the MLP's down projection) instead of a store;
- swiglu_acc: the contraction over a grid axis, each result summed into an f32 scratch, the product
  at the last step (the control: the results stream into their refs).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _glu_kernel(x_ref, w1_ref, w3_ref, o_ref, *, act):
    x = x_ref[...]
    gate = act(jnp.dot(x, w1_ref[...], preferred_element_type=jnp.float32))
    up = jnp.dot(x, w3_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = (gate * up).astype(o_ref.dtype)


def _glu(x, w1, w3, block_m, block_n, act):
    m, k = x.shape
    n = w1.shape[1]
    return pl.pallas_call(
        functools.partial(_glu_kernel, act=act), grid=(m // block_m, n // block_n),
        in_specs=[pl.BlockSpec((block_m, k), lambda i, j: (i, 0)), pl.BlockSpec((k, block_n), lambda i, j: (0, j)),
                  pl.BlockSpec((k, block_n), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x, w1, w3)


def swiglu_f32(x, w1, w3, block_m=256, block_n=256):
    return _glu(x, w1, w3, block_m, block_n, jax.nn.silu)


def swiglu_bf16(x, w1, w3, block_m=256, block_n=256):
    return _glu(x, w1, w3, block_m, block_n, jax.nn.silu)


def geglu_bf16(x, w1, w3, block_m=256, block_n=256):
    return _glu(x, w1, w3, block_m, block_n, jax.nn.gelu)


def _down_kernel(x_ref, w1_ref, w3_ref, w2_ref, o_ref):
    x = x_ref[...]
    gate = jax.nn.silu(jnp.dot(x, w1_ref[...], preferred_element_type=jnp.float32))
    up = jnp.dot(x, w3_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = jnp.dot((gate * up).astype(w2_ref.dtype), w2_ref[...],
                         preferred_element_type=jnp.float32).astype(o_ref.dtype)


def swiglu_down(x, w1, w3, w2, block_m=256, block_n=256):
    """One hidden block per call: the hidden width is block_n (the whole of w1's columns)."""
    m, k = x.shape
    return pl.pallas_call(
        _down_kernel, grid=(m // block_m,),
        in_specs=[pl.BlockSpec((block_m, k), lambda i: (i, 0)), pl.BlockSpec((k, block_n), lambda i: (0, 0)),
                  pl.BlockSpec((k, block_n), lambda i: (0, 0)), pl.BlockSpec((block_n, k), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_m, k), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, k), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, w1[:, :block_n], w3[:, :block_n], w2[:block_n])


def _acc_kernel(x_ref, w1_ref, w3_ref, o_ref, g_acc, u_acc):
    @pl.when(pl.program_id(2) == 0)
    def _():
        g_acc[...] = jnp.zeros_like(g_acc)
        u_acc[...] = jnp.zeros_like(u_acc)

    g_acc[...] += jnp.dot(x_ref[...], w1_ref[...], preferred_element_type=jnp.float32)
    u_acc[...] += jnp.dot(x_ref[...], w3_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = (jax.nn.silu(g_acc[...]) * u_acc[...]).astype(o_ref.dtype)


def swiglu_acc(x, w1, w3, block_m=256, block_n=256, block_k=128):
    m, k = x.shape
    n = w1.shape[1]
    return pl.pallas_call(
        _acc_kernel, grid=(m // block_m, n // block_n, k // block_k),
        in_specs=[pl.BlockSpec((block_m, block_k), lambda i, j, l: (i, l)),
                  pl.BlockSpec((block_k, block_n), lambda i, j, l: (l, j)),
                  pl.BlockSpec((block_k, block_n), lambda i, j, l: (l, j))],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j, l: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((block_m, block_n), jnp.float32), pltpu.VMEM((block_m, block_n), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, w1, w3)


def _glu_reference(x, w1, w3, act):
    hi = jax.lax.Precision.HIGHEST
    f32 = jnp.float32
    gate = act(jnp.dot(x.astype(f32), w1.astype(f32), precision=hi))
    return (gate * jnp.dot(x.astype(f32), w3.astype(f32), precision=hi)).astype(x.dtype)


def swiglu_reference(x, w1, w3, **_):
    return _glu_reference(x, w1, w3, jax.nn.silu)


def geglu_reference(x, w1, w3, **_):
    return _glu_reference(x, w1, w3, jax.nn.gelu)


def swiglu_down_reference(x, w1, w3, w2, block_n=256, **_):
    h = _glu_reference(x, w1[:, :block_n], w3[:, :block_n], jax.nn.silu).astype(jnp.float32)
    return jnp.dot(h, w2[:block_n].astype(jnp.float32), precision=jax.lax.Precision.HIGHEST).astype(x.dtype)


def _weights(dtype, m=512, k=256, n=512, down=False):
    def make():
        keys = jax.random.split(jax.random.key(9), 4)
        x = jax.random.normal(keys[0], (m, k), jnp.float32)
        w = [jax.random.normal(key, (k, n), jnp.float32) / 16 for key in keys[1:3]]
        out = [x, *w] + ([jax.random.normal(keys[3], (n, k), jnp.float32) / 16] if down else [])
        return tuple(a.astype(dtype) for a in out)
    return make


INSPECT = {
    "swiglu_f32": {"args": _weights(jnp.float32), "reference": "swiglu_reference",
                   "params": {"block_m": [256], "block_n": [256]}},
    "swiglu_bf16": {"args": _weights(jnp.bfloat16), "reference": "swiglu_reference",
                    "params": {"block_m": [256], "block_n": [256]}},
    "geglu_bf16": {"args": _weights(jnp.bfloat16), "reference": "geglu_reference",
                   "params": {"block_m": [256], "block_n": [256]}},
    "swiglu_down": {"args": _weights(jnp.float32, down=True), "reference": "swiglu_down_reference",
                    "params": {"block_m": [256], "block_n": [256]}},
    "swiglu_acc": {"args": _weights(jnp.float32), "reference": "swiglu_reference",
                   "params": {"block_m": [256], "block_n": [256]}},
}
