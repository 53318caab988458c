"""A Pallas-Triton matmul for NVIDIA GPUs, compiled by XLA:GPU without a GPU. Each program owns a
(bm, bn) tile of the output and walks K in bk steps; Triton pipelines that loop, keeping the x and y
tiles of several steps in shared memory at once (``stages``).

    inspector show samples/gpu_matmul.py:matmul --target h100 --view pallas
    inspector check samples/gpu_matmul.py:matmul --target h100,a100
    inspector check samples/gpu_matmul.py:matmul --target h100 --set bm=256

bm=128 (the default) is a 128x128x64 tile in 3 stages: 96 KiB of shared memory on H100. bm=256 is a
256x256x128 tile in 4 stages: 512 KiB, over the 227 KiB a block may have, and XLA:GPU refuses it.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt


def matmul(x, y, bm: int = 128, bn: int = 0, bk: int = 0, stages: int = 0, warps: int = 8):
    """x @ y in (bm, bn) output tiles; bn defaults to bm, bk to bm // 2, and stages to 3 for a
    tile of 128 or less, 4 above (a bigger tile hides more latency per stage, so it pipelines deeper)."""
    bn, bk = bn or bm, bk or bm // 2
    stages = stages or (3 if bm <= 128 else 4)
    m, k = x.shape
    n = y.shape[1]

    def kernel(x_ref, y_ref, o_ref):
        def step(i, acc):
            return acc + plt.dot(x_ref[:, pl.ds(i * bk, bk)], y_ref[pl.ds(i * bk, bk), :])
        o_ref[...] = jax.lax.fori_loop(0, k // bk, step, jnp.zeros((bm, bn), jnp.float32)).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((k, bn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(x, y)


def reference(x, y, bm: int = 128, bn: int = 0, bk: int = 0, stages: int = 0, warps: int = 8):
    """jnp's matmul with matmul's signature (the tiling ignored)."""
    del bm, bn, bk, stages, warps
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


INSPECT = {
    "matmul": {"args": "bf16[512,512] bf16[512,512]", "reference": "reference",
               "params": {"bm": [128, 64, 256], "stages": [0, 1, 2, 3, 4]}},
    "reference": {"args": "bf16[512,512] bf16[512,512]"},
}
