# Held-out kernel for jax-inspector (issue 28, round four), vendored from:
#   https://github.com/marin-community/marin/blob/2fa96435eadce83d20bb974f2624c20ffd2ec002/lib/levanter/src/levanter/kernels/pallas/ssd/pallas_tpu.py
# Copyright The Levanter Authors
# SPDX-License-Identifier: Apache-2.0
# (Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0)
#
# The kernel, _validate_block_sizes and the pallas_call are verbatim. Changed: the BlockSizes
# dataclass is three keywords (query/key/value_block_size) and group_block_size is fixed at 1, as
# the prototype requires; dropped: the jax.jit decorator, the TPU-backend guards (they refuse to
# trace on a CPU), the cost estimate (its helper lives in another Levanter module) and jaxtyping
# annotations. Ours: the reference (the file's own _local_output_tile_reference, applied per
# group over the whole chunk), inputs, INSPECT.
# Style: Mamba-2 SSD intra-chunk block: two matmuls in a row (C B^T, then (C B^T * decay) x),
# an exp'd causal decay mask built from iotas, a 4-D grid with the key axis innermost and an f32
# accumulator in scratch, (1, block) blocks of 2-D inputs, PrefetchScalarGridSpec with no
# scalars.
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


@dataclass(frozen=True)
class BlockSizes:
    group_block_size: int = 1
    query_block_size: int | None = None
    key_block_size: int | None = None
    value_block_size: int | None = None


def _local_output_tile_reference(
    a_q: jax.Array,
    a_k: jax.Array,
    src_k: jax.Array,
    b_k: jax.Array,
    c_q: jax.Array,
    x_k: jax.Array,
) -> jax.Array:
    acc_dtype = jnp.float32
    q_block_size = a_q.shape[0]
    k_block_size = a_k.shape[0]
    q_index = jnp.arange(q_block_size, dtype=jnp.int32)
    k_index = jnp.arange(k_block_size, dtype=jnp.int32)
    mask = q_index[:, None] >= k_index[None, :]
    decay = jnp.exp(jnp.where(mask, a_q.astype(acc_dtype)[:, None] - a_k.astype(acc_dtype)[None, :], -jnp.inf))
    cb = jnp.dot(c_q.astype(acc_dtype), b_k.astype(acc_dtype).T, preferred_element_type=acc_dtype)
    x_scaled = x_k.astype(acc_dtype) * src_k.astype(acc_dtype)[:, None]
    return jnp.dot(cb * decay, x_scaled, preferred_element_type=acc_dtype)


def _ssd_intra_chunk_kernel(
    a_q_ref,
    a_k_ref,
    src_k_ref,
    b_k_ref,
    c_q_ref,
    x_k_ref,
    out_ref,
    acc_ref,
    *,
    q_block_size: int,
    k_block_size: int,
    num_k_blocks: int,
):
    k_block_index = pl.program_id(3)
    q_start = pl.program_id(1) * q_block_size
    k_start = k_block_index * k_block_size
    acc_dtype = acc_ref.dtype

    @pl.when(k_block_index == 0)
    def init() -> None:
        acc_ref[...] = jnp.zeros_like(acc_ref)

    a_q = a_q_ref[0].astype(acc_dtype)
    a_k = a_k_ref[0].astype(acc_dtype)
    src_k = src_k_ref[0].astype(acc_dtype)
    b_k = b_k_ref[0].astype(acc_dtype)
    c_q = c_q_ref[0].astype(acc_dtype)
    x_k = x_k_ref[0].astype(acc_dtype)

    q_index = q_start + jnp.arange(q_block_size, dtype=jnp.int32)
    k_index = k_start + jnp.arange(k_block_size, dtype=jnp.int32)
    mask = q_index[:, None] >= k_index[None, :]
    decay = jnp.exp(jnp.where(mask, a_q[:, None] - a_k[None, :], -jnp.inf))
    cb = jnp.dot(c_q, b_k.T, preferred_element_type=acc_dtype)
    x_scaled = x_k * src_k[:, None]
    acc_ref[...] = acc_ref[...] + jnp.dot(cb * decay, x_scaled, preferred_element_type=acc_dtype)

    @pl.when(k_block_index == num_k_blocks - 1)
    def store() -> None:
        out_ref[0, ...] = acc_ref[...].astype(out_ref.dtype)


def _validate_block_sizes(
    *,
    a_log_cumsum: jax.Array,
    x: jax.Array,
    block_sizes: BlockSizes,
    interpret: bool,
) -> tuple[int, int, int]:
    if a_log_cumsum.ndim != 2 or x.ndim != 3:
        raise ValueError("Pallas SSD local block expects flattened inputs [G, C], [G, C, P].")
    if block_sizes.group_block_size != 1:
        raise NotImplementedError(
            f"group_block_size must be 1 for this prototype, got {block_sizes.group_block_size}."
        )
    if (
        block_sizes.query_block_size is None
        or block_sizes.key_block_size is None
        or block_sizes.value_block_size is None
    ):
        raise ValueError("query/key/value block sizes must be set for the TPU Pallas prototype.")

    chunk_size = a_log_cumsum.shape[-1]
    value_dim = x.shape[-1]
    query_block_size = block_sizes.query_block_size
    key_block_size = block_sizes.key_block_size
    value_block_size = block_sizes.value_block_size

    if chunk_size % query_block_size != 0:
        raise NotImplementedError(f"chunk_size={chunk_size} must be divisible by query_block_size={query_block_size}.")
    if chunk_size % key_block_size != 0:
        raise NotImplementedError(f"chunk_size={chunk_size} must be divisible by key_block_size={key_block_size}.")
    if value_dim % value_block_size != 0:
        raise NotImplementedError(f"value_dim={value_dim} must be divisible by value_block_size={value_block_size}.")

    if not interpret:
        for name, size in (
            ("query_block_size", query_block_size),
            ("key_block_size", key_block_size),
            ("value_block_size", value_block_size),
        ):
            if size % 128 != 0:
                raise NotImplementedError(f"{name} must be a multiple of 128 on TPU, got {size}.")

    return query_block_size, key_block_size, value_block_size


def ssd_intra_chunk_pallas_tpu(
    a_log_cumsum,
    src_scale,
    b,
    c,
    x,
    *,
    query_block_size: int = 128,
    key_block_size: int = 128,
    value_block_size: int = 128,
    interpret: bool = False,
):
    """TPU Pallas prototype for the SSD intra-chunk local block."""
    block_sizes = BlockSizes(1, query_block_size, key_block_size, value_block_size)
    if a_log_cumsum.shape != src_scale.shape:
        raise ValueError("`src_scale` must match `a_log_cumsum`.")
    if b.shape[:2] != a_log_cumsum.shape or c.shape[:2] != a_log_cumsum.shape or x.shape[:2] != a_log_cumsum.shape:
        raise ValueError("All Pallas SSD inputs must share `[G, C]` leading dimensions.")
    if b.shape != c.shape:
        raise ValueError("`b` and `c` must match for the Pallas SSD local block.")

    query_block_size, key_block_size, value_block_size = _validate_block_sizes(
        a_log_cumsum=a_log_cumsum,
        x=x,
        block_sizes=block_sizes,
        interpret=interpret,
    )

    groups, chunk_size = a_log_cumsum.shape
    state_dim = b.shape[-1]
    value_dim = x.shape[-1]
    num_q_blocks = chunk_size // query_block_size
    num_k_blocks = chunk_size // key_block_size
    num_v_blocks = value_dim // value_block_size
    out_shape = jax.ShapeDtypeStruct((groups, chunk_size, value_dim), x.dtype)
    acc_dtype = jnp.float32

    return pl.pallas_call(
        partial(
            _ssd_intra_chunk_kernel,
            q_block_size=query_block_size,
            k_block_size=key_block_size,
            num_k_blocks=num_k_blocks,
        ),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(groups, num_q_blocks, num_v_blocks, num_k_blocks),
            in_specs=[
                pl.BlockSpec((1, query_block_size), lambda g, q, v, k: (g, q)),
                pl.BlockSpec((1, key_block_size), lambda g, q, v, k: (g, k)),
                pl.BlockSpec((1, key_block_size), lambda g, q, v, k: (g, k)),
                pl.BlockSpec((1, key_block_size, state_dim), lambda g, q, v, k: (g, k, 0)),
                pl.BlockSpec((1, query_block_size, state_dim), lambda g, q, v, k: (g, q, 0)),
                pl.BlockSpec((1, key_block_size, value_block_size), lambda g, q, v, k: (g, k, v)),
            ],
            out_specs=pl.BlockSpec((1, query_block_size, value_block_size), lambda g, q, v, k: (g, q, v)),
            scratch_shapes=[pltpu.VMEM((query_block_size, value_block_size), acc_dtype)],
        ),
        out_shape=out_shape,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
        interpret=interpret,
    )(a_log_cumsum, a_log_cumsum, src_scale, b, c, x)


# ----------------------------------------------------------------------------- ours


def ssd_intra_chunk_reference(a_log_cumsum, src_scale, b, c, x, **_blocks):
    per_group = jax.vmap(lambda a, s, bb, cc, xx: _local_output_tile_reference(a, a, s, bb, cc, xx))
    return per_group(a_log_cumsum, src_scale, b, c, x).astype(x.dtype)


def _ssd_inputs(groups=1, chunk=512, state=128, value=256):
    # one group: the (1, block) blocks of the [G, C] inputs must span G (Mosaic refuses 1 of 2 rows)
    keys = jax.random.split(jax.random.key(4), 5)
    # a cumulative log decay (non-increasing) so that exp(a_q - a_k) <= 1 under the causal mask
    a = -jnp.cumsum(jax.nn.softplus(jax.random.normal(keys[0], (groups, chunk))) * 0.05, axis=-1)
    src = jax.nn.sigmoid(jax.random.normal(keys[1], (groups, chunk)))
    b = jax.random.normal(keys[2], (groups, chunk, state), jnp.float32) * 0.1
    c = jax.random.normal(keys[3], (groups, chunk, state), jnp.float32) * 0.1
    x = jax.random.normal(keys[4], (groups, chunk, value), jnp.float32)
    return a, src, b, c, x


INSPECT = {
    "ssd_intra_chunk_pallas_tpu": {
        "args": _ssd_inputs, "reference": "ssd_intra_chunk_reference", "atol": 1e-3, "rtol": 1e-3,
        "params": {"query_block_size": [128, 256], "key_block_size": [128, 256], "value_block_size": [128, 256]},
    },
}
