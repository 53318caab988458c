"""Every Pallas TPU kernel jax ships (jax.experimental.pallas.ops.tpu, jax 0.10.2), as targets.

Each entry calls JAX's own kernel with its block sizes as static keyword params, beside a
plain-jnp reference with the same signature (it ignores the block sizes). Shapes are small
so each kernel runs in TPU interpret mode on a CPU in seconds.

    flash_attention       FlashAttention forward, causal or not; jax.grad runs its Pallas backward
    splash_mha_causal     splash attention, multi-head, CausalMask; jax.grad runs its backward
    splash_mha_local      splash attention, multi-head, LocalMask (sliding window of 128)
    splash_mqa            splash attention, multi-query (one k/v head), CausalMask
    gmm                   megablox grouped matmul (custom_vjp: its gradient is gmm + tgmm)
    tgmm                  megablox transposed grouped matmul (the rhs gradient of gmm)
    paged_attention       decode attention over a paged KV cache (page tables in SMEM)
    ragged_paged_attention  mixed prefill/decode attention over a paged KV cache; jax 0.10.2's
                          TPU interpreter cannot run it (it reshapes a VMEM ref), so on a CPU
                          only the TPU compile and the static views work, not diff
    matmul                the tiled matmul of the Pallas TPU guide
    threefry_bits         Threefry-2x32 random bits (jax.random.bits' partitionable scheme)
    philox_bits           Philox-4x32 random bits
    double                example_kernel: one block, no grid
    all_gather            a ring all-gather with remote DMAs: needs a mesh axis of > 1 device;
                          on one device jax returns x without launching the kernel

    inspector show samples/jax_kernels.py:splash_mha_causal --view pallas --target tpu-v5e
    inspector check samples/jax_kernels.py:paged_attention --target tpu-v5e,tpu-v6e
    inspector diff samples/jax_kernels.py:flash_attention --grad
"""
import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu import all_gather as all_gather_lib
from jax.experimental.pallas.ops.tpu import example_kernel
from jax.experimental.pallas.ops.tpu import flash_attention as flash_lib
from jax.experimental.pallas.ops.tpu import matmul as matmul_lib
from jax.experimental.pallas.ops.tpu import megablox
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as ragged_lib
from jax.experimental.pallas.ops.tpu.random import philox, threefry
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

# the megablox package's `gmm` attribute is the custom_vjp op, which hides the module of that name
megablox_gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")

HEAD_DIM = 128
SCALE = 1 / math.sqrt(HEAD_DIM)


def _attend(q, k, v, mask, scale=1.0):
    """softmax(q k^T * scale, masked) v in f32 over the last two axes; mask broadcasts to the scores."""
    s = jnp.einsum("...qd,...kd->...qk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    p = jnp.where(jnp.isnan(p), 0.0, p)  # fully masked rows give 0, as the kernels do
    return jnp.einsum("...qk,...kd->...qd", p, v.astype(jnp.float32)).astype(q.dtype)


def _causal(sq, sk, window=None):
    """(sq, sk) bool: query i sees keys j <= i (and j >= i - window)."""
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    keep = j <= i
    return keep & (j >= i - window) if window is not None else keep


def _normal(key, shape, dtype, scale=1.0):
    return (jax.random.normal(key, shape, jnp.float32) * scale).astype(dtype)


# ----------------------------------------------------------------------------- flash attention


def flash_attention(q, k, v, block_q: int = 256, block_k_major: int = 256, block_k: int = 128, causal: bool = True):
    """q, k, v (batch, heads, seq, head_dim). The same blocks serve the backward (dq, dkv) kernels."""
    sizes = flash_lib.BlockSizes(
        block_q=block_q, block_k_major=block_k_major, block_k=block_k, block_b=1,
        block_q_major_dkv=block_q, block_k_major_dkv=block_k_major, block_k_dkv=block_k, block_q_dkv=block_q,
        block_k_major_dq=block_k_major, block_k_dq=block_k, block_q_dq=block_q)
    return flash_lib.flash_attention(q, k, v, causal=causal, sm_scale=SCALE, block_sizes=sizes)


def flash_attention_ref(q, k, v, block_q: int = 256, block_k_major: int = 256, block_k: int = 128, causal: bool = True):
    del block_q, block_k_major, block_k
    mask = _causal(q.shape[2], k.shape[2]) if causal else True
    return _attend(q, k, v, mask, SCALE)


# ----------------------------------------------------------------------------- splash attention


def _splash_blocks(block_q, block_kv, block_kv_compute, fused_bwd):
    """Forward and backward block sizes (the backward reuses the forward's)."""
    return splash.BlockSizes(
        block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
        block_q_dkv=block_q, block_kv_dkv=block_kv, block_kv_dkv_compute=block_kv_compute,
        block_q_dq=None if fused_bwd else block_q, block_kv_dq=None if fused_bwd else block_kv,
        use_fused_bwd_kernel=fused_bwd)


def _splash(q, k, v, head_mask, mqa, block_q, block_kv, block_kv_compute, fused_bwd):
    """Build the kernel for these shapes and blocks (mask processing runs at trace time), then call it."""
    mask = masks.MultiHeadMask([head_mask] * q.shape[0])
    make = splash.make_splash_mqa if mqa else splash.make_splash_mha
    kernel = make(mask=mask, head_shards=1, q_seq_shards=1,
                  block_sizes=_splash_blocks(block_q, block_kv, block_kv_compute, fused_bwd))
    return kernel(q * SCALE, k, v)


def splash_mha_causal(q, k, v, block_q: int = 128, block_kv: int = 256, block_kv_compute: int = 128,
                      fused_bwd: bool = False):
    """q, k, v (heads, seq, head_dim); causal mask. Splash has no softmax scale: q is scaled first."""
    mask = masks.CausalMask((q.shape[1], k.shape[1]))
    return _splash(q, k, v, mask, False, block_q, block_kv, block_kv_compute, fused_bwd)


def splash_mha_causal_ref(q, k, v, block_q: int = 128, block_kv: int = 256, block_kv_compute: int = 128,
                          fused_bwd: bool = False):
    del block_q, block_kv, block_kv_compute, fused_bwd
    return _attend(q, k, v, _causal(q.shape[1], k.shape[1]), SCALE)


def splash_mha_local(q, k, v, window: int = 128, block_q: int = 128, block_kv: int = 128,
                     block_kv_compute: int = 128):
    """Each query sees itself and the `window` keys before it: most kv blocks are skipped."""
    mask = masks.LocalMask((q.shape[1], k.shape[1]), window_size=(window, 0), offset=0)
    return _splash(q, k, v, mask, False, block_q, block_kv, block_kv_compute, False)


def splash_mha_local_ref(q, k, v, window: int = 128, block_q: int = 128, block_kv: int = 128,
                         block_kv_compute: int = 128):
    del block_q, block_kv, block_kv_compute
    return _attend(q, k, v, _causal(q.shape[1], k.shape[1], window), SCALE)


def splash_mqa(q, k, v, block_q: int = 128, block_kv: int = 256, block_kv_compute: int = 128):
    """q (heads, seq, head_dim); k, v (seq, head_dim) shared by every head; causal."""
    mask = masks.CausalMask((q.shape[1], k.shape[0]))
    return _splash(q, k, v, mask, True, block_q, block_kv, block_kv_compute, False)


def splash_mqa_ref(q, k, v, block_q: int = 128, block_kv: int = 256, block_kv_compute: int = 128):
    del block_q, block_kv, block_kv_compute
    return _attend(q, k[None], v[None], _causal(q.shape[1], k.shape[0]), SCALE)


# ----------------------------------------------------------------------------- megablox

# rows per group (tokens per expert) as a router makes them: sums to GMM_M, group 2 is empty
GROUP_SIZES = np.array([200, 72, 0, 240], np.int32)
GMM_M, GMM_K, GMM_N = 512, 256, 256


def gmm(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    """lhs (m, k) rows sorted by group, rhs (groups, k, n): out[rows of g] = lhs[rows of g] @ rhs[g]."""
    return megablox.gmm(lhs, rhs, group_sizes, jnp.float32, (tm, tk, tn))


def gmm_ref(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    del tm, tk, tn
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)


def tgmm(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    """lhs (k, m), rhs (m, n): out[g] = lhs[:, cols of g] @ rhs[rows of g], shape (groups, k, n)."""
    return megablox_gmm.tgmm(lhs, rhs, group_sizes, jnp.float32, (tm, tk, tn))


def tgmm_ref(lhs, rhs, group_sizes, tm: int = 128, tk: int = 128, tn: int = 128):
    del tm, tk, tn
    ends = jnp.cumsum(group_sizes)
    row = jnp.arange(rhs.shape[0])
    member = ((row[None, :] >= (ends - group_sizes)[:, None]) & (row[None, :] < ends[:, None])).astype(jnp.float32)
    return jnp.einsum("km,gm,mn->gkn", lhs.astype(jnp.float32), member, rhs.astype(jnp.float32))


def _gmm_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    lhs = _normal(k1, (GMM_M, GMM_K), jnp.bfloat16)
    rhs = _normal(k2, (len(GROUP_SIZES), GMM_K, GMM_N), jnp.bfloat16, 1 / math.sqrt(GMM_K))
    return lhs, rhs, jnp.asarray(GROUP_SIZES)


def _tgmm_inputs():
    k1, k2 = jax.random.split(jax.random.key(1))
    lhs = _normal(k1, (GMM_K, GMM_M), jnp.bfloat16)
    rhs = _normal(k2, (GMM_M, GMM_N), jnp.bfloat16, 1 / math.sqrt(GMM_M))
    return lhs, rhs, jnp.asarray(GROUP_SIZES)


# ----------------------------------------------------------------------------- paged attention

PAGE_SIZE = 16
PAGES_PER_SEQ = 16  # a sequence holds up to 256 tokens


def paged_attention(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block: int = 4,
                    inline_seq_dim: bool = True):
    """One decode step: q (batch, q_heads, head_dim), k/v_pages (kv_heads, pages, page_size,
    head_dim), lengths (batch,), page_indices (batch, pages_per_seq). No softmax scale."""
    return paged_attention_kernel.paged_attention(
        q, k_pages, v_pages, lengths, page_indices,
        pages_per_compute_block=pages_per_compute_block, inline_seq_dim=inline_seq_dim)


def paged_attention_ref(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block: int = 4,
                        inline_seq_dim: bool = True):
    del pages_per_compute_block, inline_seq_dim
    batch, q_heads, d = q.shape
    kv_heads = k_pages.shape[0]
    # (kv_heads, batch, pages_per_seq * page_size, d): each sequence's keys in order
    k = k_pages[:, page_indices].reshape(kv_heads, batch, -1, d)
    v = v_pages[:, page_indices].reshape(kv_heads, batch, -1, d)
    qg = q.reshape(batch, kv_heads, q_heads // kv_heads, d).transpose(1, 0, 2, 3)  # (kv_heads, batch, group, d)
    valid = jnp.arange(k.shape[2])[None, :] < lengths[:, None]  # (batch, keys)
    out = _attend(qg, k, v, valid[None, :, None, :])
    return out.transpose(1, 0, 2, 3).reshape(batch, q_heads, d)


def _paged_inputs():
    batch, q_heads, kv_heads, total_pages = 2, 8, 2, 40
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)
    q = _normal(k1, (batch, q_heads, HEAD_DIM), jnp.bfloat16, SCALE)
    # bf16 pages: the kernel rounds unquantized pages to bf16 anyway (_maybe_dequantize)
    k_pages = _normal(k2, (kv_heads, total_pages, PAGE_SIZE, HEAD_DIM), jnp.bfloat16)
    v_pages = _normal(k3, (kv_heads, total_pages, PAGE_SIZE, HEAD_DIM), jnp.bfloat16)
    lengths = np.array([200, 77], np.int32)  # tokens in the cache per sequence (the rest is padding)
    pages = np.random.default_rng(0).permutation(total_pages)[: batch * PAGES_PER_SEQ]
    return q, k_pages, v_pages, jnp.asarray(lengths), jnp.asarray(pages.reshape(batch, PAGES_PER_SEQ).astype(np.int32))


# ----------------------------------------------------------------------------- ragged paged attention

# three sequences in one batch of 64 query tokens: a decode step, a whole prefill, a prefill chunk
Q_LENS = np.array([1, 40, 23], np.int32)
KV_LENS = np.array([100, 40, 150, 0], np.int32)  # max_num_seqs = 4: the last slot is unused
RAGGED_TOKENS, RAGGED_Q_HEADS, RAGGED_KV_HEADS, RAGGED_PAGES = 64, 4, 2, 64


def ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                           num_kv_pages_per_block: int = 4, num_queries_per_block: int = 16):
    """q (tokens, q_heads, head_dim); kv_pages (pages, page_size, 2 * kv_heads, head_dim) with k and v
    heads interleaved; the last token of each sequence's queries is its last kv position."""
    return ragged_lib.ragged_paged_attention(
        q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=SCALE,
        num_kv_pages_per_block=num_kv_pages_per_block, num_queries_per_block=num_queries_per_block)


def ragged_paged_attention_ref(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                               num_kv_pages_per_block: int = 4, num_queries_per_block: int = 16):
    """Every token against every sequence's cache, masked to its own sequence (traceable, unlike
    JAX's ref_ragged_paged_attention, which loops over num_seqs in Python)."""
    del num_kv_pages_per_block, num_queries_per_block
    tokens, q_heads, d = q.shape
    max_seqs = page_indices.shape[0]
    kv_heads = kv_pages.shape[2] // 2
    kv = kv_pages[page_indices].reshape(max_seqs, -1, 2 * kv_heads, d)  # (seqs, positions, heads, d)
    k = jnp.repeat(kv[:, :, 0::2], q_heads // kv_heads, axis=2).transpose(0, 2, 1, 3)  # (seqs, q_heads, pos, d)
    v = jnp.repeat(kv[:, :, 1::2], q_heads // kv_heads, axis=2).transpose(0, 2, 1, 3)
    t = jnp.arange(tokens)
    seq = jnp.searchsorted(cu_q_lens, t, side="right") - 1  # the sequence each token belongs to
    live = (seq < num_seqs[0]) & (t < cu_q_lens[num_seqs[0]])
    seq = jnp.clip(seq, 0, max_seqs - 1)
    # a token's kv position: its sequence's kv_len - q_len + its index in the sequence's queries
    pos = kv_lens[seq] - (cu_q_lens[seq + 1] - cu_q_lens[seq]) + (t - cu_q_lens[seq])
    mask = (jnp.arange(k.shape[2])[None, :] <= pos[:, None])[:, None, None, :]  # (tokens, 1, 1, pos)
    ks, vs = k[seq], v[seq]  # (tokens, q_heads, positions, d): each token's own sequence
    out = _attend(q[:, :, None, :], ks, vs, mask, SCALE)[:, :, 0, :]  # (tokens, q_heads, d)
    return jnp.where(live[:, None, None], out, 0).astype(q.dtype)


def _ragged_inputs():
    k1, k2 = jax.random.split(jax.random.key(3))
    q = _normal(k1, (RAGGED_TOKENS, RAGGED_Q_HEADS, HEAD_DIM), jnp.float32)
    kv_pages = _normal(k2, (RAGGED_PAGES, PAGE_SIZE, 2 * RAGGED_KV_HEADS, HEAD_DIM), jnp.float32)
    pages = np.random.default_rng(1).permutation(RAGGED_PAGES)[: len(KV_LENS) * PAGES_PER_SEQ]
    cu_q_lens = np.zeros(len(KV_LENS) + 1, np.int32)
    cu_q_lens[1: len(Q_LENS) + 1] = np.cumsum(Q_LENS)
    cu_q_lens[len(Q_LENS) + 1:] = cu_q_lens[len(Q_LENS)]
    return (q, kv_pages, jnp.asarray(KV_LENS), jnp.asarray(pages.reshape(len(KV_LENS), PAGES_PER_SEQ).astype(np.int32)),
            jnp.asarray(cu_q_lens), jnp.array([len(Q_LENS)], jnp.int32))


# ----------------------------------------------------------------------------- matmul, random, example


def matmul(x, y, bm: int = 128, bn: int = 128, bk: int = 128):
    """The Pallas TPU guide's matmul: grid (m/bm, n/bn, k/bk), an f32 accumulator in VMEM."""
    return matmul_lib.matmul(x, y, block_shape=(bm, bn), block_k=bk)


def matmul_ref(x, y, bm: int = 128, bn: int = 128, bk: int = 128):
    del bm, bn, bk
    return jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32).astype(x.dtype)


RANDOM_SHAPE = (512, 512)


def threefry_bits(key, block_rows: int = 256, block_cols: int = 256):
    """u32 random bits of RANDOM_SHAPE from a raw threefry key u32[2], one block per grid step."""
    return threefry.threefry_2x32_count(key, RANDOM_SHAPE, RANDOM_SHAPE, block_size=(block_rows, block_cols))


def threefry_bits_ref(key, block_rows: int = 256, block_cols: int = 256):
    """jax.random.bits with the same key: the Pallas kernel reproduces the partitionable scheme."""
    del block_rows, block_cols
    return jax.random.bits(jax.random.wrap_key_data(key, impl="threefry2x32"), RANDOM_SHAPE, jnp.uint32)


def philox_bits(key, block_rows: int = 256, block_cols: int = 256):
    """u32 random bits of RANDOM_SHAPE from a philox key u32[2]."""
    return philox.philox_4x32_kernel(key, RANDOM_SHAPE, RANDOM_SHAPE, block_size=(block_rows, block_cols))


def philox_bits_ref(key, block_rows: int = 256, block_cols: int = 256):
    """JAX's own jnp philox_4x32 hash on the flat element index, outside any kernel."""
    del block_rows, block_cols
    counts = jnp.arange(math.prod(RANDOM_SHAPE), dtype=jnp.uint32).reshape(RANDOM_SHAPE)
    zeros = jnp.zeros_like(counts)
    hi, lo, _, _ = philox.philox_4x32(zeros, counts, zeros, zeros, key[0], key[1])
    return hi ^ lo


def _key():
    return (jnp.array([0x12345678, 0x9ABCDEF0], jnp.uint32),)


def double(x):
    """example_kernel.double: the whole array is one block (no grid)."""
    return example_kernel.double(x)


def double_ref(x):
    return x * 2


# ----------------------------------------------------------------------------- collectives


def all_gather(x):
    """JAX's ring all-gather over the first axis of the ambient mesh (jax.set_mesh), else of all
    local devices. It needs devices: with one device on the axis jax short-circuits (returns x,
    no pallas_call); the kernel's remote DMAs need a TPU topology of >= 2 chips."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    return all_gather_lib.all_gather(x, mesh=mesh, axis_name=mesh.axis_names[0])


def all_gather_ref(x):
    """x enters sharded over the axis and leaves replicated: gathered, it is x again."""
    return x


# ----------------------------------------------------------------------------- INSPECT

_QKV_4D = "f32[1,2,512,128] f32[1,2,512,128] f32[1,2,512,128]"
_QKV_3D = "bf16[2,512,128] bf16[2,512,128] bf16[2,512,128]"
_BF16 = {"atol": 2e-2, "rtol": 2e-2}

INSPECT = {
    "flash_attention": {
        "args": _QKV_4D, "reference": "flash_attention_ref", "atol": 1e-3, "rtol": 1e-3,
        "params": {"block_q": [256, 128, 512], "block_k_major": [256, 128, 512], "block_k": [128, 256],
                   "causal": [True, False]},
    },
    "splash_mha_causal": {
        "args": _QKV_3D, "reference": "splash_mha_causal_ref", **_BF16,
        "params": {"block_q": [128, 256, 512], "block_kv": [256, 128, 512], "block_kv_compute": [128, 256],
                   "fused_bwd": [False, True]},
    },
    "splash_mha_local": {
        "args": _QKV_3D, "reference": "splash_mha_local_ref", **_BF16,
        "params": {"window": [128, 256], "block_q": [128, 256], "block_kv": [128, 256], "block_kv_compute": [128]},
    },
    "splash_mqa": {
        "args": "bf16[4,512,128] bf16[512,128] bf16[512,128]", "reference": "splash_mqa_ref", **_BF16,
        "params": {"block_q": [128, 256, 512], "block_kv": [256, 128, 512], "block_kv_compute": [128, 256]},
    },
    "gmm": {
        "args": _gmm_inputs, "reference": "gmm_ref", **_BF16,
        "params": {"tm": [128, 256, 64], "tk": [128, 256], "tn": [128, 256]},
    },
    "tgmm": {
        "args": _tgmm_inputs, "reference": "tgmm_ref", **_BF16,
        "params": {"tm": [128, 256, 64], "tk": [128, 256], "tn": [128, 256]},
    },
    "paged_attention": {
        "args": _paged_inputs, "reference": "paged_attention_ref", **_BF16,
        "params": {"pages_per_compute_block": [4, 2, 8, 16], "inline_seq_dim": [True, False]},
    },
    "ragged_paged_attention": {
        "args": _ragged_inputs, "reference": "ragged_paged_attention_ref", "atol": 1e-4, "rtol": 1e-4,
        "params": {"num_kv_pages_per_block": [4, 2, 8, 16], "num_queries_per_block": [16, 8, 32, 64]},
    },
    "matmul": {
        "args": "f32[512,256] f32[256,384]", "reference": "matmul_ref", "atol": 1e-4, "rtol": 1e-4,
        "params": {"bm": [128, 256, 512], "bn": [128, 384], "bk": [128, 256]},
    },
    "threefry_bits": {
        "args": _key, "reference": "threefry_bits_ref", "atol": 0, "rtol": 0,
        "params": {"block_rows": [256, 128, 512], "block_cols": [256, 128, 512]},
    },
    "philox_bits": {
        "args": _key, "reference": "philox_bits_ref", "atol": 0, "rtol": 0,
        "params": {"block_rows": [256, 128, 512], "block_cols": [256, 128, 512]},
    },
    "double": {"args": "f32[256,128]", "reference": "double_ref", "atol": 0, "rtol": 0},
    "all_gather": {"args": "f32[512,128]", "reference": "all_gather_ref", "atol": 0, "rtol": 0},
}
