"""Small Pallas kernels for the tests: correct ones (no finding expected) and ones nested in
jit, vmap, scan, cond and custom_vjp (to be found there)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def double(x, block_rows: int = 128):
    m, n = x.shape
    return pl.pallas_call(
        _double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(m, block_rows),),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def _rms_norm(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + 1e-6)


def rms_norm(x, block_rows: int = 128):
    """Row-wise: padding rows read past the edge only reach output rows past it (dropped)."""
    m, n = x.shape
    return pl.pallas_call(_rms_norm, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(m, block_rows),),
                          in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)))(x)


def _centre(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x - jnp.mean(x, axis=0, keepdims=True)


def centre_rows(x, block_rows: int = 128):
    """Mixes rows (a mean over them): padding read past the edge reaches real output rows."""
    m, n = x.shape
    return pl.pallas_call(_centre, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(m, block_rows),),
                          in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)))(x)


def reversed_blocks(x, block_rows: int = 128):
    """Row-wise, but block i lands at block n-1-i: the padded last block's rows reach block 0."""
    m, n = x.shape
    last = pl.cdiv(m, block_rows) - 1
    return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(last + 1,),
                          in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((block_rows, n), lambda i: (last - i, 0)))(x)


def _project(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def row_matmul(x, w, block_rows: int = 128):
    """x @ w by row blocks: a row of x reaches only its row of the output."""
    m, k = x.shape
    return pl.pallas_call(_project, out_shape=jax.ShapeDtypeStruct((m, w.shape[1]), jnp.float32),
                          grid=(pl.cdiv(m, block_rows),),
                          in_specs=[pl.BlockSpec((block_rows, k), lambda i: (i, 0)), pl.BlockSpec(w.shape, lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((block_rows, w.shape[1]), lambda i: (i, 0)))(x, w)


def _gram(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = jnp.dot(x.T, x, preferred_element_type=jnp.float32)[:1].repeat(x.shape[0], axis=0)


def gram_rows(x, block_rows: int = 128):
    """Contracts over the rows of each block: padding rows reach every output row."""
    m, n = x.shape
    return pl.pallas_call(_gram, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), grid=(pl.cdiv(m, block_rows),),
                          in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)))(x)


def _acc(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def row_block_sum(x, block: int = 128):
    """Correct reduction: the reduction axis innermost and "arbitrary"."""
    m, n = x.shape
    return pl.pallas_call(
        _acc, out_shape=jax.ShapeDtypeStruct((m, block), x.dtype), grid=(m // block, n // block),
        in_specs=[pl.BlockSpec((block, block), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((block, block), lambda i, k: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def nested(x):
    """The same kernel inside vmap, scan, cond and custom_vjp: four pallas_calls."""
    y = jax.vmap(double)(x[None])[0]
    y, _ = jax.lax.scan(lambda c, _: (double(c), None), y, None, length=2)
    y = jax.lax.cond(y.sum() > 0, double, lambda a: a, y)

    @jax.custom_vjp
    def f(a):
        return double(a)

    f.defvjp(lambda a: (double(a), None), lambda _, g: (g * 2,))
    return f(y)


INSPECT = {
    "double": {"args": "f32[1024,128]"},
    "row_block_sum": {"args": "f32[512,512]"},
    "nested": {"args": "f32[256,128]"},
}
