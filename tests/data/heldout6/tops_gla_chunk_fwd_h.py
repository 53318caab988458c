# Held-out kernel for jax-inspector (round six), vendored from:
#   https://github.com/sdh1014/pallas-kernel/blob/a8e38dc71169c974aa00f8e1acbe257ce0a516e2/tops/ops/common/chunk_h.py
# (a fork of primatrix/pallas-kernel, "tops": JAX Pallas kernels for gated linear attention),
# and `exp` from the same commit's tops/ops/utils.py (inlined below the imports in place of the
# package import, marked "inlined").
# Licence: Apache License 2.0 (the repository's LICENSE; the file has no header of its own).
# Copyright the tops authors (primatrix; upstream states no year or name)
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# Verbatim from build_chunk_map to the end of chunk_fwd_h_kernel (the Pallas launcher). Ours,
# below the "ours" line: a wrapper taking k, v (and gk) positionally, the pure-jnp reference
# (the chunk recurrence), INSPECT.
# Style: a (heads, K/128, V/128) grid whose input blocks hold the whole flattened sequence
# (1, B*T, 128) of each head, a lax.fori_loop over its chunks with pl.dslice loads from the refs,
# lax.cond stores of the running (128, 128) f32 state into an output block holding every split's
# state (NS, 1, 128, 128) at once, SMEM operands (cu_seqlens, the chunk -> sequence map) from
# in_specs, None in_specs/out_specs for the optional operands, vmem_limit_bytes = 32 MiB.
import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import functools


def exp(x):  # inlined: tops/ops/utils.py
    return jnp.exp(x.astype(jnp.float32))


def build_chunk_map(cu_seqlens, T_sum, BT):
    NT = T_sum // BT
    chunk_ids = lax.iota(jnp.int32, NT)
    chunk_pos = chunk_ids * BT
    seq_idx = jnp.searchsorted(cu_seqlens[1:], chunk_pos, side="right")
    return seq_idx


def _chunk_fwd_h_kernel(
    k_ref,  # [1, T_sum, BK]
    v_ref,  # [1, T_sum, BV]
    h0_ref,  # [N, 1, BK, BV]
    gk_ref,  # [1, T_sum, BK]
    g_gamma,  # [H]
    cu_seqlens_ref,  # [num_seq+1]
    chunk_to_seq,  # [T_sum/BT]
    h_ref,  # [NS, 1, BK, BV]
    ht_ref,  # [N, 1, BK , BV]
    *,
    BT,
    BS,
):
    T_sum, BK = k_ref.shape[1], k_ref.shape[2]
    BV = v_ref.shape[2]
    NT = pl.cdiv(T_sum, BT)
    NTS = BS // BT
    b_h_start = jnp.zeros((BK, BV), dtype=jnp.float32)
    b_h = jnp.zeros((BK, BV), dtype=jnp.float32)
    seq_idx = jnp.array(0, dtype=jnp.int32)
    i_in_seq = jnp.array(0, dtype=jnp.int32)

    if g_gamma is not None:
        head_index = pl.program_id(0)
        b_g = g_gamma[head_index] * (jnp.arange(0, BT) + 1)

    def body(i_t, carry):
        b_h, seq_idx, i_in_seq = carry
        t0 = i_t * BT

        seq_idx = chunk_to_seq[i_t]

        bos = cu_seqlens_ref[seq_idx]
        eos = cu_seqlens_ref[seq_idx + 1]

        # reset h state
        def reset_state(_):
            nonlocal i_in_seq
            i_in_seq = 0
            if h0_ref is not None:
                return h0_ref[seq_idx, 0].astype(jnp.float32)
            else:
                return b_h_start

        b_h = lax.cond(
            t0 == bos,
            reset_state,
            lambda _: b_h,
            operand=None,
        )
        # store intermediate state
        i_s = i_t // NTS

        def store_fn(_):
            h_ref[i_s, 0] = b_h.astype(h_ref.dtype)
            return None

        lax.cond((i_t % NTS) == 0, store_fn, lambda _: None, operand=None)

        k = k_ref[(0, pl.dslice(t0, BT), slice(None))]  # [BT,BK]
        v = v_ref[(0, pl.dslice(t0, BT), slice(None))]  # [BT,BV]

        if g_gamma is not None:
            b_g_last = g_gamma[head_index] * jnp.minimum(BT, eos - bos - i_in_seq * BT)
            b_h *= exp(b_g_last)
            v = (v * exp(b_g_last - b_g)[:, None]).astype(v.dtype)

        if gk_ref is not None:
            gk = gk_ref[(0, pl.dslice(t0, BT), slice(None))]  # [BT,BK]
            g_last = gk[BT - 1, :]
            decay = exp(g_last)
            b_h = b_h * decay[:, None]  # [BK, BV] * [BK,1]
            k = (k * exp(g_last[None, :] - gk)).astype(k.dtype)

        # state update
        b_h = b_h + jax.lax.dot(
            k.astype(jnp.float32).T,
            v.astype(jnp.float32),
            precision=lax.Precision.HIGHEST,
            preferred_element_type=jnp.float32,
        )

        is_last_chunk = t0 + BT >= eos

        def write_final(_):
            if ht_ref is not None:
                ht_ref[seq_idx, 0] = b_h.astype(ht_ref.dtype)
            return None

        lax.cond(is_last_chunk, write_final, lambda _: None, operand=None)
        i_in_seq += 1
        return (b_h, seq_idx, i_in_seq)

    b_h, seq_idx, i_in_seq = lax.fori_loop(0, NT, body, (b_h, seq_idx, i_in_seq))


def check_chunk_fwd(x):
    assert x is None, "x should be None."


# note: The precision difference between this kernel on the TPU and FLA on the GPU is 5e-2.
@functools.partial(
    jax.jit,
    static_argnames=[
        "output_final_state",
        "chunk_size",
        "split_size",
        "states_in_fp32",
        "interpret",
    ],
)
def chunk_fwd_h_kernel(
    k: jax.Array,  # [B,T,H,K]
    v: jax.Array,  # [B,T,H,V]
    g: jax.Array | None = None,  # [B,T,H]
    g_gamma: jax.Array | None = None,  # (H,)
    gk: jax.Array | None = None,  # [B,T,H,K]
    gv: jax.Array | None = None,  # [B,T,H,V]
    h0: jax.Array | None = None,  # [N,H,K,V]
    output_final_state: bool = False,
    cu_seqlens: jax.Array | None = None,
    chunk_size: int = 128,
    split_size: int | None = None,
    states_in_fp32: bool = False,
    interpret: bool = False,
):
    check_chunk_fwd(g)
    check_chunk_fwd(gv)
    # todo: tune bk and bv for bast performance
    BK = 128
    BV = 128
    B, T, H, K, V = *k.shape, v.shape[-1]
    assert K % 128 == 0, "K % 128 must equal to 0."
    assert V % 128 == 0, "V % 128 must equal to 0."
    assert T % chunk_size == 0, "T mod chunk_size must equal to 0."

    BT = chunk_size
    BS = BT if split_size is None else split_size
    assert BS % BT == 0, (
        f"The `split_size` (got {BS}) must be a multiple of `chunk_size` {BT}"
    )
    # N: the actual number of sequences in the batch with either equal or variable lengths
    if cu_seqlens is None:
        cu_seqlens = jnp.arange(B * T + 1, step=T)
    T_sum = B * T
    chunk_to_seq = build_chunk_map(cu_seqlens=cu_seqlens, T_sum=T_sum, BT=BT)

    N, NS = (
        len(cu_seqlens) - 1,
        T_sum // BS,
    )  # split_offsets[-1] # NS number of chunk_size

    k = jnp.reshape(k, (T_sum, H, K))
    v = jnp.reshape(v, (T_sum, H, V))

    k = jnp.transpose(k, (1, 0, 2))  # (H,B*T,K)
    v = jnp.transpose(v, (1, 0, 2))  # (H,B*T,V)
    if gk is not None:
        gk = jnp.reshape(gk, (T_sum, H, K))
        gk = jnp.transpose(gk, (1, 0, 2))  # (H,B*T,K)

    grid = (H, pl.cdiv(K, BK), pl.cdiv(V, BV))

    def k_index_map(head_index, k_index, _):
        return head_index, 0, k_index

    def gk_index_map(head_index, k_index, _):
        return head_index, 0, k_index

    def v_index_map(head_index, _, v_index):
        return head_index, 0, v_index

    def h0_index_map(head_index, k_index, v_index):
        return 0, head_index, k_index, v_index

    def h_index_map(head_index, k_index, v_index):
        return 0, head_index, k_index, v_index

    def ht_index_map(head_index, k_index, v_index):
        return 0, head_index, k_index, v_index

    out_shape = [
        jax.ShapeDtypeStruct(
            shape=(NS, H, K, V), dtype=k.dtype if not states_in_fp32 else jnp.float32
        )
    ]
    out_specs = [pl.BlockSpec((NS, 1, BK, BV), ht_index_map)]
    if output_final_state:
        out_shape.append(jax.ShapeDtypeStruct(shape=(N, H, K, V), dtype=jnp.float32))
        out_specs.append(pl.BlockSpec((N, 1, BK, BV), h_index_map))
    else:
        out_shape.append(None)
        out_specs.append(None)

    in_specs = [
        pl.BlockSpec((1, T_sum, BK), k_index_map),
        pl.BlockSpec((1, T_sum, BV), v_index_map),
    ]
    if h0 is not None:
        in_specs.append(pl.BlockSpec((N, 1, BK, BV), h0_index_map))
    else:
        in_specs.append(None)
    if gk is not None:
        in_specs.append(pl.BlockSpec((1, T_sum, BK), gk_index_map))
    else:
        in_specs.append(None)

    if g_gamma is not None:
        in_specs.append(pl.BlockSpec(memory_space=pltpu.SMEM))
    else:
        in_specs.append(None)

    in_specs.append(pl.BlockSpec(memory_space=pltpu.SMEM))
    in_specs.append(pl.BlockSpec(memory_space=pltpu.SMEM))
    kernel = functools.partial(
        _chunk_fwd_h_kernel,
        BT=BT,
        BS=BS,
    )
    h, ht = pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=grid,
            in_specs=in_specs,
            out_specs=out_specs,
        ),
        out_shape=out_shape,
        interpret=interpret,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=(
                "parallel",
                "arbitrary",
                "arbitrary",
            ),
            vmem_limit_bytes=32 * 1024 * 1024,
        ),
    )(k, v, h0, gk, g_gamma, cu_seqlens, chunk_to_seq)
    if output_final_state:
        return h, ht
    return h, None


# ----------------------------------------------------------------------------- ours


def chunk_fwd_h(k, v, gk=None, chunk_size=128, split_size=None, states_in_fp32=False,
                output_final_state=False):
    return chunk_fwd_h_kernel(k, v, gk=gk, chunk_size=chunk_size, split_size=split_size,
                              states_in_fp32=states_in_fp32, output_final_state=output_final_state)


def chunk_fwd_h_reference(k, v, gk=None, chunk_size=128, split_size=None, states_in_fp32=False,
                          output_final_state=False):
    """The state at the start of every split of chunk_size-token chunks: h <- h * exp(gk_last) +
    (k * exp(gk_last - gk))^T v per chunk, one sequence per batch row."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    BS = split_size or chunk_size
    kf = k.astype(jnp.float32).reshape(B, T // chunk_size, chunk_size, H, K)
    vf = v.astype(jnp.float32).reshape(B, T // chunk_size, chunk_size, H, V)
    if gk is not None:
        g = gk.astype(jnp.float32).reshape(B, T // chunk_size, chunk_size, H, K)
    h = jnp.zeros((B, H, K, V), jnp.float32)
    states = []
    for c in range(T // chunk_size):
        if (c * chunk_size) % BS == 0:
            states.append(h)
        kc = kf[:, c]
        if gk is not None:
            last = g[:, c, -1]  # [B, H, K]
            h = h * jnp.exp(last)[..., None]
            kc = kc * jnp.exp(last[:, None] - g[:, c])
        h = h + jnp.einsum("bthk,bthv->bhkv", kc, vf[:, c], precision=lax.Precision.HIGHEST)
    hs = jnp.stack(states, axis=1).reshape(B * len(states), H, K, V)
    hs = hs.astype(jnp.float32 if states_in_fp32 else k.dtype)
    return (hs, h) if output_final_state else (hs, None)


INSPECT = {
    "chunk_fwd_h": {
        "args": "f32[2,512,2,128] f32[2,512,2,128]", "reference": "chunk_fwd_h_reference",
        "atol": 2e-3, "rtol": 2e-3,
        "params": {"chunk_size": [128, 64, 256], "split_size": [None, 256],
                   "output_final_state": [False, True]},
    },
}
