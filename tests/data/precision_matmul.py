"""A Pallas matmul of f32 operands at a chosen precision: at HIGHEST, Mosaic takes 6 bf16 MXU passes."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(a_ref, b_ref, o_ref, *, precision):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], precision=precision, preferred_element_type=jnp.float32)


def f32_matmul(a, b, precision: str = "default", block: int = 512):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        functools.partial(_kernel, precision=jax.lax.Precision[precision.upper()]),
        grid=(m // block, n // block, k // block),
        in_specs=[pl.BlockSpec((block, block), lambda i, j, l: (i, l)), pl.BlockSpec((block, block), lambda i, j, l: (l, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j, l: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32))(a, b)


INSPECT = {"f32_matmul": {"args": "f32[1024,1024] f32[1024,1024]", "params": {"precision": ["default", "highest"]}}}
