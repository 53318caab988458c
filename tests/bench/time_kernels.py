"""Kernels with published TPU timings that bench_time.py estimates (beside samples/matmul.py).

``dsd``: a block-sparse (COO blocks) times dense matmul with scalar-prefetched block indices, the
problem of JAX's Pallas TPU sparse guide (16384^3 bf16, 512-cubed blocks, 10% of the LHS blocks
present), written here for the inspector. Its grid walks each output column of blocks, then the
present LHS blocks in row order; an output block is zeroed when its row starts and written when it
ends, so every output block is visited on consecutive steps only.
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _dsd_kernel(rows_ref, cols_ref, lhs_ref, rhs_ref, _zeros_ref, out_ref, acc_ref, *, present: int):
    step = pl.program_id(1)
    row = rows_ref[step]
    first = (step == 0) | (row != rows_ref[jnp.maximum(step - 1, 0)])
    last = (step == present - 1) | (row != rows_ref[jnp.minimum(step + 1, present - 1)])

    @pl.when(first)
    def _zero():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.dot(lhs_ref[0], rhs_ref[...], preferred_element_type=jnp.float32)

    @pl.when(last)
    def _write():
        out_ref[...] = acc_ref[...].astype(out_ref.dtype)


def dsd(rows, cols, lhs_blocks, rhs, zeros, block: int = 512):
    """out = sparse(lhs) @ rhs: ``lhs_blocks[b]`` sits at block (rows[b], cols[b]), rows sorted."""
    present = lhs_blocks.shape[0]
    n = rhs.shape[1]
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(n // block, present),
        in_specs=[pl.BlockSpec((1, block, block), lambda j, b, r, c: (b, 0, 0)),
                  pl.BlockSpec((block, block), lambda j, b, r, c: (c[b], j)),
                  pl.BlockSpec((block, block), lambda j, b, r, c: (r[b], j))],
        out_specs=pl.BlockSpec((block, block), lambda j, b, r, c: (r[b], j)),
        scratch_shapes=[pltpu.VMEM((block, block), jnp.float32)],
    )
    return pl.pallas_call(functools.partial(_dsd_kernel, present=present), grid_spec=spec,
                          out_shape=jax.ShapeDtypeStruct(zeros.shape, zeros.dtype), input_output_aliases={4: 0},
                          name="dsd")(rows, cols, lhs_blocks, rhs, zeros)


def sparse_guide_blocks(size: int = 16384, block: int = 512, p: float = 0.1) -> int:
    """How many LHS blocks the guide's example has: its mask is bernoulli(p) under
    jax.random.split(jax.random.key(0))[0] (the same bits on every platform)."""
    mask_key, _ = jax.random.split(jax.random.key(0))
    return int(jnp.sum(jax.random.bernoulli(mask_key, p=p, shape=(size // block, size // block))))


def dense(x, y):
    return jnp.matmul(x, y)


def _variant_kernel(x_ref, y_ref, out_ref, acc_ref, *, transposed: bool, relu: bool):
    last = pl.num_programs(2) - 1

    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    contract = ((1,), (1,)) if transposed else ((1,), (0,))
    acc_ref[...] += jax.lax.dot_general(x_ref[...], y_ref[...], (contract, ((), ())),
                                        preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == last)
    def _write():
        result = acc_ref[...]
        out_ref[...] = (jnp.maximum(result, 0.0) if relu else result).astype(out_ref.dtype)


def matmul_variant(x, y, bm: int = 128, bk: int = 128, bn: int = 128, transposed: bool = False, relu: bool = False):
    """The blocked matmul of the Pallas matmul guide's variants: ``transposed``: y arrives (n, k)
    and the MXU contracts both operands' minor dims; ``relu``: applied as the output is written."""
    m, k = x.shape
    n = y.shape[0] if transposed else y.shape[1]
    y_spec = (pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk)) if transposed
              else pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)))
    return pl.pallas_call(
        functools.partial(_variant_kernel, transposed=transposed, relu=relu),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), y_spec],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="matmul_variant",
    )(x, y)
