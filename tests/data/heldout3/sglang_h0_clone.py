# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/sgl-project/sglang-jax/blob/064baf64f2d959574ae0d837df371c793d3f3225/python/sgl_jax/srt/kernels/h0_clone/kernel.py
# License: Apache-2.0 (the sglang-jax repository's LICENSE; the file has no header of its own):
#
#   Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file
#   except in compliance with the License. You may obtain a copy of the License at
#   http://www.apache.org/licenses/LICENSE-2.0
#   Unless required by applicable law or agreed to in writing, software distributed under the
#   License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.
#
# Trimmed: the backend dispatch (interpret on a CPU backend, the XLA fallback off TPU) is cut so
# the Pallas path is always the one traced; the kernel itself is verbatim. Ours: inputs, INSPECT.
# Style: two scalar-prefetch operands, pl.ANY refs, DMA gather/scatter through a 1-D VMEM scratch,
# an input/output alias.
"""In-place slot cloning for recurrent-state copy-on-write.

The recurrent pool keeps temporal state and convolution state in separate HBM
buffers.  Each invocation aliases its buffer input to its output and copies the
selected source rows directly to their destination rows; it therefore avoids
the full-buffer materialization produced by ``buf.at[dst].set(buf[src])``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.experimental.pallas as pl
import jax.experimental.pallas.tpu as pltpu
import jax.numpy as jnp


def _block_size(num_elements: int) -> int:
    """Choose a lane-friendly block that tiles a slot without a tail mask."""
    for candidate in range(min(num_elements, 128), 0, -1):
        if num_elements % candidate == 0:
            return candidate
    raise AssertionError("every positive integer has a divisor in [1, num_elements]")


def _clone_slots_kernel(
    src_ref, dst_ref, buffer_ref, out_ref, scratch_ref, sem, *, block_size: int
):
    """Copy one contiguous payload tile for one (src, dst) pair."""
    pair = pl.program_id(0)
    tile = pl.program_id(1)
    src = src_ref[pair]
    dst = dst_ref[pair]
    offset = tile * block_size
    payload_slice = pl.ds(offset, block_size)

    # Pool buffers live in HBM (pl.ANY), so Mosaic requires DMA rather than a
    # direct load/store.  For the no-op sentinel, copy dst onto itself; this
    # avoids a read from the output alias while preserving its contents.
    source_slot = jnp.where(src == 0, dst, src)
    gather = pltpu.make_async_copy(
        buffer_ref.at[source_slot, payload_slice], scratch_ref, sem
    )
    gather.start()
    gather.wait()
    scatter = pltpu.make_async_copy(scratch_ref, out_ref.at[dst, payload_slice], sem)
    scatter.start()
    scatter.wait()


def _slow_clone(buffer: jax.Array, src_indices: jax.Array, dst_indices: jax.Array) -> jax.Array:
    """Portable reference used outside TPU Pallas lowering."""
    payload_dims = (1,) * (buffer.ndim - 1)
    values = jnp.where(
        (src_indices == 0).reshape((-1,) + payload_dims),
        buffer[dst_indices],
        buffer[src_indices],
    )
    return buffer.at[dst_indices].set(values)


def clone_slots_inplace(
    buffer: jax.Array,
    src_indices: jax.Array,
    dst_indices: jax.Array,
    *,
    interpret: bool = False,
) -> jax.Array:
    """Clone local pool slots into an aliased output buffer.

    ``buffer`` must have slot as its leading dimension. ``src_indices`` and
    ``dst_indices`` are rank-one, per-DP-rank-local arrays with identical
    shapes. A source index of zero leaves the corresponding destination slot
    unchanged. Callers must provide pairwise distinct destination slots that
    do not overlap any non-zero source slot in the same launch.
    """
    if buffer.ndim < 2:
        raise ValueError(f"buffer must have a slot and payload dimension, got {buffer.shape}")
    if src_indices.ndim != 1 or dst_indices.ndim != 1:
        raise ValueError(
            "src_indices and dst_indices must be rank-one, got "
            f"{src_indices.shape} and {dst_indices.shape}"
        )
    if src_indices.shape != dst_indices.shape:
        raise ValueError(
            f"src_indices shape {src_indices.shape} != dst_indices shape {dst_indices.shape}"
        )
    if src_indices.dtype != jnp.int32 or dst_indices.dtype != jnp.int32:
        raise ValueError("src_indices and dst_indices must use int32")
    if src_indices.shape[0] == 0:
        return buffer

    slot_payload = math.prod(buffer.shape[1:])
    block_size = _block_size(slot_payload)
    buffer_2d = buffer.reshape((buffer.shape[0], slot_payload))

    kernel = functools.partial(_clone_slots_kernel, block_size=block_size)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        grid=(src_indices.shape[0], slot_payload // block_size),
        scratch_shapes=[
            pltpu.VMEM((block_size,), buffer.dtype),
            pltpu.SemaphoreType.DMA,
        ],
    )
    cloned_2d = pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(buffer_2d.shape, buffer_2d.dtype),
        input_output_aliases={2: 0},
        interpret=interpret,
        name="recurrent-h0-clone",
    )(src_indices, dst_indices, buffer_2d)
    return cloned_2d.reshape(buffer.shape)


# ----------------------------------------------------------------------------- ours


def clone_slots_ref(buffer, src_indices, dst_indices):
    return _slow_clone(buffer, src_indices, dst_indices)


def _clone_inputs():
    # 32 slots of a (4, 16, 128) f32 recurrent state; four clones, one no-op (src 0)
    buffer = jax.random.normal(jax.random.key(4), (32, 4, 16, 128), jnp.float32)
    src = jnp.asarray([3, 0, 7, 12], jnp.int32)
    dst = jnp.asarray([20, 21, 22, 23], jnp.int32)
    return buffer, src, dst


INSPECT = {
    "clone_slots_inplace": {"args": _clone_inputs, "reference": "clone_slots_ref", "atol": 0, "rtol": 0},
}
