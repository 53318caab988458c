# Held-out kernel for jax-inspector (round nine), vendored from:
#   https://github.com/open-lm-engine/accelerated-model-architectures/blob/384ed0a7bd82ced1f40609603dd541cac5416844/xma/layers_jax/linear_attention/pallas_implementation/forward.py
# (last changed upstream in 88fd7667223d59b5752e5545327380645d07b3ab; ceil_divide from xma/math.py).
# Licence: Apache License 2.0 (the repository's LICENSE; the file's own header names the holder).
# Copyright (c) 2026, Mayank Mishra
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
# Verbatim: _linear_attention_forward_kernel and _linear_attention_forward_core. Edits: the
# relative import of ceil_divide replaced by its two-line definition (xma/math.py). Ours, below
# the "ours" line: a wrapper taking q, k, v positionally and the blocks as keywords (no initial
# state, the final state returned), a reference, INSPECT.
# Style: chunked causal linear attention: a (batch, value blocks, sequence blocks) grid, the
# last "arbitrary"; (BLOCK_SIZE_S, heads, head_dim) q/k/v/y blocks with the batch dim squeezed
# (None); the running state (heads, K, BLOCK_SIZE_V) in an f32 VMEM scratch; the body transposes
# each block to heads-major and runs a Python loop over the heads (unrolled at trace time), per
# head a (S, S) causal q.k^T in f32 cast back to the input dtype, two matmuls into y and one
# k^T.v into the state; the final state as a second f32 output whose block never moves.
# disable_bounds_checks, no vmem_limit_bytes.
from functools import partial

import jax
import jax.experimental.pallas as pl
import jax.experimental.pallas.tpu as pltpu
import jax.numpy as jnp


def ceil_divide(x: int, y: int) -> int:
    return (x + y - 1) // y


def _linear_attention_forward_kernel(
    q_ref,
    k_ref,
    v_ref,
    h0_ref,
    y_ref,
    ht_ref,
    h_scratch,
    attention_multiplier: float,
    BLOCK_SIZE_S: int,
    N: int,
    Gq: int,
    Gk: int,
    Gv: int,
) -> None:
    @pl.when(pl.program_id(2) == 0)
    def _():
        if h0_ref is None:
            h_scratch[...] = jnp.zeros_like(h_scratch)
        else:
            h_scratch[...] = h0_ref[...].astype(jnp.float32)

    dtype = q_ref.dtype

    q_ = q_ref[...].transpose(1, 0, 2)
    k_ = k_ref[...].transpose(1, 0, 2)
    v_ = v_ref[...].transpose(1, 0, 2)

    row = jax.lax.broadcasted_iota(jnp.int32, (BLOCK_SIZE_S, BLOCK_SIZE_S), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (BLOCK_SIZE_S, BLOCK_SIZE_S), 1)
    causal_mask = row >= col

    for n in range(N):
        q = q_[n // Gq].astype(dtype)
        k = k_[n // Gk].astype(dtype)
        v = v_[n // Gv].astype(dtype)
        h = h_scratch[n]

        qk = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        qk = jnp.where(causal_mask, qk, 0).astype(dtype)

        y = jnp.dot(qk, v, preferred_element_type=jnp.float32)
        y += jnp.dot(q, h.astype(dtype), preferred_element_type=jnp.float32)
        y *= attention_multiplier

        y_ref[:, n, :] = y.astype(y_ref.dtype)

        h += jax.lax.dot_general(k, v, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)
        h_scratch[n] = h

        if ht_ref is not None:
            ht_ref[n] = h.astype(ht_ref.dtype)


@partial(jax.jit, static_argnames=("attention_multiplier", "BLOCK_SIZE_S", "BLOCK_SIZE_V", "output_state"))
def _linear_attention_forward_core(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    h0: jax.Array | None,
    attention_multiplier: float,
    output_state: bool,
    BLOCK_SIZE_S: int,
    BLOCK_SIZE_V: int,
) -> tuple[jax.Array, jax.Array | None]:
    B, S, Nq, K = q.shape
    Nk = k.shape[2]
    Nv = v.shape[2]
    V = v.shape[-1]

    N = max(Nq, Nk, Nv)
    Gq = N // Nq
    Gk = N // Nk
    Gv = N // Nv

    assert S % BLOCK_SIZE_S == 0
    assert V % BLOCK_SIZE_V == 0

    h_spec = pl.BlockSpec(
        block_shape=(None, N, K, BLOCK_SIZE_V),
        index_map=lambda BLOCK_ID_B, BLOCK_ID_V, _: (BLOCK_ID_B, 0, 0, BLOCK_ID_V),
    )

    kernel = pl.pallas_call(
        partial(
            _linear_attention_forward_kernel,
            attention_multiplier=attention_multiplier,
            BLOCK_SIZE_S=BLOCK_SIZE_S,
            N=N,
            Gq=Gq,
            Gk=Gk,
            Gv=Gv,
        ),
        out_shape=(
            jax.ShapeDtypeStruct(shape=(B, S, N, V), dtype=q.dtype),
            jax.ShapeDtypeStruct(shape=(B, N, K, V), dtype=jnp.float32) if output_state else None,
        ),
        grid=(B, ceil_divide(V, BLOCK_SIZE_V), ceil_divide(S, BLOCK_SIZE_S)),
        in_specs=(
            pl.BlockSpec(
                block_shape=(None, BLOCK_SIZE_S, Nq, K),
                index_map=lambda BLOCK_ID_B, _, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0, 0),
            ),
            pl.BlockSpec(
                block_shape=(None, BLOCK_SIZE_S, Nk, K),
                index_map=lambda BLOCK_ID_B, _, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0, 0),
            ),
            pl.BlockSpec(
                block_shape=(None, BLOCK_SIZE_S, Nv, BLOCK_SIZE_V),
                index_map=lambda BLOCK_ID_B, BLOCK_ID_V, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0, BLOCK_ID_V),
            ),
            None if h0 is None else h_spec,
        ),
        out_specs=(
            pl.BlockSpec(
                block_shape=(None, BLOCK_SIZE_S, N, BLOCK_SIZE_V),
                index_map=lambda BLOCK_ID_B, BLOCK_ID_V, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0, BLOCK_ID_V),
            ),
            h_spec if output_state else None,
        ),
        scratch_shapes=[pltpu.VMEM((N, K, BLOCK_SIZE_V), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            disable_bounds_checks=True, dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )

    y, ht = kernel(q, k, v, h0)

    return y, ht


# ----------------------------------------------------------------------------- ours


def xma_linear_attention(q, k, v, block_s=128, block_v=128):
    return _linear_attention_forward_core(q, k, v, None, attention_multiplier=q.shape[-1] ** -0.5,
                                          output_state=True, BLOCK_SIZE_S=block_s, BLOCK_SIZE_V=block_v)


def xma_linear_attention_reference(q, k, v, block_s=128, block_v=128):
    """Causal linear attention without a softmax, the heads of q, k and v alike: y_t = m * sum over
    s <= t of (q_t . k_s) v_s, and the final state sum over all s of k_s^T v_s."""
    q32, k32, v32 = (x.astype(jnp.float32) for x in (q, k, v))
    s = q.shape[1]
    mask = jnp.arange(s)[:, None] >= jnp.arange(s)[None, :]
    scores = jnp.where(mask, jnp.einsum("bsnk,btnk->bnst", q32, k32), 0.0)
    y = jnp.einsum("bnst,btnv->bsnv", scores, v32) * q.shape[-1] ** -0.5
    ht = jnp.einsum("bsnk,bsnv->bnkv", k32, v32)
    return y.astype(q.dtype), ht


INSPECT = {
    "xma_linear_attention": {
        "args": "f32[1,512,8,128] f32[1,512,8,128] f32[1,512,8,128]",
        "params": {"block_s": [128, 256], "block_v": [128]},
        "reference": "xma_linear_attention_reference",
    },
}
