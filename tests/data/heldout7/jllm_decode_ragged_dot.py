# Held-out kernel for jax-inspector (round seven), vendored from:
#   https://github.com/jax-ml/jax-llm-examples/blob/8b4b24602e0652100e9835ec6d91fed58bbea472/deepseek_r1_jax/deepseek_r1_jax/decode_ragged_dot.py
# (last changed upstream in 7e054f3ece40aa03167983362a8085f3a8dc47d6; kimi_k2 holds the same file).
# Licence: Apache License 2.0 (the file's own header below; the repository's LICENSE).
# Copyright 2025 The JAX Authors.
#
# Verbatim: decode_ragged_dot_kernel, decode_ragged_dot and decode_ragged_dot_ref. Dropped: the tqdm
# import and upstream's test/profiling functions (test_profile_speed, _numeric_test_case,
# test_numerics, the __main__ block), which need a TPU and tqdm. Ours, below the "ours" line: a
# wrapper taking the arrays positionally, a reference, INSPECT.
# Style: MoE decode grouped matmul: a (g / block_g, n / block_n) grid with two scalar-prefetched
# index maps (SMEM) steering the lhs, rhs and output blocks, a (block_g, k, m) block of expert
# weights per step (double-buffered), the whole group_sizes in SMEM via in_specs, three (1,) SMEM
# scratch carries, and a fori_loop over block_compute row windows holding a while_loop over the
# groups, each a lax.cond'ed (block_compute, k) @ (k, m) matmul with f32 accumulation, pl.ds
# loads/stores of the output block. No dimension_semantics, no vmem_limit_bytes.
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

from pathlib import Path
import random as pyrandom
from functools import partial

import jax
from jax import numpy as jnp
from jax import random
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def decode_ragged_dot_kernel(
    # scalar prefetch
    lhs_idx_map_ref,  # [g // block_g, n // block_n]
    rhs_idx_map_ref,  # [g // block_g, n // block_n]
    # inputs
    x_ref,  # [block_n, k]
    A_ref,  # [block_g, k, m]
    group_sizes_ref,  # [g]
    # outputs
    y_ref,  # [block_n, m]  # hbm scratch output, to-be-reduced over 0-axis
    # (scratch) persistent lhs idx
    lhs_idx_ref,  # [1]
    group_id_ref,  # [1]
    group_size_ref,  # [1]
    # hyperparameters
    block_n: int,
    block_g: int,
    block_compute: int,
    n: int,
    g: int,
):
    pid_g, pid_i = pl.program_id(0), pl.program_id(1)
    (_, k), _, m = x_ref.shape, A_ref.shape[0], A_ref.shape[-1]
    block_n_id = lhs_idx_map_ref[pid_g, pid_i]

    lhs_idx = jnp.where((pid_g == 0) & (pid_i == 0), 0, lhs_idx_ref[0])
    group_id = jnp.where((pid_g == 0) & (pid_i == 0), 0, group_id_ref[0])
    group_size = jnp.where(pid_i == 0, group_sizes_ref[pid_g * block_g], group_size_ref[0])

    idx = jnp.maximum(pid_g * lhs_idx_map_ref.shape[-1] + pid_i - 1, 0)
    prev_block_n_id = lhs_idx_map_ref[idx // lhs_idx_map_ref.shape[-1], idx % lhs_idx_map_ref.shape[-1]]
    is_block_n_new = ((pid_g == 0) & (pid_i == 0)) | (prev_block_n_id != block_n_id)

    @pl.when(is_block_n_new)
    def _():
        y_ref[...] = jnp.zeros_like(y_ref)

    # for i in range(lhs_idx // block_compute, n // block_compute): # blockwise over rows in lhs
    def outer_body_fn(i, carry):
        lhs_idx, group_id, group_size = carry
        local_i = i - block_n_id * (block_n // block_compute)
        y = y_ref[pl.ds(local_i * block_compute, block_compute), :].astype(jnp.float32)
        x = x_ref[pl.ds(local_i * block_compute, block_compute), :]

        # iterate until lhs rows are exhausted or we use up all rhs groups
        def cond_fn(val):
            y, lhs_idx, group_id, group_size = val
            del y, group_size
            local_group_id = group_id - pid_g * block_g
            return (lhs_idx < (i + 1) * block_compute) & (local_group_id < A_ref.shape[0])

        def body_fn(val):
            y, lhs_idx, group_id, group_size = val

            # check how many valid elements we computed and
            els2compute = jnp.maximum(jnp.minimum(group_size, ((i + 1) * block_compute - lhs_idx).astype(jnp.int32)), 0)
            group_exhausted = els2compute >= group_size
            local_group_id = group_id - pid_g * block_g

            def _compute():
                # compute the actual product with the group_id group
                A = A_ref[local_group_id, :, :]
                xA = jax.lax.dot_general(x, A, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32).astype(
                    y.dtype
                )
                # write to y accumulator masking already computed values
                iota = jax.lax.broadcasted_iota(jnp.int32, (block_compute, m), dimension=0) + i * block_compute
                mask = (iota >= lhs_idx) & (iota < (lhs_idx + els2compute))
                return jnp.where(mask, xA, y)

            new_y = jax.lax.cond(els2compute > 0, _compute, lambda: y)

            new_group_id = jnp.where(group_exhausted, group_id + 1, group_id)
            next_group_size = group_sizes_ref[pid_g * block_g + jnp.clip(local_group_id + 1, max=g - 1)]
            new_group_size = jnp.where(group_exhausted, next_group_size, group_size - els2compute)
            new_lhs_idx = lhs_idx + els2compute

            return new_y, new_lhs_idx, new_group_id, new_group_size

        y, new_lhs_idx, new_group_id, new_group_size = jax.lax.while_loop(
            cond_fn, body_fn, (y, lhs_idx, group_id, group_size)
        )
        y_ref[pl.ds(local_i * block_compute, block_compute), :] = y.astype(y_ref.dtype)
        return new_lhs_idx, new_group_id, new_group_size

    start_idx = jnp.maximum(lhs_idx, block_n_id * block_n) // block_compute
    end_idx = jnp.minimum(n, (block_n_id + 1) * block_n) // block_compute
    new_lhs_idx, new_group_id, new_group_size = jax.lax.fori_loop(
        start_idx, end_idx, outer_body_fn, (lhs_idx, group_id, group_size)
    )
    lhs_idx_ref[0], group_id_ref[0], group_size_ref[0] = new_lhs_idx, new_group_id, new_group_size


################################################################################


@partial(jax.jit, static_argnames=("block_n", "block_g", "block_compute", "interpret"))
def decode_ragged_dot(
    lhs: jax.Array,  # [n, k]
    rhs: jax.Array,  # [g, k, m]
    group_sizes: jax.Array,  # g[]
    block_n: int = int(1e20),  # by default replicate activations fully
    block_g: int = 8,
    block_compute: int = 8,
    interpret: bool = False,
) -> jax.Array:
    """Computes y = x @ A, x.shape=[n, k], A.shape=[g, k, m]; rows in x are assigned to groups via `group_sizes`.

    To use a quantized version pass quantized arguments and either pre-scale lhs before or post-scale the result.

    The implementation attempts to maximize HBM BW of rhs by loading batches along g axis. It works most efficiently
    when lhs fits into VMEM entirely. Alternatively provide `block_n` splits to split lhs.
    THIS REQUIRES [g, n, m] EXTRA HBM SCRATCH.

     Args:
        lhs: The input array of shape (n, k) where groups of rows are raggedly assigned to g axis via `group_sizes`.
        rhs: The stack of matrices (k, m) [g, k, m]. For example g axis can represent experts.
        group_sizes: An array of shape (g,) containing the sizes of each group in the ragged array `A`.
        block_n: Splitting rows in x if activations do not fit in VMEM memory - do not use unless necessary.
        block_g: The batch of group entries in A to preload at the same time.
        block_compute: The compute window moving over dimension n.
        interpret: Enable the pallas interpret mode.

    Returns:
        The result of the ragged dot product, an array of shape (g, n).
    """

    block_n = min(block_n, lhs.shape[0])
    block_compute = min(block_compute, block_n)
    assert rhs.ndim == 3 and lhs.ndim == 2, "lhs must have 2 dims, rhs 3 dims"
    assert rhs.shape[0] % block_g == 0, f"{block_g=} must divide {rhs.shape[0]=} (# of groups) must divide"
    assert lhs.shape[0] % block_n == 0, f"{block_n=} must divide {lhs.shape[0]=}"
    assert block_n % block_compute == 0
    assert rhs.shape[:1] == group_sizes.shape
    (n, k), (g, _, m) = lhs.shape, rhs.shape

    grid = (g // block_g, n // block_n)

    # compute lhs prefetch map, only increment lhs idx if work is exhausted to avoid revisiting rows in lhs/output
    # [[ 0 0 1 1 ]
    #  [ 1 1 1 1 ]
    #  [ 1 2 2 2 ]
    #  [ 3 4 4 4 ]]
    work_total = jnp.pad(jnp.cumsum(jnp.sum(group_sizes.reshape((-1, block_g)), -1), axis=-1), (1, 0))
    min_lhs_j = work_total[:-1] // block_n
    lhs_idx_map = min_lhs_j[:, None] + jnp.arange(grid[1])[None, :]
    lhs_idx_map = jnp.clip(lhs_idx_map, max=jnp.pad(min_lhs_j[1:], (0, 1), constant_values=grid[1] - 1)[:, None])

    # compute rhs prefetch map
    # [ 1 1 1 3 4 5 5 5] if 8 groups, but only {1, 3, 4, 5} active
    def _compute_rhs_idx(i_prev, mask):
      i, prev = i_prev
      idx = jnp.where(mask, i, prev)
      return (i - 1, idx), idx

    rhs_work_mask = jnp.sum(group_sizes.reshape((-1, block_g)), -1) > 0
    unique_rhs_groups = jnp.sort(jnp.arange(rhs_work_mask.shape[-1]) * rhs_work_mask, descending=True)
    flipped_rhs_groups_mapping = jnp.maximum(jnp.cumsum(jnp.flip(rhs_work_mask, axis=-1)) - 1, 0)
    rhs_idx_map = jnp.flip(unique_rhs_groups[flipped_rhs_groups_mapping], axis=-1)

    def lhs_prefetch(i, j, lhs_idx_map_ref, rhs_idx_map_ref):
        # as opposed to: `return j, 0`
        del rhs_idx_map_ref
        return lhs_idx_map_ref[i, j], 0

    def rhs_prefetch(i, j, lhs_idx_map_ref, rhs_idx_map_ref):
        # as opposed to: `return i, 0, 0`
        del j, lhs_idx_map_ref
        return rhs_idx_map_ref[i], 0, 0

    in_specs = [
        pl.BlockSpec((block_n, k), lhs_prefetch),
        pl.BlockSpec((block_g, *rhs.shape[-2:]), rhs_prefetch),
        pl.BlockSpec((group_sizes.size,), lambda i, j, *_: (0,), memory_space=pltpu.SMEM),
    ]
    out_specs = pl.BlockSpec((block_n, m), lhs_prefetch)

    scratch_shapes = [
        pltpu.SMEM((1,), dtype=jnp.int32),
        pltpu.SMEM((1,), dtype=jnp.int32),
        pltpu.SMEM((1,), dtype=jnp.int32),
    ]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        scratch_shapes=scratch_shapes,
    )

    out_shape = jax.ShapeDtypeStruct((n, m), dtype=lhs.dtype)
    return pl.pallas_call(
        partial(decode_ragged_dot_kernel, block_n=block_n, block_g=block_g, block_compute=block_compute, n=n, g=g),
        out_shape=out_shape,
        grid_spec=grid_spec,
        interpret=interpret,
    )(lhs_idx_map, rhs_idx_map, lhs, rhs, group_sizes.astype(jnp.int32))


@partial(jax.jit, static_argnames=("block_n", "block_g", "block_compute"))
def decode_ragged_dot_ref(
    lhs: jax.Array,
    rhs: jax.Array,
    group_sizes: jax.Array,
    block_n: int = 64,
    block_g: int = 16,
    block_compute: int = 8,
) -> jax.Array:
    return jax.lax.ragged_dot(lhs, rhs, group_sizes)


# ----------------------------------------------------------------------------- ours


def decode_ragged_dot_entry(lhs, rhs, group_sizes, block_n=int(1e20), block_g=8, block_compute=8):
    return decode_ragged_dot(lhs, rhs, group_sizes, block_n=block_n, block_g=block_g, block_compute=block_compute)


def decode_ragged_dot_reference(lhs, rhs, group_sizes, block_n=int(1e20), block_g=8, block_compute=8):
    return decode_ragged_dot_ref(lhs, rhs, group_sizes)


INSPECT = {
    "decode_ragged_dot_entry": {
        "args": "bf16[64,1024] bf16[16,1024,256] i32[16]",
        "params": {"block_g": [8], "block_compute": [8]},
    },
}
