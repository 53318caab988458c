# Held-out kernel for jax-inspector (issue 28, round four), vendored from:
#   https://github.com/Tyronita/PallasBench/blob/9cc390ec4cfeb5109aad588d6d15c0c98462a6b7/pallasbench/kernels/level3/multi_head_attention.py
# Copyright 2026 Tyronita
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
# The kernel and its pallas_call are verbatim; the provenance helper and benchmark metadata are
# dropped. Ours: the reference, INSPECT.
# Style: one head per grid step with the whole sequence in one block (no tiling of q or kv),
# 3-D (1, S, D) blocks, batched matmuls through `@` on 3-D values, softmax over the whole
# (1, S, S) scores, a second matmul on the weights.
"""Level 3: Multi-Head Attention via Pallas."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _mha_kernel(q_ref, k_ref, v_ref, o_ref):
    q = q_ref[...]
    k = k_ref[...]
    v = v_ref[...]
    d_k = q.shape[-1]
    scores = q @ k.swapaxes(-2, -1) / jnp.sqrt(jnp.float32(d_k))
    weights = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
    weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    o_ref[...] = weights @ v


def pallas_multi_head_attention(
    q: jax.Array, k: jax.Array, v: jax.Array
) -> jax.Array:
    n_heads, seq_len, d_head = q.shape

    return pl.pallas_call(
        _mha_kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(n_heads,),
        in_specs=[
            pl.BlockSpec((1, seq_len, d_head), lambda h: (h, 0, 0)),
            pl.BlockSpec((1, seq_len, d_head), lambda h: (h, 0, 0)),
            pl.BlockSpec((1, seq_len, d_head), lambda h: (h, 0, 0)),
        ],
        out_specs=pl.BlockSpec((1, seq_len, d_head), lambda h: (h, 0, 0)),
    )(q, k, v)


# ----------------------------------------------------------------------------- ours


def mha_reference(q, k, v):
    scores = jnp.einsum("hqd,hkd->hqk", q, k, precision=jax.lax.Precision.HIGHEST) / jnp.sqrt(jnp.float32(q.shape[-1]))
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("hqk,hkd->hqd", weights, v, precision=jax.lax.Precision.HIGHEST).astype(q.dtype)


INSPECT = {
    "pallas_multi_head_attention": {
        "args": "f32[4,512,64] f32[4,512,64] f32[4,512,64]", "reference": "mha_reference",
        "atol": 1e-4, "rtol": 1e-4,
    },
}
