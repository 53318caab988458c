# Held-out kernel for jax-inspector (round nine), vendored from:
#   https://github.com/open-lm-engine/accelerated-model-architectures/blob/384ed0a7bd82ced1f40609603dd541cac5416844/xma/layers_jax/depthwise_causal_convolution/pallas_implementation/forward.py
# (ceil_divide from xma/math.py).
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
# Verbatim: _forward_kernel and _forward_core. Edits: the relative import of ceil_divide
# replaced by its two-line definition (xma/math.py). Ours, below the "ours" line: a wrapper taking
# x, W and b positionally and the sequence block as a keyword (no initial state, SiLU), a
# reference, INSPECT.
# Style: a depthwise causal 1-D convolution (Mamba's short conv): a (batch, sequence blocks) grid,
# the second "arbitrary"; (BLOCK_SIZE_S, H) x and y blocks with the batch squeezed, the (K, H)
# weights and (1, H) bias as blocks that never move, a second output of each block's incoming
# history as (1, PAD, H) blocks; the last PAD rows of the previous block kept in a VMEM scratch
# of the input dtype. The body builds K rolled f32 copies of the block (pltpu.roll, a select
# against the history), stacks them, multiplies by the weights and sums the stack: K + 1
# block-sized f32 values and a (K, S, H) one. No vmem_limit_bytes.
from functools import partial

import jax
import jax.experimental.pallas as pl
import jax.experimental.pallas.tpu as pltpu
import jax.numpy as jnp


def ceil_divide(x: int, y: int) -> int:
    return (x + y - 1) // y


def _forward_kernel(
    x_ref,
    W_ref,
    b_ref,
    h0_ref,
    y_ref,
    h_ref,
    h_scratch,
    BLOCK_SIZE_S: int,
    S: int,
    K: int,
    PAD: int,
    ACTIVATION: str | None,
) -> None:
    BLOCK_ID_S = pl.program_id(1)

    @pl.when(BLOCK_ID_S == 0)
    def _():
        if h0_ref is None:
            h_scratch[...] = jnp.zeros_like(h_scratch)
        else:
            h_scratch[...] = h0_ref[...]

    if h_ref is not None:
        h_ref[...] = h_scratch[...][None]

    dtype = x_ref.dtype
    H = x_ref.shape[-1]

    BLOCK_S = jax.lax.broadcasted_iota(jnp.int32, (BLOCK_SIZE_S, 1), 0)
    MASK_S = (BLOCK_ID_S * BLOCK_SIZE_S + BLOCK_S) < S

    x = jnp.where(MASK_S, x_ref[...], 0).astype(dtype)
    x_f32 = x.astype(jnp.float32)
    b = jnp.zeros((1, H), dtype=jnp.float32) if b_ref is None else b_ref[...].astype(jnp.float32)

    hist_padded = jnp.pad(h_scratch[...].astype(jnp.float32), ((BLOCK_SIZE_S - PAD, 0), (0, 0)))

    taps = [
        jnp.where(BLOCK_S < shift, pltpu.roll(hist_padded, shift, axis=0), pltpu.roll(x_f32, shift, axis=0))
        for shift in (K - 1 - k for k in range(K))
    ]

    W = W_ref[...].astype(jnp.float32)
    y = jnp.sum(jnp.stack(taps, axis=0) * W[:, None, :], axis=0) + b

    if ACTIVATION in ["silu", "swish"]:
        y = y * jax.nn.sigmoid(y)

    y_ref[...] = y.astype(dtype)
    h_scratch[...] = x_f32[BLOCK_SIZE_S - PAD :, :].astype(dtype)


@partial(jax.jit, static_argnames=("BLOCK_SIZE_S", "ACTIVATION"))
def _forward_core(
    x: jax.Array,
    W: jax.Array,
    b: jax.Array | None,
    h0: jax.Array | None,
    BLOCK_SIZE_S: int,
    ACTIVATION: str | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    B, S, H = x.shape
    K = W.shape[0]
    PAD = ceil_divide(K - 1, 8) * 8
    NUM_BLOCKS_S = ceil_divide(S, BLOCK_SIZE_S)

    x_spec = pl.BlockSpec(
        block_shape=(None, BLOCK_SIZE_S, H), index_map=lambda BLOCK_ID_B, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0)
    )

    kernel = pl.pallas_call(
        partial(_forward_kernel, BLOCK_SIZE_S=BLOCK_SIZE_S, S=S, K=K, PAD=PAD, ACTIVATION=ACTIVATION),
        out_shape=(
            jax.ShapeDtypeStruct((B, S, H), x.dtype),
            jax.ShapeDtypeStruct((B, NUM_BLOCKS_S, PAD, H), x.dtype),
        ),
        grid=(B, NUM_BLOCKS_S),
        in_specs=(
            x_spec,
            pl.BlockSpec(block_shape=(K, H), index_map=lambda BLOCK_ID_B, BLOCK_ID_S: (0, 0)),
            None if b is None else pl.BlockSpec(block_shape=(1, H), index_map=lambda BLOCK_ID_B, BLOCK_ID_S: (0, 0)),
            (
                None
                if h0 is None
                else pl.BlockSpec(
                    block_shape=(None, PAD, H), index_map=lambda BLOCK_ID_B, BLOCK_ID_S: (BLOCK_ID_B, 0, 0)
                )
            ),
        ),
        out_specs=(
            x_spec,
            pl.BlockSpec(
                block_shape=(None, 1, PAD, H),
                index_map=lambda BLOCK_ID_B, BLOCK_ID_S: (BLOCK_ID_B, BLOCK_ID_S, 0, 0),
            ),
        ),
        scratch_shapes=[pltpu.VMEM((PAD, H), x.dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )

    return kernel(x, W, b, h0)


# ----------------------------------------------------------------------------- ours


def xma_causal_conv(x, W, b, block_s=256):
    return _forward_core(x, W, b, None, BLOCK_SIZE_S=block_s, ACTIVATION="silu")


def xma_causal_conv_reference(x, W, b, block_s=256):
    """y[t] = silu(sum over k of W[k] * x[t - (K - 1 - k)] + b), x zero before the start; and per
    sequence block the PAD rows of x before it (zeros for the first)."""
    B, S, H = x.shape
    K = W.shape[0]
    pad = ceil_divide(K - 1, 8) * 8
    x32 = x.astype(jnp.float32)
    xp = jnp.pad(x32, ((0, 0), (K - 1, 0), (0, 0)))
    y = sum(W[k].astype(jnp.float32) * xp[:, k:k + S, :] for k in range(K)) + b.astype(jnp.float32)
    y = y * jax.nn.sigmoid(y)
    starts = range(0, S, block_s)
    xh = jnp.pad(x, ((0, 0), (pad, 0), (0, 0)))
    hist = jnp.stack([xh[:, s:s + pad, :] for s in starts], axis=1)
    return y.astype(x.dtype), hist


INSPECT = {
    "xma_causal_conv": {
        "args": "bf16[2,1024,512] bf16[4,512] bf16[1,512]",
        "params": {"block_s": [256, 512]},
        "reference": "xma_causal_conv_reference",
    },
}
