"""One small Pallas TPU kernel per kind of Mosaic error, each with the usual fix behind a flag.

Each fails to compile on the chip named in FAILS_ON (jax 0.10.2, libtpu 0.0.42.1), and compiles
with ``--set fixed=True``. The inspector explains each at the failing line, with the rule and
the fix (inspector/mosaic/error_kinds.py has the table):

    inspector check samples/mosaic_errors.py:unaligned_rows --target tpu-v5e
    inspector check samples/mosaic_errors.py:unaligned_rows --target tpu-v5e --set fixed=True
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# The chip each kernel fails on (the error kind in the comment)
FAILS_ON = {
    "unaligned_rows": "tpu-v5e",  # unproven-alignment (E2003)
    "sort_rows": "tpu-v5e",  # unimplemented-primitive (sort)
    "cumsum_rows": "tpu-v5e",  # unimplemented-primitive (cumsum)
    "mask_column": "tpu-v5e",  # shape-cast
    "int8_rows": "tpu-v5e",  # layout (E2002)
    "fp8_matmul": "tpu-v4",  # dtype (E2001): v5e, v6e and tpu7x compile it
    "past_the_end": "tpu-v5e",  # block-index (libtpu would abort)
    "too_big_blocks": "tpu-v5e",  # vmem-oom (E1001)
}


# --------------------------------------------------------------------- unproven alignment (E2003)

def _window_kernel(start_ref, x_ref, o_ref, *, fixed):
    start = start_ref[0]
    if fixed:  # the caller promises 8-row aligned starts: say so
        start = pl.multiple_of(start, 8)
    o_ref[...] = x_ref[pl.ds(start, 16), :]


def unaligned_rows(starts, x, fixed: bool = False):
    """16 bf16 rows of x from a start read at run time (scalar prefetch): Mosaic cannot prove the
    start is a multiple of 8."""
    return pl.pallas_call(
        functools.partial(_window_kernel, fixed=fixed),
        out_shape=jax.ShapeDtypeStruct((16, x.shape[1]), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,),
            in_specs=[pl.BlockSpec(x.shape, lambda i, s: (0, 0))],
            out_specs=pl.BlockSpec((16, x.shape[1]), lambda i, s: (0, 0))),
    )(starts, x)


def reference_window(starts, x, fixed: bool = False):
    return jax.lax.dynamic_slice_in_dim(x, starts[0], 16, axis=0)


# --------------------------------------------------------------------- unimplemented primitives

def _sort_kernel(x_ref, o_ref, *, fixed):
    x = x_ref[...]
    if not fixed:
        x = jnp.sort(x, axis=-1)  # no Pallas TPU lowering for sort
    o_ref[...] = x * 2


def sort_rows(x, fixed: bool = False):
    """Sort each row and double it; fixed: sort before the kernel, which only doubles."""
    if fixed:
        x = jnp.sort(x, axis=-1)
    return pl.pallas_call(functools.partial(_sort_kernel, fixed=fixed),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def reference_sort(x, fixed: bool = False):
    return jnp.sort(x, axis=-1) * 2


def _cumsum_kernel(x_ref, o_ref, *, fixed):
    x = x_ref[...]
    if fixed:  # a matmul with an upper-triangular matrix of ones, on the MXU
        n = x.shape[-1]
        row = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        col = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        o_ref[...] = jnp.dot(x, (row <= col).astype(x.dtype), precision=jax.lax.Precision.HIGHEST,
                             preferred_element_type=jnp.float32).astype(o_ref.dtype)
    else:
        o_ref[...] = jnp.cumsum(x, axis=-1)  # no Pallas TPU lowering for cumsum


def cumsum_rows(x, fixed: bool = False):
    """Running sum along each row."""
    return pl.pallas_call(functools.partial(_cumsum_kernel, fixed=fixed),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def reference_cumsum(x, fixed: bool = False):
    return jnp.cumsum(x, axis=-1)


# --------------------------------------------------------------------- unsupported shape cast

def _mask_kernel(x_ref, o_ref, *, fixed, keep):
    rows, cols = x_ref.shape
    if fixed:  # the mask built 2-D from the start
        mask = jax.lax.broadcasted_iota(jnp.int32, (rows, cols), 0) < keep
    else:  # (rows,) -> (rows, 1): a new last dimension, a shape cast Mosaic refuses
        mask = (jnp.arange(rows) < keep)[:, None]
    o_ref[...] = jnp.where(mask, x_ref[...], 0)


def mask_column(x, fixed: bool = False, keep: int = 20):
    """Zero the rows from ``keep`` on (the style of jax-ml/jax#37370)."""
    return pl.pallas_call(functools.partial(_mask_kernel, fixed=fixed, keep=keep),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def reference_mask(x, fixed: bool = False, keep: int = 20):
    return jnp.where(jnp.arange(x.shape[0])[:, None] < keep, x, 0)


# --------------------------------------------------------------------- layout and tiling refusals

def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def int8_rows(x, fixed: bool = False):
    """int8 in (8, 128) blocks: int8 is tiled 32 rows at a time, so the block refuses its tiling;
    fixed: 32-row blocks. (A copy: v5e has no int8 vector arithmetic, another refusal.)"""
    rows = 32 if fixed else 8
    return pl.pallas_call(
        _copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
        in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
    )(x)


def reference_copy(x, fixed: bool = False):
    return x


def reference_double(x, fixed: bool = False):
    return x * 2


# --------------------------------------------------------------------- unsupported dtype on a chip

def _fp8_kernel(a_ref, b_ref, o_ref, *, fixed):
    a, b = a_ref[...], b_ref[...]
    if fixed:  # the MXU of a TPU v4 takes bf16: widen after the (narrow) load
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    o_ref[...] = jnp.dot(a, b, preferred_element_type=jnp.float32)


def fp8_matmul(a, b, fixed: bool = False):
    """An fp8 matmul: TPU v4 has no fp8 matmul (v5e on compile it)."""
    return pl.pallas_call(functools.partial(_fp8_kernel, fixed=fixed),
                          out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32))(a, b)


def reference_fp8(a, b, fixed: bool = False):
    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))


# --------------------------------------------------------------------- block index out of range

def past_the_end(x, fixed: bool = False, block_rows: int = 8):
    """Copy the last row block: the index map returns the number of blocks (2), one past the last
    (1). libtpu aborts compiling a constant index out of range."""
    blocks = x.shape[0] // block_rows
    last = blocks - 1 if fixed else blocks
    return pl.pallas_call(
        _double_kernel, out_shape=jax.ShapeDtypeStruct((block_rows, x.shape[1]), x.dtype), grid=(1,),
        in_specs=[pl.BlockSpec((block_rows, x.shape[1]), lambda i: (last, 0))],
        out_specs=pl.BlockSpec((block_rows, x.shape[1]), lambda i: (0, 0)),
    )(x)


def reference_last_block(x, fixed: bool = False, block_rows: int = 8):
    return x[-block_rows:] * 2


# --------------------------------------------------------------------- VMEM out of memory

def too_big_blocks(x, fixed: bool = False):
    """(2048, 1024) f32 blocks, in and out, double-buffered: 32 MiB of v5e's 16 MiB scoped VMEM;
    fixed: (512, 1024) blocks (8 MiB)."""
    rows = 512 if fixed else 2048
    return pl.pallas_call(
        _double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
        in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
    )(x)


_FIX = {"fixed": [False, True]}
INSPECT = {
    "unaligned_rows": {"args": "i32[1] bf16[64,128]", "reference": "reference_window", "params": _FIX,
                       "int_ranges": {"starts": [0, 1]}},
    "sort_rows": {"args": "f32[8,128]", "reference": "reference_sort", "params": _FIX},
    "cumsum_rows": {"args": "f32[8,128]", "reference": "reference_cumsum", "params": _FIX},
    "mask_column": {"args": "f32[32,128]", "reference": "reference_mask", "params": _FIX},
    "int8_rows": {"args": "s8[64,128]", "reference": "reference_copy", "params": _FIX},
    "fp8_matmul": {"args": "f8e5m2[128,128] f8e5m2[128,128]", "reference": "reference_fp8", "params": _FIX},
    "past_the_end": {"args": "f32[16,128]", "reference": "reference_last_block", "params": _FIX},
    "too_big_blocks": {"args": "f32[4096,1024]", "reference": "reference_double", "params": _FIX},
}
