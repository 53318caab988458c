# Held-out kernel for jax-inspector (round seven), vendored from:
#   https://github.com/jax-ml/jax-llm-examples/blob/8b4b24602e0652100e9835ec6d91fed58bbea472/serving/serving_jax/attention_cache_utils.py
# (last changed upstream in dcb81b76e949062ed86b80a83afd8ee0594a53fd).
# Licence: Apache License 2.0 (the file's own header below; the repository's LICENSE).
# Copyright 2025 The JAX Authors.
#
# Verbatim: _tpu_ragged_dynamic_update_slice_in_dim (the Pallas KV-cache insert) and the two
# helpers above it in the file (next_power_of_2, _pad_after). Dropped: the rest of the file (the
# KV-cache dataclasses and insert/get functions built on it, auto_axes sharding), and the imports
# only they used. Ours, below the "ours" line: a wrapper taking the arrays positionally, an XLA
# reference of the same scatter, INSPECT.
# Style: a ragged scatter into a KV cache along its time axis: a grid of (valid updates, time
# windows) whose first extent is a traced value (the count of valid batch indices, a dynamic grid),
# three scalar-prefetched operands (cache row per update, update row, a (B, windows) index map with
# wraparound), (heads, time_window, head_dim) blocks of the cache and of the update, the cache
# aliased to the output (input_output_aliases={3: 0}), starts/lengths whole in SMEM via in_specs,
# one f32 VMEM scratch window carried across steps, pltpu.roll by a run-time shift, lax.cond
# between the rolled update and the cache block. dimension_semantics (parallel, arbitrary).
# Copyright 2025 The JAX Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import math
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

next_power_of_2 = lambda x: 2 ** math.ceil(math.log2(max(x, 1)))
_pad_after = lambda x, l, axis: jnp.pad(x, [(0, 0) if i != axis else (0, l - x.shape[i]) for i in range(x.ndim)])

########################################################################################################################
# optimized ragged sequence update (scatter along time axis) ###########################################################
########################################################################################################################

def _tpu_ragged_dynamic_update_slice_in_dim(
    x: jax.Array,
    u: jax.Array,
    batch_idxs: jax.Array,
    starts: jax.Array,
    lengths: jax.Array,
    time_window: int = 128,  # 128 is likely optimal-enough, barring sequences > 8192
    time_axis: int = 2,
    interpret: bool = False,
    time_minor: bool = False,
):
    """Scatter (update) along a `time_axis` with wraparound. Avoids relayout by operating in windows >= sublanes."""

    work_dtype = jnp.float32 if jnp.issubdtype(u.dtype, jnp.floating) else jnp.int32

    def kernel(x_batch, u_batch, x_idx_map, x_ref, u_ref, starts_ref, lengths_ref, out_ref, scratch_ref):
        del x_batch, x_idx_map
        i, j = pl.program_id(0), pl.program_id(1)
        start, length = starts_ref[u_batch[i]], lengths_ref[u_batch[i]]
        max_it = (length != 0) * (((length + start - 1) // time_window) - (start // time_window) + 1)
        scratch_ref[...] = jnp.where(j != 0, scratch_ref[...], jnp.zeros_like(scratch_ref))
        roll_axis = 1 if not time_minor else (scratch_ref.ndim - 1)
        iota = jax.lax.broadcasted_iota(jnp.int32, scratch_ref.shape, roll_axis)

        def compute_tile():
            # we need to work in 32 bit types to satisfy the VPU
            u = u_ref[...].astype(work_dtype)

            shift = jax.lax.rem(start, time_window)
            prev_tile = pltpu.roll(scratch_ref[...], shift, axis=roll_axis)
            new_tile = pltpu.roll(u, shift, axis=roll_axis)
            scratch_ref[...] = u  # save the current u for next iteration for a non-aligned moving window
            next_mask = iota >= shift
            update = jnp.where(next_mask, new_tile, prev_tile)

            # handle the first tile by using existing x_ref values what our non-aligned window does not touch
            mask_first = lambda update: jnp.where(iota >= shift, update, x_ref[...])
            first_tile = jnp.logical_and(jax.lax.rem(start, time_window) != 0, j == 0)
            update = jnp.where(first_tile, mask_first(update), update)

            # handle the last tile by using existing x_ref values what our non-aligned window does not touch
            mask_last = lambda update: jnp.where(iota < jax.lax.rem(start + length, time_window), update, x_ref[...])
            last_tile = jnp.logical_and(jax.lax.rem(length + start, time_window) != 0, j == max_it - 1)
            update = jnp.where(last_tile, mask_last(update), update).astype(x_ref.dtype)
            return update

        out_ref[...] = jax.lax.cond(j < max_it, compute_tile, lambda: x_ref[...])

    time_window = min(time_window, x.shape[time_axis])
    assert x.shape[time_axis] % time_window == 0, f"{x.shape=} at {time_axis=} must be divisible by {time_window=}"
    assert x.ndim >= 2 and u.ndim >= 2 and x.ndim == u.ndim
    lengths = jnp.minimum(lengths, u.shape[time_axis])

    N_time_windows = pl.cdiv(x.shape[time_axis], time_window)

    # pack the updates that have a valid batch index, don't attend to those that do not (scatter-drop optimization)
    valid_batch_idxs = batch_idxs < x.shape[0]
    u_batch = jnp.argsort(valid_batch_idxs, descending=True)  # packed valid arange
    x_batch = batch_idxs[jnp.where(valid_batch_idxs, size=valid_batch_idxs.size, fill_value=0)]
    x_idx_map = jax.lax.rem(
        jnp.arange(N_time_windows)[None, :] + starts[:, None] // time_window, x.shape[time_axis] // time_window
    )

    # we're using a rectangular memory pipeline grid for updates, but some sequences might be shorter
    # skip reading those blocks from x in the memory pipeline to save HBM boundwidth
    max_it = (lengths != 0) * ((starts + lengths - 1) // time_window - (starts // time_window) + 1)
    final_useful_idx = jnp.take_along_axis(x_idx_map, jnp.minimum(max_it[:, None], x_idx_map.shape[-1] - 1), 1)
    x_idx_map = jnp.where(jnp.arange(x_idx_map.shape[-1])[None, :] < max_it[:, None], x_idx_map, final_useful_idx)

    # block specs
    head_idx, rem_idx = tuple(0 for _ in range(1, time_axis)), tuple(0 for _ in range(time_axis + 1, x.ndim))
    if time_minor:
      x_spec = pl.BlockSpec(
          (None, *x.shape[1:time_axis], *x.shape[time_axis + 1 :], time_window),
          lambda i, j, x_batch, u_batch, x_idx_map_ref: (x_batch[i], *head_idx, *rem_idx, x_idx_map_ref[i, j]),
      )
      max_j = pl.cdiv(u.shape[time_axis], time_window) - 1
      u_spec = pl.BlockSpec(
          (None, *u.shape[1:time_axis], *u.shape[time_axis + 1 :], time_window),
          lambda i, j, x_batch, u_batch, _: (u_batch[i], *head_idx, *rem_idx, jnp.minimum(j, max_j)),
      )
      scratch_shape = pltpu.VMEM((*u.shape[1:time_axis], *u.shape[3:], time_window), work_dtype)
    else:
      x_spec = pl.BlockSpec(
          (None, *x.shape[1:time_axis], time_window, *x.shape[time_axis + 1 :]),
          lambda i, j, x_batch, u_batch, x_idx_map_ref: (x_batch[i], *head_idx, x_idx_map_ref[i, j], *rem_idx),
      )
      max_j = pl.cdiv(u.shape[time_axis], time_window) - 1
      u_spec = pl.BlockSpec(
          (None, *u.shape[1:time_axis], time_window, *u.shape[time_axis + 1 :]),
          lambda i, j, x_batch, u_batch, _: (u_batch[i], *head_idx, jnp.minimum(j, max_j), *rem_idx),
      )
      scratch_shape = pltpu.VMEM((*u.shape[1:time_axis], time_window, *u.shape[3:]), work_dtype)
    starts_spec = pl.BlockSpec(starts.shape, memory_space=pltpu.SMEM)
    lengths_spec = pl.BlockSpec(lengths.shape, memory_space=pltpu.SMEM)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3,  # SMEM prefetch of x_batch, u_batch and x_idx_map
        grid=(jnp.minimum(jnp.sum(valid_batch_idxs), x.shape[0]), N_time_windows),  # only attend to valid batch idxs
        in_specs=[x_spec, u_spec, starts_spec, lengths_spec],
        out_specs=x_spec,
        scratch_shapes=[scratch_shape],
    )
    should_transpose = time_minor and time_axis < x.ndim - 1
    kernel_fn = lambda out_shape: pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=out_shape,
        interpret=interpret,
        input_output_aliases={3: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )
    if should_transpose:
        permute = [i for i in range(time_axis)] + [i for i in range(time_axis+1, x.ndim)] + [time_axis]
        xT, uT = x.transpose(permute), u.transpose(permute)
        return kernel_fn(out_shape=xT)(x_batch, u_batch, x_idx_map, xT, uT, starts, lengths).transpose(permute)
    else:
        return kernel_fn(out_shape=x)(x_batch, u_batch, x_idx_map, x, u, starts, lengths)

# ----------------------------------------------------------------------------- ours

def ragged_update(x, u, batch_idxs, starts, lengths, time_window=128):
    """Write u[i, :, :lengths[i]] into x[batch_idxs[i], :, starts[i]:starts[i] + lengths[i]] (time axis 2)."""
    return _tpu_ragged_dynamic_update_slice_in_dim(x, u, batch_idxs, starts, lengths, time_window=time_window)

def ragged_update_reference(x, u, batch_idxs, starts, lengths, time_window=128):
    T = x.shape[2]
    lengths = jnp.minimum(lengths, u.shape[2])
    for i in range(u.shape[0]):
        t = jnp.arange(u.shape[2])
        dst = jax.lax.rem(starts[i] + t, T)
        row = x[jnp.minimum(batch_idxs[i], x.shape[0] - 1)]
        new = row.at[:, dst, :].set(jnp.where((t < lengths[i])[None, :, None], u[i], row[:, dst, :]))
        x = jnp.where(batch_idxs[i] < x.shape[0], x.at[jnp.minimum(batch_idxs[i], x.shape[0] - 1)].set(new), x)
    return x

INSPECT = {
    "ragged_update": {
        "args": "bf16[4,8,1024,128] bf16[2,8,512,128] i32[2] i32[2] i32[2]",
        "params": {"time_window": [128]}, "reference": "ragged_update_reference",
    },
}
