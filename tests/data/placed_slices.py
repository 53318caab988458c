"""Copy kernels whose blocks slice their operand in different ways, written by the team to test one
claim about TPU7x (issue 28) before they were compiled: XLA places each input whole in VMEM, and
the kernel reads a block of a placed input in place, taking no scoped VMEM for it, only where the
block is one contiguous piece of the operand (every dimension after the last one it slices whole,
every one before it of size 1); a block that slices the lanes, or tiles two dimensions, is still
copied into double buffers (SwiGLU's (256, 1024) weight blocks of a (256, 2048) weight, in
tests/data/gated_units.py). Each kernel doubles its input into an output of the same blocks.

- rows: (512, 1024) blocks of f32[4096, 1024] (contiguous);
- columns: (4096, 256) blocks of f32[4096, 1024] (lanes sliced);
- tiles: (1024, 256) blocks of f32[4096, 1024] (both sliced);
- heads: (1, 1024, 128) blocks of f32[8, 4096, 128] (leading 1, then rows: contiguous);
- head_columns: (1, 4096, 128) blocks of f32[2, 4096, 512] (lanes sliced);
- computed_rows, computed_columns: rows and columns of an input computed just before the kernel,
  which v5e and v6e place too (tests/data/xla_placed.py);
- rows_read_after, columns_read_after: the same blocks of an output an op reads after the kernel.
"""
import jax
from jax.experimental import pallas as pl


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _copy(x, block, index):
    grid = tuple(a // b for a, b in zip(x.shape, block))
    return pl.pallas_call(_double, grid=grid, in_specs=[pl.BlockSpec(block, index)],
                          out_specs=pl.BlockSpec(block, index),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def rows(x):
    return _copy(x, (512, 1024), lambda i, j: (i, j))


def columns(x):
    return _copy(x, (4096, 256), lambda i, j: (i, j))


def tiles(x):
    return _copy(x, (1024, 256), lambda i, j: (i, j))


def heads(x):
    return _copy(x, (1, 1024, 128), lambda b, i, j: (b, i, j))


def head_columns(x):
    return _copy(x, (1, 4096, 128), lambda b, i, j: (b, i, j))


def computed_rows(x):
    return rows(x + 1)


def computed_columns(x):
    return columns(x + 1)


def rows_read_after(x):
    """The output an op reads after the kernel: XLA places it too (xla_placed_7x.py's read_after)."""
    return rows(x) + 1


def columns_read_after(x):
    return columns(x) + 1
