"""jax's own Pallas-Triton kernels for NVIDIA GPUs (jax.experimental.pallas.ops.gpu, jax 0.10.2), as
targets: each entry calls jax's kernel with its tiling as static keyword params. Shapes are small;
they are here to compile for a GPU without one (show, check), not to be run.

    attention         FlashAttention forward (mha); jax.grad runs its Pallas dq and dkv kernels
    layer_norm        LayerNorm over the last axis (a custom_vjp: its backward is Pallas too)
    rms_norm          RMSNorm over the last axis
    softmax           softmax over the last axis
    decode_attention  multi-query decode attention, keys split over k_splits programs
    paged_attention   decode attention over a paged KV cache (block tables)

    inspector show samples/jax_gpu_kernels.py:attention --target h100 --view pallas
    inspector check samples/jax_gpu_kernels.py:decode_attention --target h100,a100
"""
from jax.experimental.pallas.ops.gpu import attention as attention_lib
from jax.experimental.pallas.ops.gpu import decode_attention as decode_lib
from jax.experimental.pallas.ops.gpu import layer_norm as layer_norm_lib
from jax.experimental.pallas.ops.gpu import paged_attention as paged_lib
from jax.experimental.pallas.ops.gpu import rms_norm as rms_norm_lib
from jax.experimental.pallas.ops.gpu import softmax as softmax_lib


def attention(q, k, v, block_q: int = 64, block_k: int = 64, num_warps: int = 4, num_stages: int = 2):
    """q, k, v (batch, seq, heads, head_dim); causal."""
    sizes = attention_lib.BlockSizes(block_q=block_q, block_k=block_k, block_q_dkv=block_q, block_kv_dkv=block_k,
                                     block_q_dq=block_q, block_kv_dq=block_k)
    return attention_lib.mha(q, k, v, segment_ids=None, causal=True, block_sizes=sizes, num_warps=num_warps,
                             num_stages=num_stages)


def layer_norm(x, weight, bias):
    """x (batch, seq, features); weight and bias (features,). jax picks num_warps from the width."""
    return layer_norm_lib.layer_norm(x, weight, bias)


def rms_norm(x, weight, bias):
    """As layer_norm (bias added after scaling)."""
    return rms_norm_lib.rms_norm(x, weight, bias)


def softmax(x, num_warps: int = 4):
    return softmax_lib.softmax(x, axis=-1, num_warps=num_warps)


def decode_attention(q, k, v, block_k: int = 64, k_splits: int = 4, num_warps: int = 4, num_stages: int = 2):
    """q (batch, heads, head_dim); k, v (batch, seq, head_dim): one key/value head for all."""
    return decode_lib.mqa(q, k, v, block_k=block_k, k_splits=k_splits, num_warps=num_warps, num_stages=num_stages)


def paged_attention(q, k_pages, v_pages, block_tables, lengths, pages_per_compute_block: int = 2,
                    k_splits: int = 2):
    """q (batch, heads, head_dim); k/v_pages (kv_heads, pages, page_size, head_dim); block_tables
    (batch, pages per sequence); lengths (batch,)."""
    return paged_lib.paged_attention(q, k_pages, v_pages, block_tables, lengths,
                                     pages_per_compute_block=pages_per_compute_block, k_splits=k_splits)


INSPECT = {
    "attention": {"args": "bf16[1,256,2,64] bf16[1,256,2,64] bf16[1,256,2,64]",
                  "params": {"block_q": [64, 32, 128], "block_k": [64, 32, 128], "num_stages": [2, 1, 3]}},
    "layer_norm": {"args": "f32[2,32,256] f32[256] f32[256]"},
    "rms_norm": {"args": "f32[2,32,256] f32[256] f32[256]"},
    "softmax": {"args": "f32[64,256]"},
    "decode_attention": {"args": "bf16[2,16,64] bf16[2,256,64] bf16[2,256,64]",
                         "params": {"block_k": [64, 32, 128], "k_splits": [4, 2, 8]}},
    "paged_attention": {"args": "bf16[2,16,64] bf16[2,16,16,64] bf16[2,16,16,64] i32[2,8] i32[2]",
                        "params": {"pages_per_compute_block": [2, 4], "k_splits": [2, 4]}},
}
