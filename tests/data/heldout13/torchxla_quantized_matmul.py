# Held-out kernel for jax-inspector (round thirteen; the chip's fourth held-out round), vendored from:
#   https://github.com/pytorch/xla/blob/b6f5d4b79860ca1cc22985017546170d2ebdc77c/torch_xla/experimental/pallas_kernels/quantized_matmul/kernel.py
# (seen 2026-12-06; PyTorch/XLA's JAX Pallas kernel behind its int8 weight-only / w8a8 linear).
# Licence: BSD 3-Clause (the repository's LICENSE at 18d90ba339160a113a6ed0dc8ca573748258ccce,
# reproduced below; the file has no header of its own).
# NOT Apache: BSD-3-Clause, a permissive licence; its notice and disclaimer are kept below.
#
# Verbatim: the whole file (_quantize_array, matmul_kernel, _next_multiple, quantized_matmul,
# quantize_array), with one change: `pltpu.TPUCompilerParams` is `pltpu.CompilerParams` (jax
# renamed the class; same fields). Ours, below the "ours" line: wrappers taking the blocks as
# keywords, INSPECT.
# Style: int8 weights with a per-output-channel f32 scale; with quantize_activation the bf16
# activations are quantized to int8 in the kernel body (per row, from a row abs-max computed by XLA
# before the call) and the matmul runs int8 x int8 -> int32 into an int32 VMEM accumulator, scaled
# at the last K step; without it the int8 weights meet bf16 activations in the dot. A
# (batch, out, in) grid through a PrefetchScalarGridSpec with no scalars, (parallel, parallel,
# arbitrary), a 64 MiB vmem_limit_bytes.
# Not an entry: the weight-only path (quantize_activation=False, a bf16 x int8 dot in the body) does
# not lower for v5e with jax 0.10.2 (Mosaic "VerificationError while lowering" at the pallas_call).
#
# Copyright (c) 2024 Google Inc.
# All rights reserved.
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions are met:
#
# 1. Redistributions of source code must retain the above copyright
#    notice, this list of conditions and the following disclaimer.
#
# 2. Redistributions in binary form must reproduce the above copyright
#    notice, this list of conditions and the following disclaimer in the
#    documentation and/or other materials provided with the distribution.
#
# 3. Neither the names of Facebook, Deepmind Technologies, NYU, NEC Laboratories America
#    and IDIAP Research Institute nor the names of its contributors may be
#    used to endorse or promote products derived from this software without
#    specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
# AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
# ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR CONTRIBUTORS BE
# LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
# CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
# SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
# INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
# CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE)
# ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
# POSSIBILITY OF SUCH DAMAGE.

import functools
from typing import cast
import jax
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp

def _quantize_array(
    x: jax.Array,  # [bs_block_size, in_block_size]
    x_max_val: jax.Array,  # [1, bs_block_size]
    n_bits: int = 8,
):
  int_min = -2**(n_bits - 1)
  int_max = 2**(n_bits - 1) - 1
  scale = (x_max_val / int_max).T  # [bs_block_size, 1]
  # Need to explicitly cast to f32 because Mosaic can't directly jnp.round a
  # bf16 array.
  # It seems x/0 in Pallas generates inf/-inf instead of an exception.
  x_int = jnp.clip(jnp.round((x / scale).astype(jnp.float32)), int_min, int_max).astype(jnp.int8)
  return x_int, scale.astype(x.dtype)

def matmul_kernel(
    x_ref,  # (batch_block_size, in_block_size)
    w_ref,  # (out_block_size, in_block_size)
    scalar_ref,  # (1, out_block_size)
    x_max_val,  # (1, batch_block_size)
    out_ref,  # (batch_block_size, out_block_size)
    acc_ref,  # (batch_block_size, out_block_size)
    *,
    quantize_activation,
    batch_block_size,
    out_block_size,
    in_block_size,
  ):
  bs_idx, out_idx, in_idx = pl.program_id(0), pl.program_id(1) , pl.program_id(2)
  nsteps = pl.num_programs(2)
  x_ref_dtype = x_ref.dtype
  assert x_ref.shape == (batch_block_size, in_block_size), "x_ref shape is not correct"
  assert w_ref.shape == (out_block_size, in_block_size), "w_ref shape is not correct"
  assert scalar_ref.shape == (1, out_block_size), "scalar_ref shape is not correct"
  assert x_max_val.shape == (1, batch_block_size), "x_max_val shape is not correct"
  assert out_ref.shape == (batch_block_size, out_block_size), "out_ref shape is not correct"
  assert acc_ref.shape == (batch_block_size, out_block_size), "acc_ref shape is not correct"

  @pl.when(in_idx == 0)
  def _():
    acc_ref[...] = jnp.zeros_like(acc_ref)

  if quantize_activation:
    x, x_scale = _quantize_array(x_ref[...], x_max_val[...])
    acc_ref[...] += jax.lax.dot_general(
        x,
        w_ref[...],
        (((1,), (1,)),((), ())),
        preferred_element_type=jnp.int32,
    )
  else:
    acc_ref[...] += jax.lax.dot_general(
        x_ref[...],
        w_ref[...],
        (((1,), (1,)),((), ())),
    )

  @pl.when(in_idx == nsteps - 1)
  def _():
    acc = acc_ref[...]
    scalar = scalar_ref[...]
    acc *= scalar
    if quantize_activation:
      acc *= x_scale
    out_ref[...] = acc.astype(x_ref_dtype)

def _next_multiple(x, multiple):
  return ((x + multiple - 1) // multiple) * multiple

@functools.partial(
    jax.jit,
    static_argnames=[
        'int4_weight',
        'quantize_activation',
        'batch_block_size',
        'out_block_size',
        'in_block_size',
    ]
)
def quantized_matmul(
    x: jax.Array,  # [bs, n_input_features]
    w: jax.Array,  # [n_output_features, n_input_features]
    scalar: jax.Array,  # [n_output_features]
    zero_point: jax.Array | None = None,
    block_size: jax.Array | None = None,  # i32[1]
    int4_weight: bool = False,
    quantize_activation: bool = False,
    *,
    # All 3 block sizes have to be multiples of 128 because they are used as the minormost dimension in the block.
    batch_block_size: int = 128,
    out_block_size: int = 128,
    in_block_size: int = 128,
    vmem_limit_bytes: int | None = 64 * 1024 * 1024,
):
  assert zero_point is None, "Not implemented: zero_point is not supported."
  assert block_size is None, "Not implemented: block_size is not supported."
  assert not int4_weight, "Not implemented: int4_weight is not supported."

  # x_max_val cannot be [bs, 128] because it'll be costly to send
  # [bs_block_size, 128] to VMEM each time.
  # cast to f32 because "INTERNAL: Mosaic failed to compile TPU kernel: Insertion of minor dim that is not a no-op only supported for 32-bit types"
  # We need the global max values to be computed before the kernel.
  x_max_val = jnp.max(jnp.abs(x), axis=-1, keepdims=False)  # [bs]
  x_max_val = jnp.expand_dims(x_max_val, axis=0)  # [1, bs]
  assert x_max_val.shape == (1, x.shape[0])

  orig_bs, orig_in_features = x.shape
  orig_out_features, _ = w.shape
  padded_bs = _next_multiple(orig_bs, batch_block_size)
  if orig_bs < padded_bs:
    x = jnp.pad(x, ((0, padded_bs-orig_bs), (0, 0)))
    x_max_val = jnp.pad(x_max_val, ((0, 0), (0, padded_bs-orig_bs)))
  padded_out_features = _next_multiple(orig_out_features, out_block_size)
  if orig_out_features <  padded_out_features:
    w = jnp.pad(w, ((0, padded_out_features-orig_out_features), (0, 0)))
    scalar = jnp.pad(scalar, (0, padded_out_features-orig_out_features))
  padded_in_features = _next_multiple(orig_in_features, in_block_size)
  if orig_in_features < padded_in_features:
    x = jnp.pad(x, ((0, 0), (0, padded_in_features-orig_in_features)))
    w = jnp.pad(w, ((0, 0), (0, padded_in_features-orig_in_features)))

  scalar = jnp.expand_dims(scalar, axis=0)  # [1, n_output_features]

  assert x.shape[1] == w.shape[1], f"x.shape[1] ({x.shape[1]}) must be equal to w.shape[1] ({w.shape[1]})"
  assert w.shape[0] == scalar.shape[1], f"w.shape[0] ({w.shape[0]}) must be equal to scalar.shape[1] ({scalar.shape[1]})"
  assert x_max_val.shape == (1, x.shape[0]), f"x_max_val.shape ({x_max_val.shape}) must be equal to (1, x.shape[0]) ({1, {x.shape[0]}})"
  assert x.shape[0] % batch_block_size == 0, f"x.shape[0] ({x.shape[0]}) must be a multiple of block size ({batch_block_size})"
  assert w.shape[0] % out_block_size == 0, f"w.shape[0] ({w.shape[0]}) must be a multiple of block size ({out_block_size})"
  assert x.shape[1] % in_block_size == 0, f"x.shape[1] ({x.shape[1]}) must be a multiple of block size ({in_block_size})"

  acc_dtype = jnp.int32 if quantize_activation else x.dtype
  kernel = pl.pallas_call(
      functools.partial(matmul_kernel, quantize_activation=quantize_activation, batch_block_size=batch_block_size, out_block_size=out_block_size, in_block_size=in_block_size),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0,
          in_specs=[
              pl.BlockSpec((batch_block_size, in_block_size), lambda b, o, i: (b, i)),
              pl.BlockSpec((out_block_size, in_block_size), lambda b, o, i: (o, i)),
              pl.BlockSpec((1, out_block_size), lambda b, o, i: (0, o)),
              pl.BlockSpec((1, batch_block_size), lambda b, o, i: (0, b)),
          ],
          out_specs=pl.BlockSpec((batch_block_size, out_block_size), lambda b, o, i: (b, o)),
          scratch_shapes=[pltpu.VMEM((batch_block_size, out_block_size), acc_dtype)],
          grid=(padded_bs // batch_block_size, padded_out_features // out_block_size, padded_in_features // in_block_size),
      ),
      out_shape=jax.ShapeDtypeStruct((padded_bs, padded_out_features), x.dtype),
      compiler_params=pltpu.CompilerParams(
          dimension_semantics=("parallel", "parallel", "arbitrary"),
          vmem_limit_bytes=vmem_limit_bytes,
      ),
  )

  out = kernel(x, w, scalar, x_max_val)

  return out[:orig_bs,:orig_out_features]

def quantize_array(x, n_bits: int = 8, dim: int = -1):
  max_val = jnp.max(jnp.abs(x), axis=-1, keepdims=True)
  int_min = -2**(n_bits - 1)
  int_max = 2**(n_bits - 1) - 1
  scale = max_val / int_max
  x_int = jnp.clip(jnp.round((x / scale)), int_min, int_max).astype(jnp.int8)
  return x_int, scale.astype(x.dtype)


# ----------------------------------------------------------------------------- ours


def w8a8_matmul(x, w, scalar, batch_block_size: int = 512, out_block_size: int = 512, in_block_size: int = 2048):
  """int8 x int8 -> int32: the activations quantized in the kernel."""
  return quantized_matmul(x, w, scalar, quantize_activation=True, batch_block_size=batch_block_size,
                          out_block_size=out_block_size, in_block_size=in_block_size)


def _reference(x, w, scalar, **_):
  return (jnp.dot(x.astype(jnp.float32), w.astype(jnp.float32).T) * scalar[None, :]).astype(x.dtype)


# 4096 tokens through an 8192 x 4096 int8 projection (32 MiB of weights)
_ARGS = "bf16[4096,4096] s8[8192,4096] f32[8192]"
_BLOCKS = {"batch_block_size": [512, 256, 1024], "out_block_size": [512, 1024, 256], "in_block_size": [2048, 512, 4096]}
INSPECT = {
    "w8a8_matmul": {"args": _ARGS, "params": _BLOCKS, "int_ranges": {"w": (-127, 128)}, "reference": "_reference",
                    "atol": 1.0, "rtol": 0.1},
}
