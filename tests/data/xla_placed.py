"""Kernels whose input XLA may hand over whole in VMEM (`S(1)` in the optimized HLO) before the
kernel starts, outside its scoped limit, or may not: the estimate's unsure term for such inputs
(inspector/jax_internals/operand_origins.py). Each reads x bf16[1024, 8192] (16 MiB) in two
(512, 8192) blocks and writes the same blocks: 32 MiB double-buffered, over v5e's 16 MiB, and
16 MiB when x is not buffered. libtpu 0.0.42.1 on v5e, per kernel below."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _double(x_ref, z_hbm_ref, o_ref):
    del z_hbm_ref  # only there to be computed before the kernel
    o_ref[...] = x_ref[...] * 2


def _kernel(x, z, block):
    rows, dim = x.shape
    return pl.pallas_call(
        _double, grid=(rows // block,),
        in_specs=[pl.BlockSpec((block, dim), lambda i: (i, 0)), pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec((block, dim), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, z)


def argument(x, z, *, block=512):
    """x and z passed straight from the caller: libtpu buffers x (refused, 32 MiB)."""
    return _kernel(x, z, block)


def computed(x, z, *, block=512):
    """x made by a fusion just before the kernel: XLA writes it into VMEM (fits)."""
    return _kernel(x + 1, z, block)


def copied_meanwhile(x, z, *, block=512):
    """x an argument, z computed first: XLA copies x into VMEM while z's fusion runs (fits with
    z f32[1024, 2048], 8 MiB written; refused with f32[768, 2048], 6 MiB: too little work to hide
    the 16 MiB copy behind)."""
    return _kernel(x, z * 3, block)


def through_views(x, z, *, block=512):
    """x padded by nothing, the output reduced over a new axis of size 1 and transposed over it:
    what XLA makes bitcasts, so as ``argument`` (refused, 32 MiB)."""
    out = _kernel(jnp.pad(x, ((0, 0), (0, 0))), z, block)
    return jnp.transpose(jnp.max(out[None], axis=0)[None], (1, 0, 2))


def read_after(x, z, *, block=512):
    """x an argument, the kernel's output doubled after it: XLA can write the output into VMEM
    for the fusion that reads it next."""
    return _kernel(x, z, block) * 2


def _plus_one(q_ref, o_ref):
    o_ref[...] = q_ref[...] + 1


def narrow(q):
    """q + 1 over (1, S, 64) f32 blocks of an argument (head_dim 64): its default TPU layout keeps S
    minor ({1,2,0}), so XLA copies it into the kernel's row-major layout, into VMEM, and the
    output back out of it: libtpu fits (2, 16384, 64), 32 MiB of blocks by the kernel's own
    layout, with 0 B of scoped VMEM on v5e."""
    spec = pl.BlockSpec((1, q.shape[1], q.shape[2]), lambda h: (h, 0, 0))
    return pl.pallas_call(_plus_one, grid=(q.shape[0],), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype))(q)


INSPECT = {
    "argument": {"args": "bf16[1024,8192] f32[1024,2048]"},
    "computed": {"args": "bf16[1024,8192] f32[1024,2048]"},
    "copied_meanwhile": {"args": "bf16[1024,8192] f32[1024,2048]"},
    "through_views": {"args": "bf16[1024,8192] f32[1024,2048]"},
    "read_after": {"args": "bf16[1024,8192] f32[1024,2048]"},
    "narrow": {"args": "f32[2,16384,64]"},
}

