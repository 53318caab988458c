"""Classic BlockSpec mistakes, one labelled kernel each, with the reference it should match.

None of them raises: on a TPU each one compiles and silently computes garbage (or fails only
there). Try `inspector check samples/bugs.py:dropped_tail --target tpu-v5e`.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def reference_double(x):
    return x * 2


def dropped_tail(x, block_rows: int = 128):
    """BUG: grid = m // block_rows floors away the last rows (use pl.cdiv): rows 896:1000 stay unwritten."""
    m, n = x.shape
    return pl.pallas_call(
        _copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(m // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def element_offset(x, block_rows: int = 128):
    """BUG: the index map returns an element offset (i * block_rows) instead of the block index i."""
    m, n = x.shape
    return pl.pallas_call(
        _copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(m // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i * block_rows, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def _sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def reference_row_block_sum(x, block_cols: int = 128):
    """x (m, k*block_cols) -> (m, block_cols): the sum of its column blocks."""
    m, n = x.shape
    return x.reshape(m, n // block_cols, block_cols).sum(axis=1)


def revisit_not_consecutive(x, block_rows: int = 128, block_cols: int = 128):
    """BUG: the reduction axis (over column blocks) is the outer grid axis, so each output block
    is revisited once per outer step, with other blocks in between: on TPU only the last visit's
    partial sum survives. The reduction axis must be the last (innermost) one."""
    m, n = x.shape
    return pl.pallas_call(
        _sum_kernel, out_shape=jax.ShapeDtypeStruct((m, block_cols), x.dtype),
        grid=(n // block_cols, m // block_rows),  # (k, i): reduction outermost
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda k, i: (i, k))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda k, i: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(x)


def parallel_reduction(x, block_rows: int = 128, block_cols: int = 128):
    """BUG: the reduction axis is innermost (right) but marked "parallel": split across two
    TensorCores (v4, v5p, TPU7x), both cores accumulate into the same output block."""
    m, n = x.shape
    return pl.pallas_call(
        lambda x_ref, o_ref: _sum_kernel_inner(x_ref, o_ref),
        out_shape=jax.ShapeDtypeStruct((m, block_cols), x.dtype),
        grid=(m // block_rows, n // block_cols),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda i, k: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x)


def _sum_kernel_inner(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def bad_tiling(x, block_rows: int = 100):
    """BUG: a (100, 128) f32 block: the second-to-last block dim must be a multiple of 8 on TPU."""
    m, n = x.shape
    return pl.pallas_call(
        _copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(pl.cdiv(m, block_rows),),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def _move_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def reference_identity(x):
    return x


def int8_short_tiles(x, block_rows: int = 8):
    """BUG: (8, 128) blocks of int8: Mosaic tiles 8-bit arrays (32, 128) (4 rows packed per
    sublane), so libtpu refuses blocks of 8, 16 or 24 rows on every TPU (E2002); 32 rows fit.
    (bf16 blocks of 8 rows, half a packed tile, do compile on v5e, v6e and TPU7x alike.)"""
    m, n = x.shape
    return pl.pallas_call(
        _move_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(m // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def too_big_for_vmem(x, block_rows: int = 4096):
    """BUG (on v4/v5e/v5p): 16 MiB f32 blocks, in and out, double-buffered: 64 MiB of VMEM."""
    m, n = x.shape
    return pl.pallas_call(
        _copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(m // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(x)


def _matmul_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def reference_matmul(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def head_dim_192(a, b, block_rows: int = 256):
    """SMELL: a contraction of 192 on a 256-wide MXU (v6e, TPU7x): a quarter of the MXU work is zeros."""
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        _matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), grid=(m // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, k), lambda i: (i, 0)), pl.BlockSpec((k, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_rows, n), lambda i: (i, 0)),
    )(a, b)


INSPECT = {
    "dropped_tail": {"args": "f32[1000,128]", "reference": "reference_double"},
    "element_offset": {"args": "f32[1024,128]", "reference": "reference_double"},
    "revisit_not_consecutive": {"args": "f32[512,512]", "reference": "reference_row_block_sum"},
    "parallel_reduction": {"args": "f32[512,512]", "reference": "reference_row_block_sum"},
    "bad_tiling": {"args": "f32[1000,128]", "reference": "reference_double"},
    "int8_short_tiles": {"args": "s8[1024,128]", "reference": "reference_identity"},
    "too_big_for_vmem": {"args": "f32[16384,1024]", "reference": "reference_double"},
    "head_dim_192": {"args": "bf16[1024,192] bf16[192,256]", "reference": "reference_matmul"},
}
