"""The tile-size experiment from the seed article (a (4096, 7168) x (7168, 18432) matmul where
only the tile size changed and the kernel got 2.75x faster), scaled by 1/4 per dim to run here.

    inspector check samples/matmul.py:tiled --target tpu-v5e,tpu-v6e --set bm=1024 --set bn=1024
    inspector show samples/matmul.py:tiled --view pallas --set bk=1792
"""
import jax.numpy as jnp

from inspector.kernels.matmul import TileSizes, matmul


def tiled(a, b, bm: int = 256, bk: int = 256, bn: int = 256):
    """The Pallas tiled matmul (kernels/matmul.py); larger tiles, fewer HBM re-reads."""
    return matmul(a, b, TileSizes(bm, bk, bn))


def xla(a, b, bm: int = 256, bk: int = 256, bn: int = 256):
    """What XLA makes of the same product: the reference."""
    del bm, bk, bn
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


INSPECT = {
    "tiled": {
        "args": "bf16[1024,1792] bf16[1792,4608]",
        "reference": "xla",
        "params": {"bm": [256, 128, 512, 1024], "bk": [256, 128, 896, 1792], "bn": [256, 128, 512, 1152]},
    },
    "xla": {"args": "bf16[1024,1792] bf16[1792,4608]"},
}
