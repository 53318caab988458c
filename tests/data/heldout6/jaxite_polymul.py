# Held-out kernel for jax-inspector (round six), vendored from:
#   https://github.com/google/jaxite/blob/a2a5fe0b0eaba43c6280bb00e76f9f7ee4f9be24/jaxite/jaxite_cggi/polymul_kernel.py
# (last changed upstream in e4d7ad79ed9753c838677eccdd0c191d01d9468b).
# Licence: Apache License 2.0 (the repository's LICENSE; the file has no header of its own).
# Copyright Google LLC (the jaxite authors; upstream states no year)
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
# Verbatim: bat_matmul, _i32_matmul_unreduced_cggi, _decomposed_vector_matrix_polymul and
# negacyclic_vector_matrix_polymul_bat. Changed in the last: the TPU generation check
# (jax_helpers.get_tpu_version(), which asks the runtime's devices) is a constant 5, and the
# non-TPU fallback (matrix_utils, not vendored) raises. The jax_helpers/matrix_utils imports and
# the vmap fallbacks are dropped. Ours, below the "ours" line: references, INSPECT.
# Style: FHE polynomial arithmetic on the MXU: one whole-array block (grid=(1,)) whose body
# unrolls a Python loop over the batch, builds an (n, n) int32 Toeplitz matrix per row from
# strided pltpu.roll + iota masks + concatenate, splits int32 into bytes (bf16 matmuls with f32
# accumulation, shifted back), vmem_limit_bytes = 32 MiB; and a (18,) grid writing one (n, n)
# Toeplitz block per step (a hard-coded grid; the batch must be 18).
"""Kernel for negacyclic vector-matrix polymul."""

import functools
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp


@jax.jit
def bat_matmul(lhs: jax.Array, y: jax.Array):
  """Perform matrix multiplication between u8(c, m, n, 4, 4)@u32(c, n, k).

  Args:
    lhs: Input u8(c, m, n, 4, 4) Left Matrix
    y: Input u32(c, n, k) Right Matrix, will be converted to u8(c, n, k, 4)

  Returns:
    Output u32(m, k)
  """
  # u8(18, 3, 512, 4, 4) x u8(18, 512, 512, 4) -> u32(3, 512)
  rhs: jax.Array = jax.lax.bitcast_convert_type(y, new_dtype=jnp.uint8)
  i8_products = jnp.einsum(
      "cmnpq,cnkq->cmkp",
      lhs,
      rhs,
      preferred_element_type=jnp.uint32,
  )
  shift_factors = jnp.array([0, 8, 16, 24], dtype=jnp.uint32)
  return jnp.sum(i8_products << shift_factors, axis=(0, 3,)).astype(jnp.uint32)


def _i32_matmul_unreduced_cggi(lhs, rhs):
  """Performs a 32-bit integer matrix multiplication with CGGI optimization.

  This function is an optimized version of i32_matmul_unreduced for decomposed
  vectors, where the RHS matrix is Toeplitzw with decomposition base < 8.

  Args:
    lhs: The left-hand side matrix of shape (m, k).
    rhs: The right-hand side matrix of shape (k, n).

  Returns:
    The result of the matrix multiplication as a jnp.ndarray.
  """
  lax = jax.lax
  m, _, n = lhs.shape[0], lhs.shape[1], rhs.shape[1]

  # Optimized byte extraction for the CGGI trick. This splits the 32-bit
  # integers in the `lhs` matrix into their 8-bit components.
  byte0 = lax.bitwise_and(lhs, 0xFF)
  byte1 = lax.bitwise_and(lax.shift_right_logical(lhs, 8), 0xFF)
  byte2 = lax.bitwise_and(lax.shift_right_logical(lhs, 16), 0xFF)
  byte3 = lax.bitwise_and(lax.shift_right_logical(lhs, 24), 0xFF)

  # Concatenate the bytes to form a new matrix.
  lhs_i8 = jnp.concatenate(
      [
          byte0[: m // 2, :],
          byte1[m // 2 :, :],
          byte2[: m // 2, :],
          byte3[m // 2 :, :],
      ],
      axis=0,
  )

  # rhs is the Toeplitz matrix of the decomposed vector. The values are small
  # (e.g. < 64) because the decomposition base < 8. We can cast to bfloat16
  # directly without splitting into bytes, reducing the number of matmuls by 4x.
  # Perform the matrix multiplication with float32 accumulation for precision.
  raw_out = lax.dot(
      lhs_i8.astype(jnp.bfloat16),
      rhs.astype(jnp.bfloat16),
      preferred_element_type=jnp.float32,  # Ensures accumulation in float32
  ).astype(jnp.int32)
  raw_out = raw_out.reshape((4, m // 2, n))

  # Reconstruct the 32-bit integers from the 8-bit components. This is done by
  # shifting the bytes back to their original positions and summing them up.
  out_shift_base = lax.mul(
      lax.broadcasted_iota(jnp.int32, (4, m // 2, n), dimension=0), 8
  )

  shifted_out = jnp.left_shift(raw_out, out_shift_base)
  return shifted_out[0] + shifted_out[1] + shifted_out[2] + shifted_out[3]


def _decomposed_vector_matrix_polymul(
    poly_vec1: jnp.ndarray, poly_mat2: jnp.ndarray
):
  """Computes decomposed vector-matrix polynomial multiplication."""
  # b is the product of the RLWE dimension (e.g., 3) and the number of
  # decomposition levels in the decomposition parameters (e.g., 6).
  # n is the degree of the RLWE polynomials.
  b, n = poly_vec1.shape
  # m is the number of polynomials in the RLWE dimension (e.g., 3)
  b2, m, n2 = poly_mat2.shape
  assert b == b2 and n == n2

  # We must pad m to 8 because the TPU register sublane has size 8, and more
  # importantly, many of the pallas instructions like pltpu.roll will fail
  # if the sublane size is not a multiple of 8. This further adds the assumption
  # that the value of m is < 8. We are unlikely to need m > 8 for the
  # foreseeable future, but if we did, we would need to round up to the next
  # multiple of 8.
  real_m = m
  m = 8

  poly_mat2 = jnp.pad(
      poly_mat2,
      ((0, 0), (0, (m // 2) - real_m), (0, 0)),
      mode="constant",
      constant_values=(0,),
  )
  poly_mat2 = jnp.concatenate((poly_mat2, poly_mat2), axis=(1))
  if n % 128 != 0:
    raise ValueError(f"Input size {n} is not a multiple of 128")

  def vec_mat_polymul_kernel(vec_ref, mat_ref, out_ref):
    """Pallas kernel for polynomial multiplication."""
    for b_i in range(vec_ref.shape[0]):
      chunk = jnp.broadcast_to(vec_ref[b_i, ...], (128, n))
      chunk = pltpu.roll(chunk, 0, 1, stride=1, stride_axis=0)
      chunk_row_indices = jax.lax.broadcasted_iota(
          dtype=jnp.int32, shape=(128, n), dimension=0
      )
      chunk_col_indices = jax.lax.broadcasted_iota(
          dtype=jnp.int32, shape=(128, n), dimension=1
      )
      toeplitz_chunks = []
      for _ in range(0, n, 128):
        toeplitz_chunks.append(
            jnp.where(chunk_row_indices > chunk_col_indices, -chunk, chunk)
        )
        # Because the vector registers are aligned to size 128, this roll
        # operation lowers to telling the TPU to refer to a different register,
        # rather than actually applying any rolling operation. Hence, the op
        # produces no hardware instructions.
        chunk = pltpu.roll(chunk, 128, 1)
        chunk_row_indices = chunk_row_indices + 128
      vec_toeplitz = jax.lax.concatenate(toeplitz_chunks, dimension=0)

      result = _i32_matmul_unreduced_cggi(mat_ref[b_i, ...], vec_toeplitz)
      out_ref[b_i, ...] = result

  return jnp.sum(
      pl.pallas_call(
          vec_mat_polymul_kernel,
          in_specs=(
              pl.BlockSpec((b, 1, n), lambda i: (i, 0, 0)),
              pl.BlockSpec((b, m, n), lambda i: (i, 0, 0)),
          ),
          out_specs=pl.BlockSpec((b, m // 2, n), lambda i: (i, 0, 0)),
          out_shape=jax.ShapeDtypeStruct((b, m // 2, n), jnp.int32),
          grid=(1,),
          compiler_params=pltpu.CompilerParams(
              # Set the vem limit to 32 MiB, it could be up to 128 MiB.
              vmem_limit_bytes=int(2**10 * 2**15)
          ),
      )(poly_vec1[:, None].astype(jnp.int32), poly_mat2.astype(jnp.int32)),
      axis=0,
  ).astype(jnp.uint32)[:real_m]


@jax.named_call
@jax.jit
def negacyclic_vector_matrix_polymul_bat(
    poly_vec1: jnp.ndarray, poly_mat2: jnp.ndarray,
) -> jnp.ndarray:
  """Perform matrix multiplication between u8(c, m, n, 4, 4)@u32(c, n, k).

  Args:
    poly_vec1: Input u8(c, m, n, 4, 4) Left Matrix
    poly_mat2: Input u32(c, n, k) Right Matrix -> converted to u8(c, n, k, 4)

  Returns:
    Output u32(m, k)
  """
  n_vec = poly_vec1.shape[-1]
  n_matrix = poly_mat2.shape[-3]
  if n_matrix != n_vec:
    raise ValueError(
        "Expected polynomial degree of the inputs to match, but found"
        f" {n_vec} != {n_matrix} \n"
        f" poly_vec1.shape={poly_vec1.shape} \n"
        f" poly_mat2.shape={poly_mat2.shape} in"
        " negacyclic_vector_matrix_polymul_bat"
    )

  tpu_version = 5  # ours: jax_helpers.get_tpu_version() asks the runtime's devices (a TPU v5e or later is assumed)
  if n_vec % 128 == 0 and tpu_version >= 5:
    # b is the product of the RLWE dimension (e.g., 3) and the number of
    # decomposition levels in the decomposition parameters (e.g., 6).
    # n is the degree of the RLWE polynomials.
    assert poly_vec1.dtype == jnp.uint32
    assert poly_mat2.dtype == jnp.uint8
    b, n = poly_vec1.shape
    # m is the number of polynomials in the RLWE dimension (e.g., 3)
    b2, _, n2, _, _ = poly_mat2.shape
    assert b == b2 and n == n2
    # (18, 3, 512)
    # (18,512) -> u32(18, 512, 512)
    # for i in 18:
    #    (3, 512) x (512, 512) -> (3, 512)
    def _toeplitz_chunk(poly_vec1, vec_toeplitz):
      n = poly_vec1.shape[2]
      chunk = jnp.broadcast_to(poly_vec1[...][0], (128, n))
      chunk = pltpu.roll(chunk, 0, 1, stride=1, stride_axis=0)
      chunk_row_indices = jax.lax.broadcasted_iota(
          dtype=jnp.int32, shape=(128, n), dimension=0
      )
      chunk_col_indices = jax.lax.broadcasted_iota(
          dtype=jnp.int32, shape=(128, n), dimension=1
      )
      toeplitz_chunks = []
      for _ in range(0, n, 128):
        toeplitz_chunks.append(
            jnp.where(chunk_row_indices > chunk_col_indices, -chunk, chunk)
        )
        # Because the vector registers are aligned to size 128, this roll
        # operation lowers to telling the TPU to refer to a different register,
        # rather than actually applying any rolling operation. Hence, the op
        # produces no hardware instructions.
        chunk = pltpu.roll(chunk, 128, 1)
        chunk_row_indices = chunk_row_indices + 128
      vec_toeplitz[...] = jax.lax.concatenate(
          toeplitz_chunks, dimension=0
      ).reshape(poly_vec1.shape[0], n, n)

    vec_toeplitz_list = pl.pallas_call(
        _toeplitz_chunk,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=(pl.BlockSpec((1, 1, n), lambda b: (b, 0, 0)),),
            out_specs=pl.BlockSpec((1, n, n), lambda b: (b, 0, 0)),
            grid=(18,),
        ),
        out_shape=jax.ShapeDtypeStruct((b, n, n), jnp.int32),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel",)
        ),
    )(poly_vec1[:, None].astype(jnp.int32))

    return bat_matmul(poly_mat2, vec_toeplitz_list)
  else:
    original_mat = jax.lax.bitcast_convert_type(
        poly_mat2[..., :, 0], new_dtype=jnp.uint32
    )
    raise NotImplementedError("ours: the fallback (matrix_utils.poly_dot_product) is not vendored")




# ----------------------------------------------------------------------------- ours


def _negacyclic_toeplitz(poly_vec1):
  """T[b, i, j] = vec[b, (i - j) mod n], negated above the diagonal (X^n = -1), int32."""
  n = poly_vec1.shape[-1]
  i = jnp.arange(n)[:, None]
  j = jnp.arange(n)[None, :]
  return jnp.where(i >= j, 1, -1)[None] * poly_vec1.astype(jnp.int32)[:, (i - j) % n]


def decomposed_polymul_reference(poly_vec1, poly_mat2):
  """The negacyclic product sum_b vec[b] * mat[b, j] mod (X^n + 1), on int32 (wrapping), as a
  dense (n, n) signed Toeplitz matmul per row."""
  toe = _negacyclic_toeplitz(poly_vec1)
  prod = jnp.einsum("bij,bmj->bmi", toe.astype(jnp.int32), poly_mat2.astype(jnp.int32),
                    preferred_element_type=jnp.int32)
  return jnp.sum(prod, axis=0).astype(jnp.uint32)


def bat_reference(poly_vec1, poly_mat2):
  """The kernel's Toeplitz blocks are the transposed negacyclic Toeplitz matrices; the product
  after them is upstream's bat_matmul."""
  return bat_matmul(poly_mat2, jnp.swapaxes(_negacyclic_toeplitz(poly_vec1), 1, 2))


INSPECT = {
    "_decomposed_vector_matrix_polymul": {
        "args": "i32[6,512] i32[6,3,512]", "reference": "decomposed_polymul_reference",
    },
    "negacyclic_vector_matrix_polymul_bat": {"args": "u32[18,256] u8[18,3,256,4,4]", "reference": "bat_reference"},
}
