# Held-out kernel for jax-inspector (round ten), vendored from:
#   https://github.com/vllm-project/vllm/blob/cebcdb70d40b7d3cb2b653fee2335aaa22f66f7f/vllm/lora/ops/xla_ops/pallas.py
# Licence: Apache License 2.0 (the file's header "SPDX-License-Identifier: Apache-2.0" and the
# repository's LICENSE). Copyright the vLLM project contributors.
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
# Verbatim: _bgmv_kernel. Edits: the PyTorch/XLA glue (the torch imports, XLA_LIB.define, the
# bgmv_xla / bgmv_non_xla registrations and bgmv_shape_function) left out; in _bgmv the module's
# TOKENS_BLOCK, LORA_RANK_BLOCK and DIM_BLOCK_SIZE made static keywords (token_block, rank_block,
# dim_block), their defaults the module's (16, 128, 128); pltpu.TPUCompilerParams written
# pltpu.CompilerParams (the old name is gone in jax 0.10); @jax.jit given the static keywords.
# Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: multi-LoRA "batched gather matrix-vector" (bgmv, the LoRA shrink/expand of vLLM's TPU
# backend): a (token blocks, rank blocks, dim blocks) grid, the last "arbitrary"; the adapter index
# of each token scalar-prefetched into SMEM; a (tokens, dim) block of the inputs, the rank/dim
# block of EVERY adapter as one (N, rank, dim) block; the body a Python loop over the block's
# tokens (unrolled at trace time), per token a (tokens, dim) x (rank, dim)^T matmul against that
# token's adapter, masked to the token's row through a VMEM mask scratch and added to an f32 VMEM
# accumulator scratch; the accumulator cast into the output on the last dim block.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# TODO: Tune these
TOKENS_BLOCK = 16
LORA_RANK_BLOCK = 128
DIM_BLOCK_SIZE = 128


def _bgmv_kernel(bT: int, bL: int, idx_ref, inp_ref, lora_ref, out_ref,
                 acc_ref, mask_ref):

    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref[...], dtype=jnp.float32)

    t = pl.program_id(0)

    for i in range(bT):
        idx = idx_ref[i + bT * t]
        mask_ref[...] = jnp.zeros_like(mask_ref[...], dtype=jnp.float32)
        mask_ref[i, :] = jnp.ones((bL, ), dtype=jnp.float32)

        acc_ref[...] += jax.lax.dot_general(
            inp_ref[...],
            lora_ref[idx, ...], (((1, ), (1, )), ((), ())),
            preferred_element_type=jnp.float32) * mask_ref[...]

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        out_ref[...] = acc_ref[...].astype(out_ref.dtype)


@functools.partial(jax.jit, static_argnames=("token_block", "rank_block", "dim_block"))
def _bgmv(
    idxs: jax.Array,  # (T, ) int32
    inputs: jax.Array,  # (T, D) model dtype
    loras: jax.Array,  # (N, L, D) model dtype
    token_block: int = TOKENS_BLOCK,
    rank_block: int = LORA_RANK_BLOCK,
    dim_block: int = DIM_BLOCK_SIZE,
) -> jax.Array:  # (T, L) model dtype
    T, D = inputs.shape
    N, L, _ = loras.shape

    return pl.pallas_call(
        kernel=functools.partial(_bgmv_kernel, token_block, rank_block),
        out_shape=jax.ShapeDtypeStruct((T, L), dtype=inputs.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(T // token_block, L // rank_block,
                  D // dim_block),
            in_specs=[
                pl.BlockSpec((token_block, dim_block),
                             lambda i, j, k, block_idx: (i, k)),
                pl.BlockSpec((N, rank_block, dim_block),
                             lambda i, j, k, block_idx: (0, j, k)),
            ],
            out_specs=pl.BlockSpec((token_block, rank_block),
                                   lambda i, j, k, block_idx: (i, j)),
            scratch_shapes=[
                pltpu.VMEM((token_block, rank_block), jnp.float32),
                pltpu.VMEM((token_block, rank_block), jnp.float32)
            ]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="bgmv")(idxs, inputs, loras)


# ----------------------------------------------------------------------------- ours


def vllm_lora_bgmv(idxs, inputs, loras, token_block=16, rank_block=128, dim_block=128):
    return _bgmv(idxs, inputs, loras, token_block=token_block, rank_block=rank_block, dim_block=dim_block)


def vllm_lora_bgmv_reference(idxs, inputs, loras, token_block=16, rank_block=128, dim_block=128):
    """Each token times its own adapter: out[t] = loras[idxs[t]] @ inputs[t], accumulated in f32."""
    out = jnp.einsum("td,tld->tl", inputs.astype(jnp.float32), loras[idxs].astype(jnp.float32))
    return out.astype(inputs.dtype)


INSPECT = {
    "vllm_lora_bgmv": {
        "args": "i32[64] bf16[64,256] bf16[4,256,256]",
        "params": {"token_block": [16, 32], "rank_block": [128, 256], "dim_block": [128]},
        "reference": "vllm_lora_bgmv_reference",
        "int_ranges": {"idxs": (0, 4)},
        "rtol": 2e-2, "atol": 2e-2,
    },
}
