# Held-out kernel for jax-inspector (round ten), vendored from Google's accelerator-agents
# (MaxKernel's TPU kernel generator: a Pallas kernel it wrote for KernelBench level 2, problem 28,
# "BMM_InstanceNorm_Sum_ResidualAdd_Multiply", committed with the evaluation runs):
#   https://github.com/AI-Hypercomputer/accelerator-agents/blob/923f118caedca6def1823d004572946cffee89a4/MaxKernel/tpu_kernel_gen/agents/kernel_bench_eval/runs/0730_level2_full/level_2_problem_28_sample_0_kernel.py
# Licence: Apache License 2.0 (the repository's LICENSE; the file has no header of its own).
# Copyright Google LLC.
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
# Verbatim: kernel (renamed gemm_layernorm_kernel). Edits: upstream is a script that builds its
# inputs at import (flax Dense and LayerNorm parameters, random x and y) and calls pallas_call at
# module level; its pallas_call (specs, grid, out_shape) is kept as written inside a function of
# the arrays, with the module constants batch_size, in_features and out_features read from the
# inputs' shapes and block_size a static keyword (default 8, the script's); the comments on the
# specs cut. Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: Dense + LayerNorm over the features + residual add and multiply, one kernel: a 1-D grid
# over row blocks, no dimension_semantics, no compiler_params; (block_size, in) x and
# (block_size, out) y blocks, the WHOLE (in, out) weight and three (out,) f32 vectors as blocks
# that never move; the body one jnp.dot (an f32 (block_size, out) result), its row mean and
# variance, the normalised value, scale and bias, + y, * y, stored into the output block.
import jax
import jax.numpy as jnp
from functools import partial
from jax.experimental import pallas as pl


def gemm_layernorm_kernel(x_ref, y_ref, bmm_kernel_ref, bmm_bias_ref, norm_scale_ref, norm_bias_ref, out_ref):
  """
  Pallas kernel to perform a sequence of operations: dense layer, layer normalization,
  and element-wise addition and multiplication.

  Args:
    x_ref: Input tensor block of shape (block_size, in_features).
    y_ref: Second input tensor block of shape (block_size, out_features).
    bmm_kernel_ref: Weight matrix for the dense layer of shape (in_features, out_features).
    bmm_bias_ref: Bias vector for the dense layer of shape (out_features,).
    norm_scale_ref: Scale vector for layer normalization of shape (out_features,).
    norm_bias_ref: Bias vector for layer normalization of shape (out_features,).
    out_ref: Output tensor block of shape (block_size, out_features) to be written to in-place.
  """
  # Epsilon value for numerical stability in layer normalization.
  eps = 1e-5

  # --- 1. Dense Layer ---
  # Apply the dense layer: x = matmul(x, kernel) + bias
  x = jnp.dot(x_ref[...], bmm_kernel_ref[...]) + bmm_bias_ref[...]

  # --- 2. Layer Normalization ---
  # The normalization is performed across the feature dimension (axis=1).
  # Calculate mean and variance for the current block.
  mean = jnp.mean(x, axis=1, keepdims=True)
  var = jnp.var(x, axis=1, keepdims=True)

  # Normalize the output of the dense layer.
  x_normalized = (x - mean) / jnp.sqrt(var + eps)

  # Apply scale and bias for the layer normalization.
  x = x_normalized * norm_scale_ref[...] + norm_bias_ref[...]

  # --- 3. Element-wise Operations ---
  # Add the y tensor.
  x = x + y_ref[...]
  # Multiply by the y tensor.
  x = x * y_ref[...]

  # --- 4. Store Result ---
  # Write the final result to the output buffer.
  out_ref[...] = x


@partial(jax.jit, static_argnames=("block_size",))
def gemm_layernorm(x, y, bmm_kernel, bmm_bias, norm_scale, norm_bias, block_size=8):
  batch_size, in_features = x.shape
  out_features = y.shape[1]
  return pl.pallas_call(
    gemm_layernorm_kernel,
    out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
    grid=(batch_size // block_size,),
    in_specs=[
      pl.BlockSpec(block_shape=(block_size, in_features), index_map=lambda i: (i, 0)),
      pl.BlockSpec(block_shape=(block_size, out_features), index_map=lambda i: (i, 0)),
      pl.BlockSpec(block_shape=(in_features, out_features), index_map=lambda i: (0, 0)),
      pl.BlockSpec(block_shape=(out_features,), index_map=lambda i: (0,)),
      pl.BlockSpec(block_shape=(out_features,), index_map=lambda i: (0,)),
      pl.BlockSpec(block_shape=(out_features,), index_map=lambda i: (0,)),
    ],
    out_specs=pl.BlockSpec(block_shape=(block_size, out_features), index_map=lambda i: (i, 0)),
  )(x, y, bmm_kernel, bmm_bias, norm_scale, norm_bias)


# ----------------------------------------------------------------------------- ours


def maxkernel_gemm_layernorm(x, y, w, b, scale, bias, block_size=8):
  return gemm_layernorm(x, y, w, b, scale, bias, block_size=block_size)


def maxkernel_gemm_layernorm_reference(x, y, w, b, scale, bias, block_size=8):
  """((LayerNorm(x @ w + b) * scale + bias) + y) * y over the features, in f32."""
  h = jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST) + b
  mean = h.mean(axis=1, keepdims=True)
  var = h.var(axis=1, keepdims=True)
  h = (h - mean) / jnp.sqrt(var + 1e-5) * scale + bias
  return (h + y) * y


INSPECT = {
  "maxkernel_gemm_layernorm": {
    "args": "f32[128,64] f32[128,128] f32[64,128] f32[128] f32[128] f32[128]",
    "params": {"block_size": [8, 32]},
    "reference": "maxkernel_gemm_layernorm_reference",
    "rtol": 5e-2, "atol": 5e-2,
  },
}
