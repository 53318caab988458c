"""jax's own Pallas GPU kernels (jax.experimental.pallas.ops.gpu, Triton) as inspector targets, for
tests/bench/gpu_chip.py to measure on an attached GPU against the deviceless estimate. Every input
is a float array: the integer inputs some kernels take (page tables, lengths) are built inside
from the shapes, so a benchmark can fill every input with random numbers."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention, decode_attention, layer_norm as ln, paged_attention as pa
from jax.experimental.pallas.ops.gpu import rms_norm as rms, softmax as sm

QKV = "bf16[2,1024,8,64] bf16[2,1024,8,64] bf16[2,1024,8,64]"  # batch, sequence, heads, head dim
ROWS = "f32[4,1024,1024] f32[1024] f32[1024]"  # batch, rows, features


def mha(q, k, v, causal: bool = False):
    return attention.mha(q, k, v, segment_ids=None, causal=causal)


def mha_reference(q, k, v, causal: bool = False):
    return attention.mha_reference(q, k, v, segment_ids=None, causal=causal)


def mha_backward(q, k, v):
    return jax.grad(lambda q, k, v: attention.mha(q, k, v, segment_ids=None).astype(jnp.float32).sum(),
                    argnums=(0, 1, 2))(q, k, v)


def layer_norm(x, w, b):
    return ln.layer_norm(x, w, b)


def layer_norm_backward(x, w, b):
    return jax.grad(lambda x, w, b: ln.layer_norm(x, w, b).sum(), argnums=(0, 1, 2))(x, w, b)


def rms_norm(x, w, b):
    return rms.rms_norm(x, w, b)


def softmax(x):
    return sm.softmax(x, axis=-1)


def decode_mqa(q, k, v):
    return decode_attention.mqa(q, k, v)


def decode_gqa(q, k, v):
    return decode_attention.gqa(q, k, v)


def paged(q, k_pages, v_pages, pages_per_sequence: int = 16):
    """Each sequence of the batch owns ``pages_per_sequence`` consecutive pages, all full."""
    batch, page_size = q.shape[0], k_pages.shape[2]
    tables = jnp.arange(batch * pages_per_sequence, dtype=jnp.int32).reshape(batch, pages_per_sequence)
    lengths = jnp.full((batch,), pages_per_sequence * page_size, jnp.int32)
    return pa.paged_attention(q, k_pages, v_pages, tables, lengths, pages_per_compute_block=4)


INSPECT = {
    "mha": {"args": QKV, "reference": "mha_reference"},
    "mha_reference": {"args": QKV},
    "mha_backward": {"args": QKV},
    "layer_norm": {"args": ROWS},
    "layer_norm_backward": {"args": ROWS},
    "rms_norm": {"args": ROWS},
    "softmax": {"args": "f32[4096,1024]"},
    "decode_mqa": {"args": "bf16[8,16,128] bf16[8,4096,128] bf16[8,4096,128]"},  # batch, heads | keys, head dim
    "decode_gqa": {"args": "bf16[8,32,128] bf16[8,4096,4,128] bf16[8,4096,4,128]"},
    # q: batch, heads, head dim; pages: kv heads, pages, page size, head dim (8 x 16 pages of 16)
    "paged": {"args": "bf16[8,16,128] bf16[1,128,16,128] bf16[1,128,16,128]"},
}
