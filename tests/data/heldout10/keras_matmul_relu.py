# Held-out kernel for jax-inspector (round ten), vendored from the Keras developer guide
# "Define a Custom TPU/GPU Kernel" (author jeffcarp):
#   https://github.com/keras-team/keras-io/blob/b46295a363d308d8af005c290ca5215193bbf42e/guides/define_custom_kernel.py
# Licence: Apache License 2.0 (the repository's LICENSE; the file has no header of its own).
# Copyright the Keras authors.
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
# Verbatim: matmul_relu_kernel and fused_matmul. Edits: fused_matmul's tile sizes (tile_m,
# tile_n = 128, 128) made static keywords with those defaults, @jax.jit given them as static;
# the guide's Keras layers, benchmark and training parts left out (the kernel is all they call).
# Ours, below the "ours" line: a wrapper, a reference, INSPECT.
# Style: a fused Dense + ReLU: a (row tiles, column tiles) grid, no dimension_semantics, no
# compiler_params; the WHOLE contraction dimension in each block: a (tile_m, K) row block of a and
# a (K, tile_n) column block of b; the body one pl.dot of the two blocks (an f32 result of the
# output block's size for f32 inputs), jnp.maximum(acc, 0) and a store of the result into the
# (tile_m, tile_n) output block.
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_relu_kernel(a_ref, b_ref, c_ref):
    """Pallas kernel for fused matmul + ReLU."""
    # Perform the matrix multiplication on the local tile
    # pl.dot leverages the hardware's Matrix Unit (MXU)
    acc = pl.dot(a_ref[...], b_ref[...])

    # Fusion happens here: apply activation while data is in VMEM
    result = jnp.maximum(acc, 0)

    # Write the final result to the output reference
    c_ref[...] = result


@partial(jax.jit, static_argnames=("tile_m", "tile_n"))
def fused_matmul(a, b, tile_m=128, tile_n=128):
    m, k = a.shape
    _, n = b.shape

    # Define tile sizes
    assert (
        m % tile_m == 0 and n % tile_n == 0
    ), "Inputs must be multiples of 128 for this demo"

    return pl.pallas_call(
        matmul_relu_kernel,
        # Map output indices to input blocks
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        in_specs=[
            # For each output tile, we take a slice of A of shape (tile_m, k)
            pl.BlockSpec(
                index_map=lambda i, j: (i, 0), block_shape=(tile_m, k)
            ),  # Matrix A
            # For each output tile, we take a slice of B of shape (k, tile_n)
            pl.BlockSpec(
                index_map=lambda i, j: (0, j), block_shape=(k, tile_n)
            ),  # Matrix B
        ],
        out_specs=pl.BlockSpec(
            index_map=lambda i, j: (i, j), block_shape=(tile_m, tile_n)
        ),  # Matrix C
        grid=(m // tile_m, n // tile_n),
    )(a, b)


# ----------------------------------------------------------------------------- ours


def keras_matmul_relu(a, b, tile_m=128, tile_n=128):
    return fused_matmul(a, b, tile_m=tile_m, tile_n=tile_n)


def keras_matmul_relu_reference(a, b, tile_m=128, tile_n=128):
    """relu(a @ b), in f32."""
    return jnp.maximum(jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32),
                               precision=jax.lax.Precision.HIGHEST), 0).astype(a.dtype)


INSPECT = {
    "keras_matmul_relu": {
        "args": "f32[512,256] f32[256,512]",
        "params": {"tile_m": [128, 256], "tile_n": [128, 256]},
        "reference": "keras_matmul_relu_reference",
        "rtol": 2e-2, "atol": 5e-2,
    },
}
