# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/google-deepmind/recurrentgemma/blob/56dfbcfcebdc04724caaa19486a4f245a801de0b/recurrentgemma/jax/pallas.py
# Copyright 2024 DeepMind Technologies Limited.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#    http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or  implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# ============================================================================
#
# Trimmed to the real-valued, single-shard path: complex_lib's custom Complex class, the
# sequence-sharded correction (all_gather of carries) and the a_prod outputs it needs are cut.
# Changed: `jax._src.lax.control_flow.for_loop.for_loop` (gone from jax 0.10) became
# `lax.fori_loop` with the same carry; the kernel, specs, grid and custom VJP are otherwise the
# upstream code. Ours: the reference scan, inputs, INSPECT.
# Style: a sequential scan inside each block with dynamic indexing of a 4-D block on a
# non-minor axis, lax.cond on program_id to initialise a carry held in an *output* block that
# stays resident across the "sequence" grid axis, reversed index maps, an optional (None) input,
# a custom_vjp whose backward is the same kernel run in reverse.
"""Pallas implementation of the scan operation for a LRU."""
import functools
import math
from typing import NamedTuple

import jax
import jax.experimental.pallas as pl
import jax.numpy as jnp


class PallasKernelSpec(NamedTuple):
  """The grid and size specs for the Pallas kernel."""

  batch_grid_size: int
  seq_grid_size: int
  dim_grid_size: int
  batch_tile_size: int
  seq_tile_size: int
  dim_tile_size: int
  singleton_tile_size: int = 128

  @property
  def grid(self) -> tuple[int, int, int]:
    return (self.batch_grid_size, self.dim_grid_size, self.seq_grid_size)


def carry_dtype(dtype: jnp.dtype) -> jnp.dtype:
  if dtype in (jnp.bfloat16, jnp.float16):
    return jnp.float32
  else:
    return dtype


def pad_array_to_divisible(x, divisor: int, axis: int, pad_on_back: bool = True, value: float = 0.0):
  """Pads the variable `x` to have size along `axis` divisible by `divisor`."""
  if x.shape[axis] % divisor == 0:
    return x
  n = divisor - x.shape[axis] % divisor
  pad_shape = list(x.shape)
  pad_shape[axis] = n
  fill = jnp.full(pad_shape, value, dtype=x.dtype)
  to_concat = [x, fill] if pad_on_back else [fill, x]
  return jnp.concatenate(to_concat, axis=axis)


def reverse_block_spec(spec, num_seq_blocks: int):
  """Reverses the order of accessing sequence axis tiles."""
  if spec is None:
    return None
  return pl.BlockSpec(
      block_shape=spec.block_shape,
      index_map=lambda b, d, s: spec.index_map(b, d, num_seq_blocks - 1 - s),
  )


def to_blocks(x, s: int):
  """Reshapes `x` such that it's last dim is equal to `s` by adding an extra axis."""
  if x is None:
    return None
  return jnp.reshape(x, (*x.shape[:-1], x.shape[-1] // s, s))


def from_blocks(x):
  """Reverse the effect of `to_blocks`."""
  return jnp.reshape(x, (*x.shape[:-2], -1))


def compute_tile_size(dim_size: int, max_block_size: int, min_block_size: int) -> int:
  """Computes the correct Pallas block size."""
  block_size = max_block_size
  while dim_size % block_size != 0 and block_size >= min_block_size:
    block_size = block_size // 2
  if block_size < min_block_size:
    raise ValueError(
        "Could not find a block size that is a power of 2, which "
        f"divides the last dimension {dim_size} and is between "
        f"{min_block_size} and {max_block_size}."
    )
  return block_size


def compute_pallas_kernel_spec(x, max_seq_block_size: int, min_seq_block_size: int, singleton_tile_size: int = 128):
  """Retrurns the correct Pallas grid."""
  batch_size, seq_len, dim = x.shape

  # Special logic based on the devices
  device = jax.devices()[0]

  if dim % singleton_tile_size != 0:
    raise ValueError(
        f"{dim=} has to be divisible by {singleton_tile_size=} for pallas scan."
    )

  if device.platform == "gpu":
    # For GPUs we always use the full sequence length
    max_seq_block_size = seq_len

  batch_tile_size = 1
  seq_tile_size = compute_tile_size(seq_len, max_seq_block_size, min_seq_block_size)

  # Find the best tile size
  dim_total_tile_size = dim // singleton_tile_size
  dim_tile_size = min(8, dim_total_tile_size)
  dim_grid_size = math.ceil(dim_total_tile_size / dim_tile_size)

  return PallasKernelSpec(
      batch_grid_size=batch_size // batch_tile_size,
      seq_grid_size=seq_len // seq_tile_size,
      dim_grid_size=dim_grid_size,
      batch_tile_size=batch_tile_size,
      seq_tile_size=seq_tile_size,
      dim_tile_size=dim_tile_size,
      singleton_tile_size=singleton_tile_size,
  )


def make_block_specs(kernel_spec: PallasKernelSpec):
  """Returns the block specs for each variable."""
  x_shape = (
      kernel_spec.batch_tile_size,
      kernel_spec.seq_tile_size,
      kernel_spec.dim_tile_size,
      kernel_spec.singleton_tile_size,
  )
  x_spec = pl.BlockSpec(block_shape=x_shape, index_map=lambda b, d, s: (b, s, d, 0))
  # Same as x, but without the sequence dimension
  h_shape = x_shape[:1] + x_shape[2:]
  h_spec = pl.BlockSpec(block_shape=h_shape, index_map=lambda b, d, s: (b, d, 0))
  return x_spec, h_spec


def make_block_shape_and_dtypes(x, kernel_spec: PallasKernelSpec):
  """Returns the correct shape and dtype for each variable."""
  s = kernel_spec.singleton_tile_size
  shape = (x.shape[0], x.shape[1], x.shape[2] // s, s)
  x_shape = jax.ShapeDtypeStruct(shape=shape, dtype=x.dtype)
  dtype = carry_dtype(x.dtype)
  h_shape = jax.ShapeDtypeStruct(shape=shape[:1] + shape[2:], dtype=dtype)
  return x_shape, h_shape


def initialize_carry(h_carry_ref, h_init_ref):
  """Initializes the accumulator carry."""

  def init_h0():
    if h_init_ref is None:
      h_carry_ref[:] = jnp.zeros_like(h_carry_ref)
    else:
      h_carry_ref[:] = h_init_ref[:].astype(h_carry_ref.dtype)

  # Initialize to zeros only the first sequence block
  jax.lax.cond(pl.program_id(2) == 0, init_h0, lambda: None)


def linear_rnn_loop_body(i, h_carry, x_ref, a_ref, y_ref, reverse: bool = False, backprop: bool = False):
  """Evaluates a single step of a linear RNN loop (upstream: a for_loop body over a carry ref)."""
  # Compute the correct indices.
  seq_len = x_ref.shape[1]

  if backprop:
    a_idx = i if reverse else (seq_len - 1 - i)
    x_idx = a_idx + (1 if reverse else -1)
  else:
    a_idx = (seq_len - 2 - i) if reverse else (i + 1)
    x_idx = a_idx

  # RNN
  a_t = a_ref[:, a_idx].astype(h_carry.dtype)
  x_t = x_ref[:, x_idx].astype(h_carry.dtype)
  h_next = a_t * h_carry + x_t

  # Store
  y_ref[:, x_idx] = h_next.astype(y_ref.dtype)
  return h_next


def linear_rnn_pallas_kernel(x_ref, a_ref, h_init_ref, y_ref, h_carry_ref, reverse: bool = False,
                             backprop: bool = False):
  """A Pallas kernel for computing a linear RNN."""
  # Useful indices
  seq_len = x_ref.shape[1]
  last_idx = 0 if reverse else seq_len - 1
  first_idx = (seq_len - 1) - last_idx

  # Initialize carries
  initialize_carry(h_carry_ref, h_init_ref)

  # Compute outside of the for loop the first step, since it contains special
  # logic for the backprop case.
  if backprop:
    idx, a_0 = last_idx, jnp.ones([], dtype=h_carry_ref.dtype)
  else:
    idx, a_0 = first_idx, a_ref[:, first_idx].astype(h_carry_ref.dtype)

  h_carry = a_0 * h_carry_ref[:] + x_ref[:, idx].astype(h_carry_ref.dtype)
  y_ref[:, idx] = h_carry.astype(y_ref.dtype)

  # Execute loop
  h_n = jax.lax.fori_loop(
      0,
      seq_len - 1,
      functools.partial(
          linear_rnn_loop_body, x_ref=x_ref, a_ref=a_ref, y_ref=y_ref, reverse=reverse, backprop=backprop
      ),
      h_carry,
  )

  if backprop:
    a_n = a_ref[:, first_idx].astype(h_carry.dtype)
    h_n = h_n * a_n

  # Store the last values of the loop in the carry references
  h_carry_ref[:] = h_n


def linear_rnn_pallas_call(x, a, h0, reverse, kernel_spec, backprop):
  """A convience wrapper for the linear_rnn_pallas_kernel."""
  # Compute the output shapes.
  x_shape, h_shape = make_block_shape_and_dtypes(x, kernel_spec)
  out_shapes = [x_shape, h_shape]

  # Make input and output specs.
  x_spec, h_spec = make_block_specs(kernel_spec)
  in_specs = [x_spec, x_spec, (None if h0 is None else h_spec)]
  out_specs = [x_spec, h_spec]

  if reverse != backprop:
    reverse_seq = functools.partial(reverse_block_spec, num_seq_blocks=kernel_spec.seq_grid_size)
    in_specs = list(map(reverse_seq, in_specs))
    out_specs = list(map(reverse_seq, out_specs))

  # Prepare the arguments in correct format.
  args = (x, a, h0)
  args = [to_blocks(arg, kernel_spec.singleton_tile_size) for arg in args]

  # Execute the Pallas call.
  outputs = pl.pallas_call(
      functools.partial(linear_rnn_pallas_kernel, reverse=reverse, backprop=backprop),
      out_shape=out_shapes,
      in_specs=in_specs,
      out_specs=out_specs,
      grid=kernel_spec.grid,
  )(*args)

  # Return arguments in correct format.
  return tuple([from_blocks(out) for out in outputs])


@functools.partial(jax.custom_vjp, nondiff_argnums=[3, 4])
def _lru(x, a, h0, reverse: bool, kernel_spec: PallasKernelSpec):
  """Runs the RNN forward pass without residuals for backprop."""
  return linear_rnn_pallas_call(x=x, a=a, h0=h0, reverse=reverse, kernel_spec=kernel_spec, backprop=False)


def _lru_fwd(x, a, h0, reverse, kernel_spec):
  y, h_last = linear_rnn_pallas_call(x=x, a=a, h0=h0, reverse=reverse, kernel_spec=kernel_spec, backprop=False)
  return (y, h_last), (y, a, h0, h0 is not None)


def _lru_bwd(reverse, kernel_spec, res, dy_and_dh_last):
  dy, dh_last = dy_and_dh_last
  y, a, h0, has_h0 = res
  dx, dh0 = linear_rnn_pallas_call(x=dy, a=a, h0=dh_last, reverse=reverse, kernel_spec=kernel_spec, backprop=True)

  # Compute the outputs shifted by 1.
  if h0 is None:
    h0 = jnp.zeros_like(y[:, 0])
  h0 = h0[:, None].astype(y.dtype)
  y_shifted = [y[:, 1:], h0] if reverse else [h0, y[:, :-1]]
  y_shifted = jnp.concatenate(y_shifted, axis=1)
  da = dx * y_shifted
  return dx, da, (dh0 if has_h0 else None)


_lru.defvjp(_lru_fwd, _lru_bwd)


def lru_pallas_scan(x, a, h0=None, reverse: bool = False, max_seq_block_size: int = 256,
                    min_seq_block_size: int = 16, pad_seq_to_min_block_size: bool = True):
  """Runs the LRU scan using a Pallas kernel: h_t = a_t * h_{t-1} + x_t over (batch, seq, dim)."""
  *_, t, d = x.shape
  if pad_seq_to_min_block_size:
    x = pad_array_to_divisible(x, divisor=min_seq_block_size, axis=-2, pad_on_back=not reverse, value=0.0)
    a = pad_array_to_divisible(a, divisor=min_seq_block_size, axis=-2, pad_on_back=not reverse, value=1.0)

  kernel_spec = compute_pallas_kernel_spec(x=x, max_seq_block_size=max_seq_block_size,
                                           min_seq_block_size=min_seq_block_size)
  y, h_last = _lru(x, a, h0, reverse, kernel_spec)

  if reverse:
    y = y[..., -t:, :d]
  else:
    y = y[..., :t, :d]
  return y, h_last


# ----------------------------------------------------------------------------- ours


def lru_scan_ref(x, a, h0=None, reverse=False, **_):
  def step(h, xa):
    xt, at = xa
    h = at.astype(jnp.float32) * h + xt.astype(jnp.float32)
    return h, h.astype(x.dtype)

  h_init = jnp.zeros((x.shape[0], x.shape[2]), jnp.float32) if h0 is None else h0.astype(jnp.float32)
  h_last, y = jax.lax.scan(step, h_init, (jnp.swapaxes(x, 0, 1), jnp.swapaxes(a, 0, 1)), reverse=reverse)
  return jnp.swapaxes(y, 0, 1), h_last


def _lru_inputs():
  batch, seq, dim = 2, 500, 512  # seq not a multiple of the block: padded to 512
  k1, k2, k3 = jax.random.split(jax.random.key(11), 3)
  x = jax.random.normal(k1, (batch, seq, dim), jnp.float32)
  a = jax.nn.sigmoid(jax.random.normal(k2, (batch, seq, dim), jnp.float32) + 2.0)  # in (0, 1)
  h0 = jax.random.normal(k3, (batch, dim), jnp.float32)
  return x, a, h0


INSPECT = {
    "lru_pallas_scan": {
        "args": _lru_inputs, "reference": "lru_scan_ref", "atol": 1e-4, "rtol": 1e-4,
        "params": {"max_seq_block_size": [256, 128, 512, 1024], "reverse": [False, True]},
    },
}
