"""FlashAttention for NVIDIA GPUs in Pallas-Triton, compiled by XLA:GPU without a GPU. Inputs are
(batch, seq, heads, head_dim). Each program owns block_q query rows of one head and walks the keys
in block_k steps with an online softmax; Triton pipelines that loop, keeping the k and v tiles of
several steps in shared memory at once (num_stages).

    inspector show samples/gpu_attention.py:flash --target h100 --view pallas
    inspector check samples/gpu_attention.py:flash --target h100,a100
    inspector check samples/gpu_attention.py:flash --target h100 --set block_k=256 --set num_stages=4

The default (64 x 64 blocks, 2 stages) fits every chip. block_k=256 in 4 stages keeps four 256x128
bf16 tiles of k and of v: over the 227 KiB a block may have on H100, and XLA:GPU refuses it.

jax.grad works through ``flash``: its backward is jax's own Pallas-Triton backward kernels
(jax.experimental.pallas.ops.gpu.attention.mha, a custom_vjp), so the gradient compiles for a GPU too.
"""
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt
from jax.experimental.pallas.ops.gpu import attention as jax_attention


def _forward(q, k, v, block_q, block_k, num_warps, num_stages, causal):
    batch, seq, heads, dim = q.shape
    scale = 1 / math.sqrt(dim)

    def flash_forward(q_ref, k_ref, v_ref, o_ref):
        start_q = pl.program_id(0)
        q_tile = q_ref[...]  # (block_q, dim)
        rows = start_q * block_q + jnp.arange(block_q)

        def step(j, carry):
            o, m, l = carry
            k_tile, v_tile = k_ref[pl.ds(j * block_k, block_k), :], v_ref[pl.ds(j * block_k, block_k), :]
            s = plt.dot(q_tile, k_tile.T).astype(jnp.float32) * scale
            if causal:
                s = jnp.where(rows[:, None] >= j * block_k + jnp.arange(block_k)[None, :], s, -jnp.inf)
            m_new = jnp.maximum(m, s.max(axis=1))
            p = jnp.exp(s - m_new[:, None])
            alpha = jnp.exp(m - m_new)
            o = o * alpha[:, None] + plt.dot(p.astype(v_tile.dtype), v_tile).astype(jnp.float32)
            return o, m_new, l * alpha + p.sum(axis=1)

        # causal: the keys past this block's last query are never loaded
        steps = jax.lax.div(block_q * (start_q + 1) + block_k - 1, block_k) if causal else seq // block_k
        init = (jnp.zeros((block_q, dim), jnp.float32), jnp.full((block_q,), -jnp.inf, jnp.float32),
                jnp.zeros((block_q,), jnp.float32))
        o, _, l = jax.lax.fori_loop(0, steps, step, init)
        o_ref[...] = (o / l[:, None]).astype(o_ref.dtype)

    tile = pl.BlockSpec((None, block_q, None, dim), lambda i, b, h: (b, i, h, 0))
    whole = pl.BlockSpec((None, seq, None, dim), lambda i, b, h: (b, 0, h, 0))
    return pl.pallas_call(
        flash_forward, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), grid=(seq // block_q, batch, heads),
        in_specs=[tile, whole, whole], out_specs=tile,
        compiler_params=plt.CompilerParams(num_warps=num_warps, num_stages=num_stages))(q, k, v)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def _flash(q, k, v, block_q, block_k, num_warps, num_stages, causal):
    return _forward(q, k, v, block_q, block_k, num_warps, num_stages, causal)


def _flash_fwd(q, k, v, block_q, block_k, num_warps, num_stages, causal):
    return _forward(q, k, v, block_q, block_k, num_warps, num_stages, causal), (q, k, v)


def _flash_bwd(block_q, block_k, num_warps, num_stages, causal, residuals, g):
    q, k, v = residuals
    # jax's Pallas-Triton backward (its dq and dkv kernels) at the same blocks; it recomputes the
    # softmax statistics with its own forward kernel
    sizes = jax_attention.BlockSizes(block_q=block_q, block_k=block_k, block_q_dkv=block_q, block_kv_dkv=block_k,
                                     block_q_dq=block_q, block_kv_dq=block_k)
    mha = functools.partial(jax_attention.mha, segment_ids=None, sm_scale=1 / math.sqrt(q.shape[-1]), causal=causal,
                            block_sizes=sizes, num_warps=num_warps, num_stages=num_stages)
    _, vjp = jax.vjp(mha, q, k, v)
    return vjp(g)


_flash.defvjp(_flash_fwd, _flash_bwd)


def flash(q, k, v, block_q: int = 64, block_k: int = 64, num_warps: int = 4, num_stages: int = 2,
          causal: bool = True):
    """softmax(q k^T / sqrt(d)) v, causal by default, in (block_q, block_k) tiles."""
    return _flash(q, k, v, block_q, block_k, num_warps, num_stages, causal)


def reference(q, k, v, block_q: int = 64, block_k: int = 64, num_warps: int = 4, num_stages: int = 2,
              causal: bool = True):
    """Plain jnp attention in f32 with flash's signature (the tiling ignored)."""
    del block_q, block_k, num_warps, num_stages
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) / math.sqrt(q.shape[-1])
    if causal:
        s = jnp.where(jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool)), s, -jnp.inf)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v.astype(jnp.float32)).astype(q.dtype)


INSPECT = {
    "flash": {
        "args": "bf16[1,1024,4,128] bf16[1,1024,4,128] bf16[1,1024,4,128]",
        "reference": "reference",
        "params": {"block_q": [64, 32, 128], "block_k": [64, 32, 128, 256], "num_warps": [4, 8],
                   "num_stages": [2, 1, 3, 4]},
    },
    "reference": {"args": "bf16[1,1024,4,128] bf16[1,1024,4,128] bf16[1,1024,4,128]"},
}
