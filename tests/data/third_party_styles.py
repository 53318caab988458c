"""Kernels written the way third-party TPU kernels are (our own code, in the styles of axlearn,
vllm's tpu-inference and the online-softmax / linear-attention kernels people publish): values
computed at trace time under jax.ensure_compile_time_eval, a grid sized at run time, DMAs sized
at run time, packed dtypes in 8-row blocks, a streamed log-sum-exp whose weight block never
moves, and linear attention over whole-sequence chunks with a fori_loop."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


# --- a block-sparse map built at trace time (axlearn's style) -----------------------------------

def _sparse_double(map_ref, x_ref, o_ref):
    keep = map_ref[pl.program_id(0)] > 0
    o_ref[...] = jnp.where(keep, x_ref[...] * 2.0, 0.0)


def block_sparse_map(x, block=128):
    """x f32[n*block, 128]: blocks of a lower-triangular map doubled; the map is computed eagerly
    in the wrapper (jax.ensure_compile_time_eval), so it is a constant of the program."""
    n = x.shape[0] // block
    with jax.ensure_compile_time_eval():
        mask = jnp.asarray(np.tril(np.ones((n, n), np.int32)))
        per_row = jnp.sum(mask, axis=1).astype(jnp.int32)
    return pl.pallas_call(
        _sparse_double,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(n,),
            in_specs=[pl.BlockSpec((block, 128), lambda i, m: (i, 0))],
            out_specs=pl.BlockSpec((block, 128), lambda i, m: (i, 0))),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(per_row, x)


def block_sparse_map_ref(x, block=128):
    return x * 2.0


# --- decode with a run-time grid and run-time-sized DMAs (tpu-inference's style) ----------------

def _decode_kernel(x_hbm, bias_hbm, idx_smem, dist_smem, state_hbm, o_hbm, state_out, buf, sems):
    del x_hbm, bias_hbm, o_hbm, state_hbm  # aliased: x is o, state is state_out; bias absent (None)
    n = dist_smem[0]

    @pl.loop(0, n)
    def _(t):
        slot = idx_smem[t]
        load = pltpu.make_async_copy(state_out.at[pl.ds(slot, 1)], buf.at[pl.ds(0, 1)], sems.at[0])
        load.start()
        load.wait()
        buf[0] = buf[0] * 0.5
        store = pltpu.make_async_copy(buf.at[pl.ds(0, 1)], state_out.at[pl.ds(slot, 1)], sems.at[1])
        store.start()
        store.wait()

    # every live slot written back at once: a copy whose size is known only at run time
    rows = jnp.minimum(n, buf.shape[0])
    flush = pltpu.make_async_copy(buf.at[pl.ds(0, rows)], buf.at[pl.ds(0, rows)], sems.at[0])
    flush.start()
    flush.wait()


def decode_traced_grid(x, state, idx, dist):
    """x f32[T, 128] (aliased to the first output), state f32[S, H, 128, 128] (aliased to the
    second), idx i32[T] state slots, dist i32[3] (decode end first). The grid is one step when
    there is anything to decode, none otherwise; an absent optional operand passed as None with
    a None spec, as kernels with optional gates do."""
    anys = pl.BlockSpec(memory_space=pl.ANY)
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    grid_dim = jnp.where(dist[0] > 0, 1, 0)
    return pl.pallas_call(
        _decode_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(grid_dim,),
            in_specs=[anys, None, smem, smem, anys],
            out_specs=[anys, anys],
            scratch_shapes=[pltpu.VMEM((2,) + state.shape[1:], state.dtype), pltpu.SemaphoreType.DMA((2,))]),
        input_output_aliases={0: 0, 3: 1},
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(state.shape, state.dtype)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=pltpu.get_tpu_info().vmem_capacity_bytes),
        name="decode_traced_grid")(x, None, idx, dist, state)


decode_traced_grid_abstract = decode_traced_grid


def _add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def wide_traced_grid(x, end):
    """x f32[2048, 1024], end i32[1]: one (2048, 1024) block (8 MiB) per step over a grid of
    jnp.where(end > 0, 1, 0) steps. libtpu cannot know the grid is one step: it double-buffers."""
    return pl.pallas_call(
        _add_one, grid=(jnp.where(end[0] > 0, 1, 0),),
        in_specs=[pl.BlockSpec((2048, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((2048, 1024), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


# --- packed dtypes in 8-row blocks --------------------------------------------------------------

def _scale(x_ref, o_ref):
    o_ref[...] = (x_ref[...].astype(jnp.float32) * 2.0).astype(o_ref.dtype)


def rows8(x):
    """(8, 128) blocks of whatever dtype x has: libtpu compiles bf16 on every chip, refuses int8."""
    return pl.pallas_call(
        _scale, grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


rows8_bf16 = rows8_int8 = rows8


def rows8_interpreted(x):
    """The same int8 blocks with interpret=True, as test code writes it: Mosaic never sees them."""
    return pl.pallas_call(
        _scale, grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


# --- a streamed log-sum-exp over vocabulary tiles (online-softmax log-probs style) --------------

def _lse_kernel(x_ref, w_ref, max_ref, sum_ref, m_s, l_s):
    v = pl.program_id(1)

    @pl.when(v == 0)
    def _():
        m_s[...] = jnp.full(m_s.shape, -1e30, jnp.float32)
        l_s[...] = jnp.zeros(l_s.shape, jnp.float32)

    logits = jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    m_new = jnp.maximum(m_s[...], logits.max(axis=-1, keepdims=True))
    l_s[...] = jnp.exp(m_s[...] - m_new) * l_s[...] + jnp.sum(jnp.exp(logits - m_new), axis=-1, keepdims=True)
    m_s[...] = m_new

    @pl.when(v == pl.num_programs(1) - 1)
    def _():
        max_ref[...] = m_s[...]
        sum_ref[...] = l_s[...]


def streaming_lse(x, w, tile_s=128, tile_v=8192):
    """x f32[T, D] hidden states, w f32[V, D] the unembedding: per token the running max and sum
    of exp of x @ w.T, vocabulary tile by tile (the logits never reach HBM); (tile_s, 1) outputs.
    With V == tile_v the weight's block is read by the vocabulary axis alone, of one step."""
    T, D = x.shape
    narrow = pl.BlockSpec((tile_s, 1), lambda t, v: (t, 0))
    return pl.pallas_call(
        _lse_kernel, grid=(T // tile_s, w.shape[0] // tile_v),
        in_specs=[pl.BlockSpec((tile_s, D), lambda t, v: (t, 0)), pl.BlockSpec((tile_v, D), lambda t, v: (v, 0))],
        out_specs=[narrow, narrow],
        out_shape=[jax.ShapeDtypeStruct((T, 1), jnp.float32)] * 2,
        scratch_shapes=[pltpu.VMEM((tile_s, 1), jnp.float32)] * 2,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")))(x, w)


def streaming_lse_ref(x, w, tile_s=128, tile_v=8192):
    logits = x @ w.T
    m = logits.max(axis=-1, keepdims=True)
    return m, jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True)


# --- linear attention over whole-sequence chunks with a fori_loop --------------------------------

def linear_attention(q, k, v, chunk=4096, sub=128, semantics="parallel"):
    """q, k, v bf16[BH, T, D]: causal linear attention, ``chunk`` rows per grid step, a fori_loop
    over sub-chunks carrying the (D, D) state in VMEM scratch."""
    BH, T, D = q.shape

    def kernel(q_ref, k_ref, v_ref, o_ref, s_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            s_ref[...] = jnp.zeros(s_ref.shape, jnp.float32)

        def body(c, carry):
            rows = pl.ds(pl.multiple_of(c * sub, sub), sub)
            qc, kc, vc = q_ref[rows, :], k_ref[rows, :], v_ref[rows, :]
            scores = jnp.dot(qc, kc.T, preferred_element_type=jnp.float32)
            causal = jax.lax.broadcasted_iota(jnp.int32, (sub, sub), 0) >= jax.lax.broadcasted_iota(jnp.int32, (sub, sub), 1)
            intra = jnp.dot(jnp.where(causal, scores, 0.0).astype(vc.dtype), vc, preferred_element_type=jnp.float32)
            inter = jnp.dot(qc.astype(jnp.float32), s_ref[...], preferred_element_type=jnp.float32)
            o_ref[rows, :] = (intra + inter).astype(o_ref.dtype)
            s_ref[...] += jnp.dot(kc.T.astype(jnp.float32), vc.astype(jnp.float32), preferred_element_type=jnp.float32)
            return carry

        jax.lax.fori_loop(0, chunk // sub, body, 0)

    spec = pl.BlockSpec((None, chunk, D), lambda b, t: (b, t, 0))
    return pl.pallas_call(
        kernel, grid=(BH, T // chunk), in_specs=[spec] * 3, out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), scratch_shapes=[pltpu.VMEM((D, D), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics, "arbitrary")))(q, k, v)


def linear_attention_ref(q, k, v, chunk=4096, sub=128, semantics="parallel"):
    q32, k32, v32 = (a.astype(jnp.float32) for a in (q, k, v))
    scores = jnp.einsum("btd,bsd->bts", q32, k32)
    causal = jnp.tril(jnp.ones(scores.shape[-2:], bool))
    return jnp.einsum("bts,bsd->btd", jnp.where(causal, scores, 0.0), v32).astype(q.dtype)


linear_attention_long = linear_attention


def _decode_args():
    return (jnp.ones((8, 128), jnp.float32), jnp.ones((4, 8, 128, 128), jnp.float32),
            jnp.arange(8, dtype=jnp.int32) % 4, jnp.array([2, 3, 4], jnp.int32))


INSPECT = {
    "block_sparse_map": {"args": "f32[512,128]", "reference": "block_sparse_map_ref"},
    "decode_traced_grid": {"args": _decode_args},
    "decode_traced_grid_abstract": {"args": "f32[8,128] f32[4,8,128,128] s32[8] s32[3]"},
    "wide_traced_grid": {"args": lambda: (jnp.ones((2048, 1024), jnp.float32), jnp.array([3], jnp.int32))},
    "rows8_bf16": {"args": "bf16[64,128]"},
    "rows8_int8": {"args": "s8[64,128]"},
    "rows8_interpreted": {"args": "s8[64,128]"},
    "streaming_lse": {"args": "f32[1024,256] f32[8192,256]", "reference": "streaming_lse_ref", "atol": 1e-3,
                      "rtol": 1e-3, "params": {"tile_v": [8192, 4096, 2048]}},
    "linear_attention": {"args": "bf16[2,4096,128] bf16[2,4096,128] bf16[2,4096,128]",
                         "reference": "linear_attention_ref", "atol": 0.5, "rtol": 0.05,
                         "params": {"chunk": [4096, 2048], "semantics": ["parallel", "arbitrary"]}},
    "linear_attention_long": {"args": "bf16[2,16384,128] bf16[2,16384,128] bf16[2,16384,128]",
                              "params": {"chunk": [16384, 8192]}},
}
