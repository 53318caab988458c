# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/AI-Hypercomputer/maxtext/blob/4e4f99cbca80290a87bdfe10df4f3c92b37370a0/src/maxtext/kernels/moe_topk/moe_topk_pallas.py
# Copyright 2026 Google LLC
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
# The kernel and its pallas_call wrapper are verbatim. Trimmed: the custom VJP and the off-TPU
# fallback of `fused_topk_gating` (the entry below always takes the Pallas path); top_k's
# is_stable=False, an argument jax 0.10.2's lax.top_k does not have. Ours: the reference, inputs,
# INSPECT.
# Style: lax.top_k inside a Mosaic kernel, pl.Buffered(buffer_count=2),
# skip_device_barrier and disable_bounds_checks, int32 and float outputs, a narrow (bM, k) block.
"""Fused MoE Top-K Gating and Normalized Softmax Kernel with Analytical VJP."""

import functools
from typing import Tuple

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp


def _pallas_topk_kernel(
    logits_ref,  # Shape: (bM, E), Memory: VMEM
    weights_ref,  # Shape: (bM, k), Memory: VMEM
    indices_ref,  # Shape: (bM, k), Memory: VMEM
) -> None:
  """Fused Top-K selection and normalized Softmax kernel on TPU Vector Units."""
  logits_block = logits_ref[...]
  k = weights_ref.shape[-1]

  # Hardware vector unit bitonic selection across expert dimension.
  # TPU v6e/v7x Mosaic backend requires is_stable=False for Pallas top_k lowering.
  topk_vals, topk_indices = jax.lax.top_k(logits_block, k=k)  # is_stable=False: not in jax 0.10.2

  topk_vals_fp32 = topk_vals.astype(jnp.float32)

  # Optimization: Because top_k returns values sorted in descending order,
  # the maximum element along the top-k dimension is identically index 0.
  # Slicing the 0-th column directly in vector registers eliminates the horizontal
  # multi_reduction <maximumf> tree reduction instruction entirely.
  max_val = topk_vals_fp32[:, :1]

  # Compute numerically stabilized exponentials in vector registers:
  exps = jnp.exp(topk_vals_fp32 - max_val)

  # Compute sum of exponentials across top-k dimension:
  sum_exps = jnp.sum(exps, axis=-1, keepdims=True)

  # Optimization: Softmax reciprocal multiplication vectorization.
  inv_sum = jax.lax.reciprocal(sum_exps)
  weights = (exps * inv_sum).astype(logits_ref.dtype)

  weights_ref[...] = weights
  indices_ref[...] = topk_indices


def _pallas_fused_topk_gating(
    logits: jax.Array,
    k: int = 10,
) -> Tuple[jax.Array, jax.Array]:
  """Executes fused top-k gating via Pallas TPU kernel."""
  M, E = logits.shape
  bM = min(M, 2048)

  # Ensure grid evenly divides M
  if M % bM != 0:
    bM = 128
    while bM < M and M % (bM * 2) == 0 and (bM * 2) <= 2048:
      bM *= 2

  grid = (M // bM,)
  pipeline_mode = pl.Buffered(buffer_count=2) if bM < M else None

  in_specs = [
      pl.BlockSpec(
          block_shape=(bM, E),
          index_map=lambda i: (i, 0),
          pipeline_mode=pipeline_mode,
      )
  ]

  out_specs = (
      pl.BlockSpec(
          block_shape=(bM, k),
          index_map=lambda i: (i, 0),
      ),
      pl.BlockSpec(
          block_shape=(bM, k),
          index_map=lambda i: (i, 0),
      ),
  )

  out_shape = (
      jax.ShapeDtypeStruct((M, k), logits.dtype),
      jax.ShapeDtypeStruct((M, k), jnp.int32),
  )

  compiler_params = pltpu.CompilerParams(
      dimension_semantics=["parallel"],
      skip_device_barrier=True,
      disable_bounds_checks=True,
  )

  return pl.pallas_call(
      _pallas_topk_kernel,
      out_shape=out_shape,
      grid=grid,
      in_specs=in_specs,
      out_specs=out_specs,
      compiler_params=compiler_params,
      debug=False,
  )(logits)


def fused_topk_gating(logits: jax.Array, k: int = 8) -> Tuple[jax.Array, jax.Array]:
  """`fused_topk_gating`'s TPU path: (..., num_experts) logits -> (..., k) weights and indices."""
  orig_shape = logits.shape
  num_experts = orig_shape[-1]
  logits_2d = logits.reshape(-1, num_experts)
  weights_2d, indices_2d = _pallas_fused_topk_gating(logits_2d, k=k)
  out_shape = (*orig_shape[:-1], k)
  return weights_2d.reshape(out_shape), indices_2d.reshape(out_shape)


# ----------------------------------------------------------------------------- ours


def fused_topk_gating_ref(logits, k: int = 8):
  """The file's own off-TPU path."""
  topk_vals, indices = jax.lax.top_k(logits.reshape(-1, logits.shape[-1]), k=k)
  weights = jax.nn.softmax(topk_vals.astype(jnp.float32), axis=-1).astype(logits.dtype)
  out_shape = (*logits.shape[:-1], k)
  return weights.reshape(out_shape), indices.reshape(out_shape)


INSPECT = {
    "fused_topk_gating": {
        "args": "f32[2,2048,128]", "reference": "fused_topk_gating_ref", "atol": 1e-6, "rtol": 1e-5,
        "params": {"k": [8, 2, 4]},
    },
}
