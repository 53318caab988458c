"""Small kernels for tests/test_diff.py: each exercises one thing the diff must get right."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 8


def _boom(i):
    if int(i) == 2:
        raise ValueError(f"boom at step {int(i)}")


def _raising_kernel(x_ref, o_ref):
    jax.debug.callback(_boom, pl.program_id(0))
    o_ref[...] = x_ref[...] * 2


def raises_inside(x):
    """A kernel whose body raises (through a host callback) at grid point (2,)."""
    return pl.pallas_call(_raising_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (i, 0)))(x)


def double(x):
    return x * 2


def _same_block_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def benign_race(x):
    """Every step of a "parallel" axis writes the same values to the same output block: two cores
    race on it, but whichever write lands last, the output is right."""
    return pl.pallas_call(_same_block_kernel, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype), grid=(4,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (0, 0)),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)


def first_block_doubled(x):
    return x[:ROWS] * 2


def _accumulate_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def harmful_race(x):
    """A sum over a "parallel" axis: on one core it is right, split over two each core keeps its
    own partial sum and the last one written wins."""
    return pl.pallas_call(_accumulate_kernel, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (0, 0)),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)


def block_sum(x):
    return x.reshape(-1, ROWS, 128).sum(axis=0)


def _inner(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _outer(x_hbm, o_hbm):
    pltpu.emit_pipeline(_inner, grid=(x_hbm.shape[0] // ROWS,),
                        in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                        out_specs=pl.BlockSpec((ROWS, 128), lambda i: (i, 0)))(x_hbm, o_hbm)


def pipelined(x):
    """pltpu.emit_pipeline inside a kernel: it asks get_tpu_info() for the chip while tracing."""
    return pl.pallas_call(_outer, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY))(x)


def as_dict(x):
    return {"a": x * 2, "b": x + 1}


def as_dict_other_keys(x):
    return {"a": x * 2, "c": x + 1}


def as_tuple(x):
    return (x * 2, x + 1)


def as_f32(x):
    return (x * 2).astype(jnp.float32)


def as_bf16(x):
    return (x * 2).astype(jnp.bfloat16)


def wrong_shape(x):
    return x[:, :64] * 2


def empty_rows(x):
    return x[:0] * 2


INSPECT = {
    "raises_inside": {"args": "f32[32,128]", "reference": "double"},
    "benign_race": {"args": "f32[32,128]", "reference": "first_block_doubled"},
    "harmful_race": {"args": "f32[32,128]", "reference": "block_sum"},
    "pipelined": {"args": "f32[32,128]", "reference": "double"},
    "as_dict": {"args": "f32[8,128]", "reference": "as_dict_other_keys"},
    "as_tuple": {"args": "f32[8,128]", "reference": "as_dict"},
    "as_f32": {"args": "f32[8,128]", "reference": "as_bf16"},
    "wrong_shape": {"args": "f32[8,128]", "reference": "double"},
    "empty_rows": {"args": "f32[8,128]", "reference": "empty_rows"},
    "reshaped_dma": {"args": "f32[1024]", "reference": "flat_doubled"},
}


def _reshaped_dma(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm.reshape(ROWS, 128), buf, sem)
    copy.start()
    copy.wait()
    o_ref[...] = buf[...] * 2


def reshaped_dma(x):
    """A DMA through a reshaped HBM ref: libtpu compiles it, the 0.10.2 interpreter cannot run it."""
    return pl.pallas_call(_reshaped_dma, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          scratch_shapes=[pltpu.VMEM((ROWS, 128), x.dtype), pltpu.SemaphoreType.DMA(())])(x)


def flat_doubled(x):
    return x.reshape(ROWS, 128) * 2
