# Held-out kernel for jax-inspector (round ten), vendored from Google's accelerator-agents
# (MaxKernel's TPU kernel generator: a Pallas kernel it wrote for KernelBench level 2, problem 59,
# "Matmul_Swish_Scaling", committed with the evaluation runs):
#   https://github.com/AI-Hypercomputer/accelerator-agents/blob/923f118caedca6def1823d004572946cffee89a4/MaxKernel/tpu_kernel_gen/agents/kernel_bench_eval/runs/0730_level2_full/level_2_problem_59_sample_0_kernel.py
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
# Verbatim: kernel (renamed gemm_swish_kernel). Edits: upstream is a script that builds random
# inputs at import and calls pallas_call at module level; its pallas_call (the lambda binding
# scaling_factor, specs, grid, out_shape) is kept as written inside a function of the arrays, with
# batch_size, in_features and out_features read from the inputs' shapes and b_batch a static
# keyword (default 64, the script's; its unused b_out = 128 dropped), scaling_factor 2.0 as there.
# Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: Dense + SiLU + scaling, one kernel: a 1-D grid over row blocks, no dimension_semantics,
# no compiler_params; a (b_batch, in) x block, the WHOLE (out, in) weight and the (out,) bias as
# blocks that never move; the body one jnp.dot against the weight transposed in the body
# (weight_ref[...].T), + bias, y * sigmoid(y), * scaling_factor stored into the (b_batch, out)
# output block.
import jax
import jax.numpy as jnp
from functools import partial
from jax.experimental import pallas as pl


def gemm_swish_kernel(x_ref, weight_ref, bias_ref, out_ref, scaling_factor: float):
  """Pallas kernel for a fused linear, SiLU, and scaling operation.

  Args:
    x_ref: A reference to the input block.
    weight_ref: A reference to the weight block.
    bias_ref: A reference to the bias block.
    out_ref: A reference to the output block.
    scaling_factor: A compile-time constant for scaling.
  """
  # Perform the matrix multiplication of a block of x with a block of weight.T
  # and add the bias.
  # x_ref.shape = (b_batch, in_features)
  # weight_ref.shape = (out_features, in_features)
  # bias_ref.shape = (out_features,)
  # The result `y` will have shape (b_batch, out_features).
  y = jnp.dot(x_ref[...], weight_ref[...].T) + bias_ref[...]

  # Apply the SiLU activation function (x * sigmoid(x)) element-wise.
  y = y * jax.nn.sigmoid(y)

  # Apply the scaling factor and write the final result to the output.
  out_ref[...] = y * scaling_factor


@partial(jax.jit, static_argnames=("b_batch",))
def gemm_swish(x, weight, bias, b_batch=64):
  batch_size, in_features = x.shape
  out_features = weight.shape[0]
  scaling_factor = 2.0
  return pl.pallas_call(
    lambda x_ref, w_ref, b_ref, o_ref: gemm_swish_kernel(x_ref, w_ref, b_ref, o_ref, scaling_factor=scaling_factor),
    out_shape=jax.ShapeDtypeStruct((batch_size, out_features), x.dtype),
    grid=(batch_size // b_batch,),
    in_specs=[
      pl.BlockSpec(block_shape=(b_batch, in_features), index_map=lambda i: (i, 0)),
      pl.BlockSpec(block_shape=(out_features, in_features), index_map=lambda i: (0, 0)),
      pl.BlockSpec(block_shape=(out_features,), index_map=lambda i: (0,)),
    ],
    out_specs=pl.BlockSpec(block_shape=(b_batch, out_features), index_map=lambda i: (i, 0)),
  )(x, weight, bias)


# ----------------------------------------------------------------------------- ours


def maxkernel_gemm_swish(x, weight, bias, b_batch=64):
  return gemm_swish(x, weight, bias, b_batch=b_batch)


def maxkernel_gemm_swish_reference(x, weight, bias, b_batch=64):
  """2 * silu(x @ weight.T + bias), in f32."""
  y = jnp.dot(x, weight.T, precision=jax.lax.Precision.HIGHEST) + bias
  return 2.0 * y * jax.nn.sigmoid(y)


INSPECT = {
  "maxkernel_gemm_swish": {
    "args": "f32[256,512] f32[256,512] f32[256]",
    "params": {"b_batch": [64, 128]},
    "reference": "maxkernel_gemm_swish_reference",
    "rtol": 5e-2, "atol": 5e-1,
  },
}
