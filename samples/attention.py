"""Attention two ways: what XLA makes of plain jnp, and a Pallas FlashAttention kernel.

Open it with `inspector show samples/attention.py:naive --view hlo` or
`inspector show samples/attention.py:flash --target tpu-v5e --view mosaic`.
Inputs are (batch*heads, seq, head_dim).
"""
import math

import jax
import jax.numpy as jnp

from kernels.flash_attention import BlockSizes, flash_attention


def naive(q, k, v, causal: bool = True):
    """softmax(q k^T / sqrt(d)) v: XLA materializes the (B, S, S) scores in HBM."""
    s = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), dtype=bool))
        s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s.astype(jnp.float32), axis=-1)
    return jnp.einsum("bqk,bkd->bqd", p.astype(v.dtype), v)


def flash(q, k, v, block_q: int = 128, block_k: int = 128, causal: bool = True):
    """The Pallas FlashAttention forward kernel (kernels/flash_attention.py)."""
    return flash_attention(q, k, v, causal=causal, block_sizes=BlockSizes(block_q, block_k))


INSPECT = {
    "naive": {
        # S=4096: the f32 (4, 4096, 4096) scores are 256 MiB, more than any TPU's VMEM, so XLA writes
        # them to HBM (at S=2048 v5e keeps its 64 MiB in VMEM: try --args to see it)
        "args": "f32[4,4096,64] f32[4,4096,64] f32[4,4096,64]",
    },
    "flash": {
        "args": "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]",
        "reference": "naive",
        "params": {"block_q": [128, 256, 512, 1024, 4096], "block_k": [128, 256, 512]},
    },
}
