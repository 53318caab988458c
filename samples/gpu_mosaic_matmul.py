"""A Hopper matmul written with Mosaic GPU (Pallas's second GPU backend, ``plgpu``), compiled by
XLA:GPU without a GPU. Each program owns a (bm, bn) tile of the output and walks K in 64-wide steps
(128 bytes of bf16: one swizzled row); the pallas_call's own pipeline copies the x and y tiles of up
to ``max_concurrent_steps`` steps into shared memory at once (TMA), while one warpgroup's wgmma
accumulates.

    inspector show samples/gpu_mosaic_matmul.py:matmul --target h100 --view pallas
    inspector check samples/gpu_mosaic_matmul.py:matmul --target h100,h200
    inspector check samples/gpu_mosaic_matmul.py:matmul --target h100 --set max_concurrent_steps=4   # exit 1

Each step in flight keeps its own x, y and output tiles: bm=bn=128 in 2 steps is 2 x (16 + 16 + 32)
KiB, 128 KiB of Hopper's 227 KiB a block; in 4 steps it is 256 KiB, and Mosaic GPU refuses it.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

BK = 64  # 128 bytes of bf16: the K step the 128-byte swizzle wants


def matmul(x, y, bm: int = 128, bn: int = 128, max_concurrent_steps: int = 2):
    """x @ y (bf16) in (bm, bn) output tiles, K in BK steps, ``max_concurrent_steps`` of them in flight."""
    m, k = x.shape
    n = y.shape[1]
    transforms = (plgpu.TilingTransform((8, BK)), plgpu.SwizzleTransform(128))

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        plgpu.wgmma(acc_ref, x_ref, y_ref)

        @pl.when(pl.program_id(2) == k // BK - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

        plgpu.wgmma_wait(1)  # the last wgmma is not awaited: each input slot is released a step late

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn, k // BK),
        in_specs=[plgpu.BlockSpec((bm, BK), lambda i, j, s: (i, s), transforms=transforms, delay_release=1),
                  plgpu.BlockSpec((BK, bn), lambda i, j, s: (s, j), transforms=transforms, delay_release=1)],
        out_specs=plgpu.BlockSpec((bm, bn), lambda i, j, s: (i, j), transforms=transforms),
        scratch_shapes=[plgpu.ACC((bm, bn), jnp.float32)],
        compiler_params=plgpu.CompilerParams(dimension_semantics=["parallel", "parallel", "sequential"],
                                             max_concurrent_steps=max_concurrent_steps))(x, y)


def reference(x, y, bm: int = 128, bn: int = 128, max_concurrent_steps: int = 2):
    """jnp's matmul with matmul's signature (the tiling ignored)."""
    del bm, bn, max_concurrent_steps
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


INSPECT = {
    "matmul": {"args": "bf16[512,512] bf16[512,512]", "reference": "reference",
               "params": {"bm": [128, 64, 256], "bn": [128, 64, 256], "max_concurrent_steps": [2, 1, 3, 4]}},
    "reference": {"args": "bf16[512,512] bf16[512,512]"},
}
