# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/sgl-project/sglang-jax/blob/0ca710e32be1d4a7f98220bb8ec5da46ddfecac8/python/sgl_jax/srt/kernels/fused_mlp.py
# License: Apache-2.0 (the sglang-jax repository's LICENSE; the file has no header of its own):
#
#   Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file
#   except in compliance with the License. You may obtain a copy of the License at
#   http://www.apache.org/licenses/LICENSE-2.0
#   Unless required by applicable law or agreed to in writing, software distributed under the
#   License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.
#
# The kernels are verbatim. Trimmed: the shard_map/psum wrapper keeps only its per-device body
# (fused_mlp below is `local_fused_mlp` without the mesh). Ours: inputs, reference, INSPECT.
# Style: a pallas_call over HBM refs that runs pltpu.emit_pipeline inside (triple-buffered weights,
# pl.Buffered(3)), a scratch passed to the inner pipeline, nested lax.cond instead of pl.when.
"""Optimized Gated MLP (SwiGLU) Pallas kernel for TPU.

Fuses the gate/up projections, the SiLU activation, and the down projection
into a single pipelined TPU kernel, completely eliminating intermediate HBM traffic.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def inner_mlp_kernel(
    x_tile,
    w_gu_tile,
    wd_tile,
    y_tile,
    y_scratch,
    *,
    b_inter: int,
    num_inter: int,
):
    i_i = pl.program_id(0)

    def _compute(is_first: bool, is_last: bool):
        # 1. Fetch & Upcast weights
        w_gu_sram = w_gu_tile[...].astype(x_tile.dtype)

        # 2. Matmul 1 (x @ W_in)
        hu_sram = jnp.matmul(x_tile[...], w_gu_sram, preferred_element_type=jnp.float32)

        # Split and Activate (SiLU Swish-gated activation)
        h_sram = hu_sram[:, :b_inter]
        u_sram = hu_sram[:, b_inter:]
        a_tile = jax.nn.silu(h_sram) * u_sram
        a_tile = a_tile.astype(x_tile.dtype)

        # 3. Matmul 2 (a @ W_out)
        wd_sram = wd_tile[...].astype(x_tile.dtype)
        y_current_sram = jnp.matmul(a_tile, wd_sram, preferred_element_type=jnp.float32)

        # 4. Accumulate
        acc = y_current_sram if is_first else y_scratch[...] + y_current_sram

        if is_last:
            y_tile[...] = acc.astype(y_tile.dtype)
        else:
            y_scratch[...] = acc

    # Define matmul wrapper scopes for XLA compiler profiling
    @jax.named_scope("compute_first_last")
    def compute_first_last():
        _compute(True, True)

    @jax.named_scope("compute_first")
    def compute_first():
        _compute(True, False)

    @jax.named_scope("compute")
    def compute():
        _compute(False, False)

    @jax.named_scope("compute_last")
    def compute_last():
        _compute(False, True)

    is_first = i_i == 0
    is_last = i_i == (num_inter - 1)

    # Explicit control flow eliminates @pl.when overhead
    jax.lax.cond(
        is_first,
        lambda: jax.lax.cond(is_last, compute_first_last, compute_first),
        lambda: jax.lax.cond(is_last, compute_last, compute),
    )


def mlp_kernel_main(x_hbm, w_gu_hbm, wd_hbm, y_hbm, y_scratch, *, b_seq, b_inter, hidden_size):
    """Entry point for Pallas grid. Wires up HBM references to the pipeline."""
    seq_idx = pl.program_id(0)
    num_inter = w_gu_hbm.shape[1] // (2 * b_inter)

    # 1. Block specs mapping the inner pipeline loop (i_i) to HBM arrays
    x_spec = pl.BlockSpec((b_seq, hidden_size), lambda i_i: (seq_idx, 0))
    y_spec = pl.BlockSpec((b_seq, hidden_size), lambda i_i: (seq_idx, 0))

    # 2. Triple buffering for weights to hide HBM latency
    w_gu_spec = pl.BlockSpec(
        (hidden_size, 2 * b_inter),
        lambda i_i: (0, i_i),
        pipeline_mode=pl.Buffered(buffer_count=3),
    )
    wd_spec = pl.BlockSpec(
        (b_inter, hidden_size),
        lambda i_i: (i_i, 0),
        pipeline_mode=pl.Buffered(buffer_count=3),
    )

    # 3. Emit the pipeline over the intermediate dimension
    pipeline_fn = pltpu.emit_pipeline(
        functools.partial(
            inner_mlp_kernel,
            b_inter=b_inter,
            num_inter=num_inter,
        ),
        grid=(num_inter,),
        in_specs=(x_spec, w_gu_spec, wd_spec),
        out_specs=y_spec,
    )

    # Execute the pipeline, passing our scratchpad forward
    pipeline_fn(x_hbm, w_gu_hbm, wd_hbm, y_hbm, scratches=[y_scratch])


def fused_mlp(x_loc, w_gu_loc, wd_loc, b_seq: int = 64, b_inter: int = 128):
    """The per-device body of `apply_fused_mlp_sharded` (its shard_map and psum cut)."""
    seq_len, hidden_size = x_loc.shape

    # 1D outer grid (parallelizing sequence length across TPU cores)
    grid = (seq_len // b_seq,)

    # Pass full tensors to the kernel main as HBM references
    pallas_in_specs = (
        pl.BlockSpec(memory_space=pltpu.HBM),
        pl.BlockSpec(memory_space=pltpu.HBM),
        pl.BlockSpec(memory_space=pltpu.HBM),
    )
    pallas_out_specs = pl.BlockSpec(memory_space=pltpu.HBM)

    y_loc = pl.pallas_call(
        functools.partial(
            mlp_kernel_main,
            b_seq=b_seq,
            b_inter=b_inter,
            hidden_size=hidden_size,
        ),
        out_shape=jax.ShapeDtypeStruct((seq_len, hidden_size), x_loc.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=grid,
            in_specs=pallas_in_specs,
            out_specs=pallas_out_specs,
            scratch_shapes=[pltpu.VMEM((b_seq, hidden_size), jnp.float32)],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x_loc, w_gu_loc, wd_loc)
    return y_loc


# ----------------------------------------------------------------------------- ours


def fused_mlp_ref(x, w_gu, wd, b_inter: int = 128):
    """w_gu holds, per b_inter-wide block of the intermediate dim, its gate then its up columns."""
    hidden, two_inter = w_gu.shape
    w = w_gu.astype(jnp.float32).reshape(hidden, two_inter // (2 * b_inter), 2, b_inter)
    gate = w[:, :, 0, :].reshape(hidden, -1)
    up = w[:, :, 1, :].reshape(hidden, -1)
    xf = x.astype(jnp.float32)
    a = (jax.nn.silu(xf @ gate) * (xf @ up)).astype(x.dtype).astype(jnp.float32)
    return (a @ wd.astype(jnp.float32)).astype(x.dtype)


def _mlp_inputs():
    seq, hidden, inter = 256, 512, 1024
    k1, k2, k3 = jax.random.split(jax.random.key(5), 3)
    x = jax.random.normal(k1, (seq, hidden), jnp.float32).astype(jnp.bfloat16)
    w_gu = (jax.random.normal(k2, (hidden, 2 * inter), jnp.float32) / hidden ** 0.5).astype(jnp.bfloat16)
    wd = (jax.random.normal(k3, (inter, hidden), jnp.float32) / inter ** 0.5).astype(jnp.bfloat16)
    return x, w_gu, wd


INSPECT = {
    "fused_mlp": {
        "args": _mlp_inputs, "reference": "fused_mlp_ref", "atol": 3e-2, "rtol": 3e-2,
        "params": {"b_seq": [64, 128, 256], "b_inter": [128, 256, 512]},
    },
}
