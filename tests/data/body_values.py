"""Kernels whose bodies hold matmul results and unrolled loops in VMEM, for the estimate's body
terms (inspector/jax_internals/body_dots.py): a matmul accumulated into a ref, a softmax over
a dot's scores, the scores of chunks in a loop unrolled with pl.loop, an unrolled fori_loop
without matmuls, values built in the output block they are stored into, values computed
element-wise, a concatenation, an f32 matmul at HIGHEST precision, softmaxes whose exponentials
the MXU sums, or the VPU for several heads in a Python loop, a softmax stored into a narrower
block, attention on rotated or only cast blocks, a Dense with an epilogue, and SwiGLU. Inputs (the first ones):
q f32[rows, 128], k f32[cols, 128]."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

_NT = (((1,), (1,)), ((), ()))


def _accumulate(q_ref, k_ref, o_ref, acc_ref):
    acc_ref[...] += jax.lax.dot_general(q_ref[...], k_ref[...], _NT, preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...]


def accumulated(q, k):
    """q @ k.T summed into a scratch accumulator: the dot's result streams into the ref."""
    rows, cols = q.shape[0], k.shape[0]
    return pl.pallas_call(
        _accumulate, out_shape=jax.ShapeDtypeStruct((rows, cols), jnp.float32),
        scratch_shapes=[pltpu.VMEM((rows, cols), jnp.float32)])(q, k)


def _softmax(q_ref, k_ref, o_ref):
    s = jax.lax.dot_general(q_ref[...], k_ref[...], _NT, preferred_element_type=jnp.float32)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    o_ref[...] = (p / jnp.sum(p, axis=-1, keepdims=True))[:, :128]


def softmax_scores(q, k):
    """softmax(q @ k.T), its first 128 columns: the whole score block is kept for the max."""
    return pl.pallas_call(_softmax, out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), jnp.float32))(q, k)


def _chunked(q_ref, k_ref, o_ref, *, chunk):
    o_ref[...] = jnp.zeros_like(o_ref)

    @pl.loop(0, k_ref.shape[0], step=chunk, unroll=True)
    def _(start):
        s = jax.lax.dot_general(q_ref[...], k_ref[pl.ds(start, chunk), :], _NT, preferred_element_type=jnp.float32)
        o_ref[...] = jnp.maximum(o_ref[...], jnp.max(s, axis=-1, keepdims=True) + s[:, :128])


def chunked_scores(q, k, chunk=512):
    """Running max over k in chunks of ``chunk`` rows, the loop unrolled (flash attention's
    block_k inside block_k_major): the chunks' scores can be live together."""
    return pl.pallas_call(functools.partial(_chunked, chunk=chunk),
                          out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), jnp.float32))(q, k)


def _top_rounds(x_ref, o_ref, *, rounds):
    def one(i, carry):
        scores, best = carry
        top = jnp.max(scores, axis=0, keepdims=True)
        return jnp.where(scores == top, -jnp.inf, scores), best + top

    _, best = jax.lax.fori_loop(0, rounds, one, (x_ref[...], jnp.zeros((1, x_ref.shape[1]), jnp.float32)),
                                unroll=True)
    o_ref[...] = jnp.broadcast_to(best, o_ref.shape)


def top_rounds(x, rounds=4):
    """``rounds`` rounds of take-the-column-max, an unrolled fori_loop carrying the whole block."""
    return pl.pallas_call(functools.partial(_top_rounds, rounds=rounds),
                          out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), jnp.float32))(x)


def _softmax_out(q_ref, k_ref, o_ref):
    s = jax.lax.dot_general(q_ref[...], k_ref[...], _NT, preferred_element_type=jnp.float32)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    o_ref[...] = p / jnp.sum(p, axis=-1, keepdims=True)


def softmax_out(q, k):
    """softmax(q @ k.T) written whole (PallasBench's qk-softmax): built in the output block."""
    return pl.pallas_call(_softmax_out, out_shape=jax.ShapeDtypeStruct((q.shape[0], k.shape[0]), jnp.float32))(q, k)


def _scaled(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def scaled(x):
    """x * 2 + 1, element-wise into the output block: built there, no temporary beside it."""
    return pl.pallas_call(_scaled, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _batched(q_ref, k_ref, v_ref, o_ref):
    s = jnp.matmul(q_ref[...], jnp.swapaxes(k_ref[...], 1, 2))  # (1, S, S): a 2-D dot, broadcast back
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    o_ref[...] = jnp.matmul(p / jnp.sum(p, axis=-1, keepdims=True), v_ref[...])


def batched_attention(q, k, v):
    """softmax(q @ k^T) @ v on (1, S, D) blocks (PallasBench's MHA), one head per grid step."""
    spec = pl.BlockSpec((1, q.shape[1], q.shape[2]), lambda h: (h, 0, 0))
    return pl.pallas_call(_batched, grid=(q.shape[0],), in_specs=[spec] * 3, out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(q.shape, jnp.float32))(q, k, v)


def _row_lse(x_ref, o_ref):
    z = x_ref[...] * 2.0
    e = jnp.exp(z - jnp.max(z, axis=-1, keepdims=True))
    o_ref[...] = jnp.broadcast_to(jnp.log(jnp.sum(e, axis=-1, keepdims=True)), o_ref.shape)


def row_logsumexp(x):
    """log(sum(exp(2x - max))) per row into a (rows, 128) block: full-size values computed
    element-wise, none stored whole (Levanter's cross-entropy does so with its logits)."""
    return pl.pallas_call(_row_lse, out_shape=jax.ShapeDtypeStruct((x.shape[0], 128), jnp.float32))(x)


def _stacked(x_ref, w_ref, o_ref):
    parts = [x_ref[...] * float(k + 1) for k in range(4)]
    o_ref[...] = jnp.dot(jnp.concatenate(parts, axis=0).astype(jnp.bfloat16), w_ref[...].astype(jnp.bfloat16),
                         preferred_element_type=jnp.float32)[:x_ref.shape[0]]


def stacked(x, w):
    """Four scaled copies of x concatenated (jaxite's Toeplitz matrix is built so) and cast for a
    matmul: the concatenation and its cast are the parts' vregs, not values of their own."""
    return pl.pallas_call(_stacked, out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32))(x, w)


def _highest(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...], precision=jax.lax.Precision.HIGHEST,
                         preferred_element_type=jnp.float32)


def highest_matmul(x, w):
    """x @ w in f32 at HIGHEST precision (tops' GLA kernels do so): bf16 passes over each operand's
    three bf16 parts."""
    return pl.pallas_call(_highest, out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32))(x, w)


def _mxu_sum(q_ref, k_ref, v_ref, o_ref):
    s = jax.lax.dot_general(q_ref[...], k_ref[...], _NT, preferred_element_type=jnp.float32)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True)).astype(jnp.bfloat16)
    ones = jnp.ones((v_ref.shape[0], 128), jnp.bfloat16)
    both = jnp.dot(p, jnp.concatenate([v_ref[...].astype(jnp.bfloat16), ones], axis=-1),
                   preferred_element_type=jnp.float32)
    o_ref[...] = both[:, :128] / both[:, 128:]


def mxu_sum(q, k, v):
    """softmax(q @ k^T) @ v with the exponentials summed by the MXU, a column of ones beside v
    (maxdiffusion's cross attention in "mxu" sum mode): one reduction, the max."""
    return pl.pallas_call(_mxu_sum, out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), jnp.float32))(q, k, v)


def _heads(q_ref, k_ref, v_ref, o_ref, *, heads):
    for h in range(heads):  # straight-line code: each head's scores, in one stretch
        cols = pl.ds(h * 128, 128)
        s = jax.lax.dot_general(q_ref[:, cols], k_ref[:, cols], _NT, preferred_element_type=jnp.float32)
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        o_ref[:, cols] = jnp.dot(p, v_ref[:, cols], preferred_element_type=jnp.float32) / jnp.sum(p, -1, keepdims=True)


def heads_softmax(q, k, v, heads=4):
    """Attention of ``heads`` 128-wide heads side by side, a Python loop over them, each softmax
    summed on the VPU (maxdiffusion's cross attention in "vpu" sum mode)."""
    return pl.pallas_call(functools.partial(_heads, heads=heads),
                          out_shape=jax.ShapeDtypeStruct(q.shape, jnp.float32))(q, k, v)


def _softmax_narrow(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def softmax_narrow(x):
    """A row softmax of bf16 rows computed in f32 and stored as bf16 (AMLeng's): the f32
    exponentials, summed before they are divided, have no room in the bf16 output block."""
    return pl.pallas_call(_softmax_narrow, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _rotated(q_ref, k_ref, v_ref, o_ref, *, rotate):
    q, k = q_ref[...].astype(jnp.float32), k_ref[...].astype(jnp.float32)
    if rotate:  # RoPE's rotate-half: a value the body computes, not a block cast
        q = q + jnp.concatenate([-q[:, 64:], q[:, :64]], axis=-1)
        k = k + jnp.concatenate([-k[:, 64:], k[:, :64]], axis=-1)
    s = jax.lax.dot_general(q, k, _NT, preferred_element_type=jnp.float32)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    o_ref[...] = jnp.dot(p, v_ref[...], preferred_element_type=jnp.float32) / jnp.sum(p, -1, keepdims=True)


def rotated_attention(q, k, v, rotate=True):
    """Attention over bf16 blocks cast to f32, q and k rotated first (pallasflash's fused RoPE) or
    not (maxtext's ragged attention casts only)."""
    return pl.pallas_call(functools.partial(_rotated, rotate=rotate),
                          out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), jnp.float32))(q, k, v)


def _taps(x_ref, w_ref, o_ref):
    x = x_ref[...]
    taps = [pltpu.roll(x, k, axis=0) for k in range(4)]
    o_ref[...] = jnp.sum(jnp.stack(taps, axis=0) * w_ref[...][:, None, :], axis=0)


def stacked_taps(x, w):
    """Four rolled copies of the block stacked, weighted and summed over the stack (xma's causal
    conv): jnp.stack, a primitive of its own in jax 0.10, is its parts as a concatenation is."""
    return pl.pallas_call(_taps, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, w)


def _looped(q_ref, k_ref, v_ref, o_ref, *, chunk):
    q = q_ref[...]

    def step(i, carry):
        acc, m, l = carry
        s = jax.lax.dot_general(q, k_ref[pl.ds(i * chunk, chunk), :], _NT, preferred_element_type=jnp.float32)
        m_new = jnp.maximum(m, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m - m_new)
        return (acc * alpha + jnp.dot(p, v_ref[pl.ds(i * chunk, chunk), :], preferred_element_type=jnp.float32),
                m_new, l * alpha + jnp.sum(p, axis=-1, keepdims=True))

    rows = q.shape[0]
    init = (jnp.zeros((rows, 128), jnp.float32), jnp.full((rows, 1), -jnp.inf), jnp.zeros((rows, 1), jnp.float32))
    acc, _, l = jax.lax.fori_loop(0, k_ref.shape[0] // chunk, step, init)
    o_ref[...] = acc / l


def looped_attention(q, k, v, chunk=256):
    """Online softmax in a fori_loop over k in chunks (Pallas-Unbound's flash attention): an f32
    (rows, 128) accumulator and two (rows, 1) statistics carried from step to step."""
    return pl.pallas_call(functools.partial(_looped, chunk=chunk),
                          out_shape=jax.ShapeDtypeStruct((q.shape[0], 128), jnp.float32))(q, k, v)


def _dense(x_ref, w_ref, o_ref, *, clip):
    y = jnp.dot(x_ref[...], w_ref[...].T, preferred_element_type=jnp.float32)
    y = y * jax.nn.sigmoid(y)
    o_ref[...] = jnp.clip(y, -1.0, 1.0) if clip else y


def dense_epilogue(x, w, clip=True):
    """x @ w.T through SiLU and jnp.clip (a jitted helper) into the output block (MaxKernel's Dense
    kernels, held out round ten): the weight's transpose feeds only the matmul, the result is
    carried element-wise into a store of its size."""
    return pl.pallas_call(functools.partial(_dense, clip=clip),
                          out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[0]), jnp.float32))(x, w)


def _gated(x_ref, w1_ref, w3_ref, o_ref):
    gate = jnp.dot(x_ref[...], w1_ref[...], preferred_element_type=jnp.float32)
    up = jnp.dot(x_ref[...], w3_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = (jax.nn.silu(gate) * up).astype(o_ref.dtype)


def gated(x, w1, w3):
    """SwiGLU: silu(x @ w1) * (x @ w3) into the output block; the two results meet in the product."""
    return pl.pallas_call(_gated, out_shape=jax.ShapeDtypeStruct((x.shape[0], w1.shape[1]), x.dtype))(x, w1, w3)


def _normalised(x_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    o_ref[...] = (x - mean) * jax.lax.rsqrt(var + 1e-5)


def normalised(x, block_rows=1024):
    """LayerNorm without its scale over 64-wide rows (flax's, held out round eight): the (rows, 1)
    mean and variance take rows / 8 vregs each, more than any (rows, 64) value's elements."""
    return pl.pallas_call(_normalised, grid=(x.shape[0] // block_rows,),
                          in_specs=[pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


INSPECT = {
    "accumulated": {"args": "f32[512,128] f32[1024,128]"},
    "softmax_scores": {"args": "f32[512,128] f32[1024,128]"},
    "chunked_scores": {"args": "f32[512,128] f32[2048,128]"},
    "top_rounds": {"args": "f32[512,1024]"},
    "softmax_out": {"args": "f32[512,128] f32[1024,128]"},
    "scaled": {"args": "f32[512,1024]"},
    "batched_attention": {"args": "f32[2,1024,128] f32[2,1024,128] f32[2,1024,128]"},
    "row_logsumexp": {"args": "f32[512,2048]"},
    "stacked": {"args": "f32[256,1024] f32[1024,128]"},
    "highest_matmul": {"args": "f32[512,1024] f32[1024,1024]"},
    "mxu_sum": {"args": "f32[512,128] f32[1024,128] f32[1024,128]"},
    "heads_softmax": {"args": "f32[512,512] f32[1024,512] f32[1024,512]"},
    "softmax_narrow": {"args": "bf16[512,2048]"},
    "looped_attention": {"args": "f32[2048,128] f32[1024,128] f32[1024,128]"},
    "stacked_taps": {"args": "f32[512,1024] f32[4,1024]"},
    "dense_epilogue": {"args": "f32[512,256] f32[2048,256]", "params": {"clip": [True, False]}},
    "gated": {"args": "f32[512,256] f32[256,2048] f32[256,2048]"},
    "normalised": {"args": "f32[4096,64]"},
    "rotated_attention": {"args": "bf16[2048,128] bf16[512,128] f32[512,128]", "params": {"rotate": [True, False]}},
}
