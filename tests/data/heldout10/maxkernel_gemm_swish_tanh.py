# Held-out kernel for jax-inspector (round ten), vendored from Google's accelerator-agents
# (MaxKernel's TPU kernel generator: a Pallas kernel it wrote for KernelBench level 2, problem 81,
# "Gemm_Swish_Divide_Clamp_Tanh_Clamp", committed with the evaluation runs):
#   https://github.com/AI-Hypercomputer/accelerator-agents/blob/923f118caedca6def1823d004572946cffee89a4/MaxKernel/tpu_kernel_gen/agents/kernel_bench_eval/runs/0730_level2_full/level_2_problem_81_sample_0_kernel.py
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
# Verbatim: kernel (renamed gemm_swish_tanh_kernel). Edits: upstream is a script that builds its
# inputs at import (a flax Dense's parameters, random x) and calls pallas_call at module level;
# its pallas_call (specs, grid, out_shape) is kept as written inside a function of the arrays,
# with batch_size, in_features and out_features read from the inputs' shapes and the module's
# block sizes bM, bN static keywords (defaults 128, 512, the script's); the comments on the specs
# cut; jnp.clip(acc, a_min=-1.0, a_max=1.0) written jnp.clip(acc, min=-1.0, max=1.0) (twice: jax
# 0.10's clip no longer takes a_min/a_max). Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: Dense + a chain of element-wise ops, one kernel: a 2-D (row blocks, column blocks) grid,
# no dimension_semantics, no compiler_params; a (bM, in) x block with the WHOLE contraction
# dimension, an (in, bN) weight block and a (bN,) bias block; the body one jnp.dot (an f32 (bM, bN)
# result), + bias, SiLU, / 2, clip, tanh, clip, stored into the (bM, bN) output block.
import jax
import jax.numpy as jnp
from functools import partial
from jax.experimental import pallas as pl


def gemm_swish_tanh_kernel(x_ref, kernel_ref, bias_ref, out_ref):
  """
  Pallas kernel for a dense layer followed by a sequence of non-linear transformations.

  This kernel performs the following operations:
  1. Matrix multiplication (GEMM) of input `x` with `kernel` weights.
  2. Addition of the `bias` term.
  3. SiLU (Swish) activation: `x * sigmoid(x)`.
  4. Division by 2.0.
  5. Clipping the result to the range [-1.0, 1.0].
  6. Applying the tanh activation function.
  7. A final clipping operation to the range [-1.0, 1.0].

  Args:
    x_ref: A reference to the input data block.
    kernel_ref: A reference to the weight matrix block.
    bias_ref: A reference to the bias vector block.
    out_ref: A reference to the output data block where the result is stored.
  """
  # 1. Dense layer: GEMM + bias addition
  # The result of the dot product has shape (bM, bN).
  # The bias_ref has shape (bN,), which is broadcasted across the rows.
  acc = jnp.dot(x_ref[...], kernel_ref[...]) + bias_ref[...]

  # 2. SiLU activation
  acc = acc * jax.nn.sigmoid(acc)

  # 3. Division
  acc = acc / 2.0

  # 4. Clip
  acc = jnp.clip(acc, min=-1.0, max=1.0)

  # 5. Tanh
  acc = jnp.tanh(acc)

  # 6. Final Clip
  acc = jnp.clip(acc, min=-1.0, max=1.0)

  # Write the final result to the output buffer
  out_ref[...] = acc


@partial(jax.jit, static_argnames=("bM", "bN"))
def gemm_swish_tanh(x, kernel, bias, bM=128, bN=512):
  batch_size, in_features = x.shape
  out_features = kernel.shape[1]
  return pl.pallas_call(
    gemm_swish_tanh_kernel,
    out_shape=jax.ShapeDtypeStruct((batch_size, out_features), x.dtype),
    grid=(batch_size // bM, out_features // bN),
    in_specs=[
      pl.BlockSpec(block_shape=(bM, in_features), index_map=lambda i, j: (i, 0)),
      pl.BlockSpec(block_shape=(in_features, bN), index_map=lambda i, j: (0, j)),
      pl.BlockSpec(block_shape=(bN,), index_map=lambda i, j: (j,)),
    ],
    out_specs=pl.BlockSpec(block_shape=(bM, bN), index_map=lambda i, j: (i, j)),
  )(x, kernel, bias)


# ----------------------------------------------------------------------------- ours


def maxkernel_gemm_swish_tanh(x, kernel, bias, bM=128, bN=512):
  return gemm_swish_tanh(x, kernel, bias, bM=bM, bN=bN)


def maxkernel_gemm_swish_tanh_reference(x, kernel, bias, bM=128, bN=512):
  """clip(tanh(clip(silu(x @ kernel + bias) / 2, -1, 1)), -1, 1), in f32."""
  acc = jnp.dot(x, kernel, precision=jax.lax.Precision.HIGHEST) + bias
  acc = jnp.clip(acc * jax.nn.sigmoid(acc) / 2.0, -1.0, 1.0)
  return jnp.clip(jnp.tanh(acc), -1.0, 1.0)


INSPECT = {
  "maxkernel_gemm_swish_tanh": {
    "args": "f32[256,512] f32[512,512] f32[512]",
    "params": {"bM": [128, 256], "bN": [256, 512]},
    "reference": "maxkernel_gemm_swish_tanh_reference",
    "rtol": 5e-2, "atol": 5e-2,
  },
}
