"""Attention three ways: what XLA makes of plain jnp, a Pallas FlashAttention kernel, and a
block-sparse (local window + global tokens) Pallas kernel. Inputs are (batch*heads, seq, head_dim).

    inspector show samples/attention.py:naive --view fusions --target tpu-v5e
    inspector show samples/attention.py:flash --target tpu-v6e --view mosaic
    inspector check samples/attention.py:flash --target tpu-v5e,tpu-v6e,tpu-7x
"""
import math

import jax
import jax.numpy as jnp

from inspector.kernels import block_sparse_attention as bsa
from inspector.kernels.flash_attention import BlockSizes, flash_attention


def naive(q, k, v, causal: bool = True):
    """softmax(q k^T / sqrt(d)) v: XLA materializes the (B, S, S) scores in HBM."""
    s = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), dtype=bool))
        s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s.astype(jnp.float32), axis=-1)
    return jnp.einsum("bqk,bkd->bqd", p.astype(v.dtype), v)


def flash(q, k, v, block_q: int = 512, block_k: int = 512, causal: bool = True):
    """The Pallas FlashAttention kernel (kernels/flash_attention.py); jax.grad works through it."""
    return flash_attention(q, k, v, causal=causal, block_sizes=BlockSizes(block_q, block_k))


def block_sparse(q, k, v, window: int = 256, global_tokens: int = 64, block_q: int = 128, block_k: int = 128):
    """Each query sees the previous `window` keys and the first `global_tokens`: most kv blocks
    are never loaded (kernels/block_sparse_attention.py)."""
    mask = bsa.LocalGlobalMask(window=window, global_tokens=global_tokens, causal=True)
    return bsa.block_sparse_attention(q, k, v, mask=mask, block_sizes=bsa.BlockSizes(block_q, block_k))


def block_sparse_dense(q, k, v, window: int = 256, global_tokens: int = 64, block_q: int = 128, block_k: int = 128):
    """The same mask applied to dense attention: the reference for block_sparse."""
    del block_q, block_k  # same signature as block_sparse, so --set works on both
    return bsa.reference(q, k, v, mask=bsa.LocalGlobalMask(window=window, global_tokens=global_tokens, causal=True))


def reference(q, k, v, block_q: int = 512, block_k: int = 512, causal: bool = True):
    """naive with flash's signature (block sizes ignored), in f32 so bf16 inputs are compared fairly."""
    del block_q, block_k
    return naive(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), causal).astype(q.dtype)


INSPECT = {
    "naive": {
        # S=4096: the f32 (4, 4096, 4096) scores are 256 MiB, more than any TPU's VMEM, so XLA writes
        # them to HBM (at S=2048 v5e keeps its 64 MiB in VMEM: try --args to see it)
        "args": "f32[4,4096,64] f32[4,4096,64] f32[4,4096,64]",
    },
    "flash": {
        "args": "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]",
        "reference": "reference",
        # 512 x 512: BlockSizes.for_chip("tpu-v5e") (kernels/block_sizes.py), and 16x fewer grid steps
        # than 128 x 128 (which matters in interpret mode on a CPU)
        "params": {"block_q": [512, 128, 256, 1024, 4096], "block_k": [512, 128, 256]},
    },
    "block_sparse": {
        "args": "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]",
        "reference": "block_sparse_dense",
        "params": {"window": [256, 512, 1024], "global_tokens": [64, 128], "block_q": [128, 256], "block_k": [128, 256]},
    },
}
