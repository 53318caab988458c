"""A mixture-of-experts layer's grouped matmul: 2048 routed tokens, 8 experts with the skewed
load a router produces (one expert gets nothing), as a Pallas ragged dot.

    inspector show samples/moe.py:experts --view pallas
    inspector check samples/moe.py:experts --target tpu-v5e,tpu-v6e
"""
import jax
import jax.numpy as jnp
import numpy as np

from inspector.kernels.ragged_dot import TileSizes, ragged_dot

TOKENS, D_MODEL, D_FF = 2048, 512, 1024
# tokens per expert as sorted by a top-1 router on a skewed batch: sums to TOKENS, expert 7 idle
GROUP_SIZES = np.array([612, 401, 330, 255, 190, 140, 120, 0], np.int32)


def experts(tokens, weights, group_sizes, bm: int = 128, bk: int = 128, bn: int = 128):
    """tokens (TOKENS, D_MODEL) sorted by expert, weights (experts, D_MODEL, D_FF)."""
    return ragged_dot(tokens, weights, group_sizes, TileSizes(bm, bk, bn))


def experts_xla(tokens, weights, group_sizes, bm: int = 128, bk: int = 128, bn: int = 128):
    """jax.lax.ragged_dot: the reference."""
    del bm, bk, bn
    return jax.lax.ragged_dot(tokens, weights, group_sizes, preferred_element_type=jnp.float32).astype(tokens.dtype)


def _inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    tokens = jax.random.normal(k1, (TOKENS, D_MODEL), jnp.bfloat16)
    weights = (jax.random.normal(k2, (len(GROUP_SIZES), D_MODEL, D_FF), jnp.float32) / np.sqrt(D_MODEL)).astype(jnp.bfloat16)
    return tokens, weights, jnp.asarray(GROUP_SIZES)


INSPECT = {
    "experts": {"args": _inputs, "reference": "experts_xla",
                "params": {"bm": [128, 256, 512], "bk": [128, 256, 512], "bn": [128, 256, 512]}},
    "experts_xla": {"args": _inputs},
}
