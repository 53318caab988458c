# Held-out kernel for jax-inspector (round six), vendored from:
#   https://github.com/sdh1014/pallas-kernel/blob/a8e38dc71169c974aa00f8e1acbe257ce0a516e2/tops/ops/gla/chunk.py
# (a fork of primatrix/pallas-kernel, "tops": JAX Pallas kernels for gated linear attention).
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
# Verbatim: chunk_gla_fwd_o_gk_pl_kernel, chunk_gla_fwd_o_gk_pl, chunk_gla_fwd_o_gk (the kernel,
# its launcher and its dispatch) and upstream's own reference chunk_gla_fwd_o_gk_ref. Ours,
# below the "ours" line: wrappers taking the arrays positionally (scale = K ** -0.5), INSPECT.
# Style: a (heads, chunks) grid of one chunk per step, K and V untiled (the (K, V) state block of
# the chunk whole, double-buffered), two HIGHEST-precision f32 matmuls ((BT, K) @ (K, V) and the
# masked (BT, BT) @ (BT, V)) summed into the output, vmem_limit_bytes = 32 MiB.
import functools

import jax
import jax.experimental.pallas as pl
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu


def chunk_gla_fwd_o_gk_pl_kernel(
    q_ref,
    v_ref,
    g_ref,
    h_ref,
    A_ref,
    o_ref,
    *,
    BT,
    scale,
    USE_EXP2,
):
    """Unified GLA forward O+GK Pallas kernel.

    Block specs deliver exactly one chunk's data per grid point.
    No varlen logic, no K/V tiling, no pl.ds needed.

    Grid: (H, total_NT) where total_NT = B * NT.
    Refs (after block spec indexing):
      q_ref: (1, 1, BT, K)   g_ref: (1, 1, BT, K)
      v_ref: (1, 1, BT, V)   A_ref: (1, 1, BT, BT)
      h_ref: (1, 1, K, V)    o_ref: (1, 1, BT, V)
    """
    b_q = q_ref[0, 0]  # (BT, K)
    b_g = g_ref[0, 0]  # (BT, K)
    b_v = v_ref[0, 0]  # (BT, V)
    b_h = h_ref[0, 0]  # (K, V)
    b_A = A_ref[0, 0]  # (BT, BT)

    # Inter-chunk: scale * (q * exp(g)) @ h
    b_g_f32 = b_g.astype(jnp.float32)
    if USE_EXP2:
        b_qg = (b_q * jnp.exp2(b_g_f32)).astype(b_q.dtype)
    else:
        b_qg = (b_q * jnp.exp(b_g_f32)).astype(b_q.dtype)
    b_o = jnp.dot(
        b_qg,
        b_h.astype(b_qg.dtype),
        precision=jax.lax.Precision.HIGHEST,
        preferred_element_type=jnp.float32,
    )
    b_o *= scale

    # Intra-chunk: tril(A) @ v
    m_s = jnp.arange(BT)[:, None] >= jnp.arange(BT)[None, :]
    b_A = jnp.where(m_s, b_A, 0.0).astype(b_A.dtype)
    b_o += jnp.dot(
        b_A,
        b_v,
        precision=jax.lax.Precision.HIGHEST,
        preferred_element_type=jnp.float32,
    )

    o_ref[0, 0] = b_o.astype(o_ref.dtype)


def chunk_gla_fwd_o_gk_pl(
    q: jax.Array,  # [B, T, H, K]
    v: jax.Array,  # [B, T, H, V]
    g: jax.Array,  # [B, T, H, K]
    A: jax.Array,  # [B, T, H, BT]
    h: jax.Array,  # [B, NT, H, K, V]
    scale: float,
    chunk_size: int,
    use_exp2: bool,
) -> jax.Array:
    """Unified launcher for chunk_gla_fwd_o_gk Pallas kernel.

    Pre-reshapes all inputs to (H, total_NT, ...) so the kernel is
    completely agnostic to batch/varlen structure.
    Works for both varlen (B=1, cu_seqlens aligned to BT) and non-varlen.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    BT = chunk_size
    NT = T // BT
    total_NT = B * NT

    # Reshape: [B, T, H, K] -> [B, NT, BT, H, K] -> [H, B*NT, BT, K]
    _q = q.reshape(B, NT, BT, H, K).transpose(3, 0, 1, 2, 4).reshape(H, total_NT, BT, K)
    _g = g.reshape(B, NT, BT, H, K).transpose(3, 0, 1, 2, 4).reshape(H, total_NT, BT, K)
    _v = v.reshape(B, NT, BT, H, V).transpose(3, 0, 1, 2, 4).reshape(H, total_NT, BT, V)
    _A = (
        A.reshape(B, NT, BT, H, BT)
        .transpose(3, 0, 1, 2, 4)
        .reshape(H, total_NT, BT, BT)
    )
    # h: [B, NT, H, K, V] -> [H, B*NT, K, V]
    _h = h.transpose(2, 0, 1, 3, 4).reshape(H, total_NT, K, V)

    # Block specs — grid = (H, total_NT)
    q_spec = pl.BlockSpec([1, 1, BT, K], index_map=lambda h, nt: (h, nt, 0, 0))
    g_spec = pl.BlockSpec([1, 1, BT, K], index_map=lambda h, nt: (h, nt, 0, 0))
    v_spec = pl.BlockSpec([1, 1, BT, V], index_map=lambda h, nt: (h, nt, 0, 0))
    A_spec = pl.BlockSpec([1, 1, BT, BT], index_map=lambda h, nt: (h, nt, 0, 0))
    h_spec = pl.BlockSpec([1, 1, K, V], index_map=lambda h, nt: (h, nt, 0, 0))

    o_shape = jax.ShapeDtypeStruct([H, total_NT, BT, V], v.dtype)
    o_spec = pl.BlockSpec([1, 1, BT, V], index_map=lambda h, nt: (h, nt, 0, 0))

    grid = (H, total_NT)
    o = pl.pallas_call(
        functools.partial(
            chunk_gla_fwd_o_gk_pl_kernel,
            BT=BT,
            scale=scale,
            USE_EXP2=use_exp2,
        ),
        grid=grid,
        out_shape=o_shape,
        in_specs=[q_spec, v_spec, g_spec, h_spec, A_spec],
        out_specs=o_spec,
        compiler_params=pltpu.CompilerParams(
            vmem_limit_bytes=32 * 1024 * 1024,
        ),
    )(_q, _v, _g, _h, _A)

    # Post-process: (H, total_NT, BT, V) -> (B, T, H, V)
    # total_NT = B * NT
    o = o.reshape(H, B, NT, BT, V)
    o = o.transpose(1, 0, 2, 3, 4)  # (B, H, NT, BT, V)
    o = o.reshape(B, H, NT * BT, V)  # (B, H, T, V)
    o = o.transpose(0, 2, 1, 3)  # (B, T, H, V)

    return o


def chunk_gla_fwd_o_gk(
    q: jax.Array,  # [B, T, H, K]
    v: jax.Array,  # [B, T, H, V]
    g: jax.Array,  # [B, T, H, K]
    A: jax.Array,  # [B, T, H, BT]
    h: jax.Array,  # [B, NT, H, K, V]
    scale: float,
    cu_seqlens: jax.Array | None = None,
    chunk_indices: jax.Array | None = None,
    chunk_size: int = 64,
    use_exp2: bool = False,
) -> jax.Array:
    """Dispatch chunk_gla_fwd_o_gk to the unified Pallas kernel.

    Both varlen and non-varlen take the same path — the launcher
    reshapes inputs so the kernel sees (H, total_NT, ...).
    """
    B, T, H, K = q.shape
    assert T % chunk_size == 0

    return chunk_gla_fwd_o_gk_pl(
        q,
        v,
        g,
        A,
        h,
        scale,
        chunk_size,
        use_exp2,
    )


def chunk_gla_fwd_o_gk_ref(
    q: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    A: jax.Array,
    h: jax.Array,
    scale: float,
    cu_seqlens_cpu: jax.Array | None = None,
    chunk_size: int = 64,
) -> jax.Array:
    """Combine inter-chunk and intra-chunk contributions to produce output.

    Args:
        q: [B, T, H, K] — queries (T must be a multiple of chunk_size)
        v: [B, T, H, V] — values
        gk: [B, T, H, K] — chunk-local cumsum of gates
        A: [B, T, H, BT] — intra-chunk attention matrix
        h: [B, NT, H, K, V] — hidden state at start of each chunk
        scale: scaling factor
        cu_seqlens: unused, kept for interface compatibility
        chunk_size: block size

    Returns:
        o: [B, T, H, V]
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk_size
    NT = B * T // C
    assert T % C == 0, "T must be a multiple of chunk_size for chunk_gla_fwd_o_gk_ref"
    assert (cu_seqlens_cpu is None) or (cu_seqlens_cpu % C == 0).all(), (
        "cu_seqlens must be multiples of chunk_size for chunk_fwd_h"
    )

    q = q.reshape(-1, C, H, K)
    v = v.reshape(-1, C, H, V)
    gk = gk.reshape(-1, C, H, K)
    h = h.reshape(-1, H, K, V)
    A = A.reshape(-1, C, H, C)

    qg = q * jnp.exp(gk)

    # Inter-chunk: o_inter = scale * (q_gated @ h)
    o_inter = scale * jnp.einsum("nchk,nhkv->nchv", qg, h)  # [C, K] @ [K, V] -> [C, V]

    causal_mask = jnp.tril(jnp.ones((C, C), dtype=jnp.bool_))[
        :, None, :
    ]  # (C, 1, C) → broadcasts to (NT, C, H, C)
    n_A = jnp.where(causal_mask, A, 0.0)

    # [C, C] @ [C, V] -> [C, V]
    # Intra-chunk: o_intra = A @ v, contract over j (key position within chunk)
    o_intra = jnp.einsum("nihj,njhv->nihv", n_A, v)

    o = (o_inter + o_intra).reshape(B, T, H, V)
    return o


# ----------------------------------------------------------------------------- ours


def chunk_gla_fwd_o(q, v, g, A, h, chunk_size=64, use_exp2=False):
    return chunk_gla_fwd_o_gk(q, v, g, A, h, q.shape[-1] ** -0.5, chunk_size=chunk_size,
                              use_exp2=use_exp2)


def chunk_gla_fwd_o_reference(q, v, g, A, h, chunk_size=64, use_exp2=False):
    assert not use_exp2  # upstream's reference has exp only
    with jax.default_matmul_precision("highest"):
        return chunk_gla_fwd_o_gk_ref(q, v, g, A, h, q.shape[-1] ** -0.5, chunk_size=chunk_size)


INSPECT = {
    "chunk_gla_fwd_o": {
        "args": "f32[1,256,2,128] f32[1,256,2,128] f32[1,256,2,128] f32[1,256,2,64] f32[1,4,2,128,128]",
        "reference": "chunk_gla_fwd_o_reference", "atol": 1e-3, "rtol": 1e-3,
        "params": {"chunk_size": [64], "use_exp2": [False]},
    },
}
