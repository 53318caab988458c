"""Pallas kernels that measure one figure of the chip each: what a grid step costs beside its work.

A pipelined Pallas TPU kernel runs its body once per grid step and, around it, waits for the
step's input copies and issues the next step's (double buffering). These kernels do almost no work
in the body, so their device time per step is what the pipeline itself costs:

    idle     no copy after the first (every block index constant): the step's fixed cost
    copy     one input block in, one output block out per step, at sizes from 4 KiB to 4 MiB:
             the fixed cost of a step that copies, and the bandwidth the copies reach
    read     one input block per step, the output resident: copies in one direction
    read4    four input blocks per step: whether the fixed cost is per step or per copy

tests/bench/chip_corpus.py measures them on the chip ("probe." entries); the figures they give are
in inspector/base/chips.py with this file as their source.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, COLS = 4096, 4096  # f32: 64 MiB, beyond any cache, so every step's copy comes from HBM


def _params(n: int):
    return pltpu.CompilerParams(dimension_semantics=("arbitrary",) * n)


def idle(x, steps: int = 16384):
    """``steps`` grid steps on one (8, 128) block fetched once: only the step's own cost is left."""
    def body(x_ref, o_ref):
        o_ref[...] += x_ref[...]

    return pl.pallas_call(
        body, grid=(steps,), out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))], out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        compiler_params=_params(1))(x)


def copy(x, rows: int = 8, cols: int = 128):
    """x block by block into a new array: one (rows, cols) block in and one out per step."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = pl.BlockSpec((rows, cols), lambda i, j: (i, j))
    return pl.pallas_call(body, grid=(x.shape[0] // rows, x.shape[1] // cols), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[spec], out_specs=spec, compiler_params=_params(2))(x)


def _accumulate(*refs):
    *ins, o_ref = refs
    for r in ins:
        o_ref[...] += r[0:8, 0:128]


def read(x, rows: int = 8, cols: int = 128):
    """Every (rows, cols) block read once; the output, one (8, 128) block, stays in VMEM."""
    return pl.pallas_call(
        _accumulate, grid=(x.shape[0] // rows, x.shape[1] // cols), out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
        in_specs=[pl.BlockSpec((rows, cols), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, 0)), compiler_params=_params(2))(x)


def read4(a, b, c, d, rows: int = 8, cols: int = 128):
    """Four inputs read block by block at once: four copies per step."""
    spec = pl.BlockSpec((rows, cols), lambda i, j: (i, j))
    return pl.pallas_call(
        _accumulate, grid=(a.shape[0] // rows, a.shape[1] // cols), out_shape=jax.ShapeDtypeStruct((8, 128), a.dtype),
        in_specs=[spec] * 4, out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, 0)), compiler_params=_params(2))(a, b, c, d)


def _x(rows=ROWS, cols=COLS):
    return (jax.random.normal(jax.random.key(0), (rows, cols), jnp.float32),)


def _four():
    # a quarter of the rows each: the four together are as large as x
    return tuple(jax.random.normal(jax.random.key(i), (ROWS // 4, COLS), jnp.float32) for i in range(4))


BLOCKS = {"rows": [8, 32, 128, 256, 512, 1024], "cols": [128, 512, 1024]}
INSPECT = {
    "idle": {"args": functools.partial(_x, 8, 128), "params": {"steps": [16384, 4096]}},
    "copy": {"args": _x, "params": BLOCKS},
    "read": {"args": _x, "params": BLOCKS},
    "read4": {"args": _four, "params": BLOCKS},
}
