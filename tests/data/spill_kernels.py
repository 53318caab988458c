"""Kernels whose register pressure differs: ``chains`` sin() chains of an (rows, 512) f32 block all
live at once. Eight chains of 256 rows need ~1000 vregs (a TensorCore has 64): the compiler
spills. One chain of 8 rows fits in registers."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref, *, chains: int):
    x = x_ref[...]
    ys = [jnp.sin(x * (i + 1)) for i in range(chains)]  # every chain live from here
    ys = [jnp.sin(y + 1.0) for y in ys]
    o_ref[...] = functools.reduce(lambda a, b: a + b, ys)


def chained_sin(x, rows: int = 256, chains: int = 8):
    n, m = x.shape
    return pl.pallas_call(
        functools.partial(_kernel, chains=chains),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n // rows,),
        in_specs=[pl.BlockSpec((rows, m), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, m), lambda i: (i, 0)),
        name="chained_sin",
    )(x)


INSPECT = {
    "chained_sin": {"args": "f32[1024,512]", "params": {"rows": [256, 8], "chains": [8, 1]}},
}
