# Held-out kernel for jax-inspector (round eleven), vendored from:
#   https://github.com/linhkid/pallas-forge/blob/090510b7b36796a31f7bacee04c31d7e1909cf76/pallas_forge/kernels/swiglu.py
# (last changed upstream in 0fa2a99ce9815bc4d8f5bfc831728cb6e5ab2b86), with `pallas_call_compat` (and the
# two functions it calls) from the same commit's pallas_forge/_compat.py and `pad_to_multiple`, `unpad`
# from its pallas_forge/kernels/_utils.py inlined in place of the package imports (marked "inlined").
# Licence: MIT License (the repository's LICENSE, reproduced below; the files have no header of their own).
# NOT Apache: this round's vendored check accepts MIT for this source (tests/test_vmem_rolled_loops.py).
#
# Verbatim: the whole of swiglu.py below its imports (_swiglu_kernel, _fused_glu, fused_swiglu,
# fused_geglu). Edits: the package imports replaced by the inlined helpers; in the inlined
# get_default_interpret_mode, `return not is_tpu_available()` written `return False` (upstream runs
# the kernel in Pallas interpret mode whenever jax sees no TPU, which is always the case where the
# inspector compiles for a TPU without one; `diff` interprets it on its own). Ours, below the "ours"
# line: wrappers taking x, w_gate, w_up positionally and the blocks as keywords, a reference, INSPECT.
# Style: a 2-D (row blocks, column blocks) grid, no dimension_semantics, no compiler_params (the
# shim drops num_stages: jax 0.10's pltpu.CompilerParams has no such field); a (block_m, K) x block
# with the WHOLE contraction dimension, two (K, block_n) weight blocks; the body two jnp.dot with
# f32 results (gate and up, each (block_m, block_n)), jax.nn.silu or jax.nn.gelu (jitted helpers) on
# the gate, the product cast and stored into the (block_m, block_n) output block.
#
# MIT License
#
# Copyright (c) 2026 Nguyen Khanh Linh
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in all
# copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
# SOFTWARE.
"""Fused SwiGLU / GeGLU activation kernels.

Compute-bound fused activations used in modern transformers (LLaMA, Gemma, Mistral).
Combines the gating multiplication with the activation function in a single kernel,
reducing intermediate materialization to HBM.

SwiGLU: silu(x @ w_gate) * (x @ w_up)
GeGLU:  gelu(x @ w_gate) * (x @ w_up)

The fusion saves two full HBM round-trips for the gate and up intermediate results.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# --- inlined from pallas_forge/_compat.py (same commit) ---

import inspect
from functools import lru_cache
from typing import Any, Sequence


@lru_cache(maxsize=1)
def is_tpu_available() -> bool:
    """Check if TPU hardware is available."""
    try:
        return any(d.platform == "tpu" for d in jax.devices())
    except RuntimeError:
        return False


def get_default_interpret_mode() -> bool:
    """Returns True if no TPU is available (use interpret mode for CPU)."""
    return False  # edited (upstream: return not is_tpu_available()); see the header


@lru_cache(maxsize=1)
def _pallas_call_accepts_num_stages() -> bool:
    """Detect whether the installed JAX accepts num_stages directly.

    Older JAX (≤~0.4.35) accepted `num_stages=N` as a direct kwarg to `pallas_call`.
    Newer JAX moved it into `compiler_params` on the TPU backend, and some versions
    dropped the knob entirely in favour of automatic pipelining.
    """
    try:
        sig = inspect.signature(pl.pallas_call)
        if "num_stages" in sig.parameters:
            return True
        return any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    except (TypeError, ValueError):
        # If we can't introspect (e.g. C-level function), try at call time
        return True


def pallas_call_compat(
    kernel_fn,
    *,
    grid: tuple[int, ...] | int,
    in_specs: Sequence[pl.BlockSpec],
    out_specs: pl.BlockSpec | Sequence[pl.BlockSpec],
    out_shape: Any,
    interpret: bool | None = None,
    **kwargs,
):
    """Wrapper around pallas_call that auto-sets interpret=True on CPU.

    This enables all Pallas kernels to run on CPU for correctness testing.
    On TPU, interpret mode is disabled for full hardware performance.

    Args:
        kernel_fn: The Pallas kernel function.
        grid: Grid dimensions for the kernel launch.
        in_specs: BlockSpec for each input.
        out_specs: BlockSpec for each output.
        out_shape: Shape specification for outputs.
        interpret: Force interpret mode. If None, auto-detect based on hardware.
        **kwargs: Additional arguments passed to pallas_call (e.g. num_stages).
            Unknown kwargs are silently dropped so the wrapper stays forward-
            compatible with newer JAX versions that moved knobs around.

    Returns:
        A JAX-compatible function that executes the kernel.
    """
    if interpret is None:
        interpret = get_default_interpret_mode()

    # `num_stages` has migrated between JAX versions. Pop it out here rather than
    # passing it blindly — on newer JAX it lives inside `compiler_params` and
    # passing it at the top level raises TypeError. Dropping it is safe: the
    # compiler picks a reasonable default for DMA pipelining.
    num_stages = kwargs.pop("num_stages", None)
    if num_stages is not None and not interpret:
        # Best-effort: try to forward it via the current JAX's compiler_params API.
        # If the API doesn't exist or doesn't accept num_stages, we silently skip.
        try:
            from jax.experimental.pallas import tpu as pltpu  # type: ignore

            cp_cls = getattr(pltpu, "CompilerParams", None)
            if cp_cls is not None:
                cp_sig = inspect.signature(cp_cls)
                if "num_stages" in cp_sig.parameters:
                    existing = kwargs.get("compiler_params")
                    if existing is None:
                        kwargs["compiler_params"] = cp_cls(num_stages=num_stages)
        except Exception:
            pass  # Not worth failing over — fall through without it.

    return pl.pallas_call(
        kernel_fn,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        interpret=interpret,
        **kwargs,
    )


# --- inlined from pallas_forge/kernels/_utils.py (same commit) ---


def pad_to_multiple(x: jax.Array, multiple: int, axis: int) -> jax.Array:
    """Pad a JAX array along `axis` so its size is a multiple of `multiple`.

    Returns the original array unchanged if already aligned.
    """
    size = x.shape[axis]
    remainder = size % multiple
    if remainder == 0:
        return x
    pad_size = multiple - remainder
    pad_widths = [(0, 0)] * x.ndim
    pad_widths[axis] = (0, pad_size)
    return jnp.pad(x, pad_widths)


def unpad(x: jax.Array, target_shape: tuple[int, ...]) -> jax.Array:
    """Remove padding by slicing back to the target shape."""
    slices = tuple(slice(0, s) for s in target_shape)
    return x[slices]

# --- end of inlined helpers ---


def _swiglu_kernel(
    x_ref,  # [block_m, dim]
    w_gate_ref,  # [dim, block_n]
    w_up_ref,  # [dim, block_n]
    out_ref,  # [block_m, block_n]
    *,
    use_gelu: bool,
):
    """Fused gated activation kernel.

    Computes activation(x @ w_gate) * (x @ w_up) in a single pass.
    The gate and up projections are computed without writing intermediates to HBM.
    """
    x = x_ref[...]
    w_gate = w_gate_ref[...]
    w_up = w_up_ref[...]

    # Gate projection + activation
    gate = jnp.dot(x, w_gate, preferred_element_type=jnp.float32)
    if use_gelu:
        gate = jax.nn.gelu(gate)
    else:
        gate = jax.nn.silu(gate)

    # Up projection
    up = jnp.dot(x, w_up, preferred_element_type=jnp.float32)

    # Gated output
    out_ref[...] = (gate * up).astype(out_ref.dtype)


def _fused_glu(
    x: jax.Array,
    w_gate: jax.Array,
    w_up: jax.Array,
    *,
    block_m: int = 128,
    block_n: int = 128,
    use_gelu: bool = False,
    num_stages: int = 2,
) -> jax.Array:
    """Internal implementation for fused gated linear units.

    Args:
        x: Input, shape [M, K] (flattened batch*seq, hidden_dim).
        w_gate: Gate weight, shape [K, N].
        w_up: Up weight, shape [K, N].
        block_m: Tile size for M (token) dimension.
        block_n: Tile size for N (output) dimension.
        use_gelu: If True, use GELU; otherwise SiLU.
        num_stages: DMA pipeline stages.

    Returns:
        Output, shape [M, N].
    """
    if x.ndim != 2:
        raise ValueError(f"Expected 2D input, got ndim={x.ndim}")
    if w_gate.shape != w_up.shape:
        raise ValueError(f"w_gate and w_up must have same shape: {w_gate.shape} vs {w_up.shape}")
    if x.shape[1] != w_gate.shape[0]:
        raise ValueError(
            f"Inner dims must match: x.shape[1]={x.shape[1]}, w_gate.shape[0]={w_gate.shape[0]}"
        )

    M, K = x.shape
    _, N = w_gate.shape
    orig_M, orig_N = M, N
    out_dtype = x.dtype

    # Pad to block-aligned dimensions
    x = pad_to_multiple(x, block_m, axis=0)
    w_gate = pad_to_multiple(w_gate, block_n, axis=1)
    w_up = pad_to_multiple(w_up, block_n, axis=1)

    M_pad = x.shape[0]
    N_pad = w_gate.shape[1]

    grid_m = M_pad // block_m
    grid_n = N_pad // block_n

    kernel = functools.partial(_swiglu_kernel, use_gelu=use_gelu)

    result = pallas_call_compat(
        kernel,
        grid=(grid_m, grid_n),
        in_specs=[
            pl.BlockSpec((block_m, K), lambda i, j: (i, 0)),
            pl.BlockSpec((K, block_n), lambda i, j: (0, j)),
            pl.BlockSpec((K, block_n), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((M_pad, N_pad), out_dtype),
        num_stages=num_stages,
    )(x, w_gate, w_up)

    return unpad(result, (orig_M, orig_N))


@functools.partial(jax.jit, static_argnames=("block_m", "block_n", "num_stages"))
def fused_swiglu(
    x: jax.Array,
    w_gate: jax.Array,
    w_up: jax.Array,
    *,
    block_m: int = 128,
    block_n: int = 128,
    num_stages: int = 2,
) -> jax.Array:
    """Fused SwiGLU activation: ``silu(x @ w_gate) * (x @ w_up)``.

    ``@jax.jit``-wrapped: traces + lowers once per (block_m, block_n, num_stages,
    input-shape) combination; subsequent calls hit JAX's cache.

    Args:
        x: Input tensor, shape ``[..., dim]``. Batch dims are flattened internally.
        w_gate: Gate weight, shape ``[dim, ffn_dim]``.
        w_up: Up projection weight, shape ``[dim, ffn_dim]``.
        block_m: Tile size for token dimension (multiple of 8).
        block_n: Tile size for output dimension (multiple of 128 on TPU).
        num_stages: DMA pipeline stages.

    Returns:
        Output tensor, shape ``[..., ffn_dim]``.
    """
    original_batch_shape = x.shape[:-1]
    dim = x.shape[-1]
    x_2d = x.reshape(-1, dim)
    result = _fused_glu(x_2d, w_gate, w_up, block_m=block_m, block_n=block_n, num_stages=num_stages)
    return result.reshape(*original_batch_shape, -1)


@functools.partial(jax.jit, static_argnames=("block_m", "block_n", "num_stages"))
def fused_geglu(
    x: jax.Array,
    w_gate: jax.Array,
    w_up: jax.Array,
    *,
    block_m: int = 128,
    block_n: int = 128,
    num_stages: int = 2,
) -> jax.Array:
    """Fused GeGLU activation: ``gelu(x @ w_gate) * (x @ w_up)``.

    ``@jax.jit``-wrapped: see ``fused_swiglu`` for caching semantics.

    Args:
        x: Input tensor, shape ``[..., dim]``. Batch dims are flattened internally.
        w_gate: Gate weight, shape ``[dim, ffn_dim]``.
        w_up: Up projection weight, shape ``[dim, ffn_dim]``.
        block_m: Tile size for token dimension (multiple of 8).
        block_n: Tile size for output dimension (multiple of 128 on TPU).
        num_stages: DMA pipeline stages.

    Returns:
        Output tensor, shape ``[..., ffn_dim]``.
    """
    original_batch_shape = x.shape[:-1]
    dim = x.shape[-1]
    x_2d = x.reshape(-1, dim)
    result = _fused_glu(
        x_2d,
        w_gate,
        w_up,
        block_m=block_m,
        block_n=block_n,
        use_gelu=True,
        num_stages=num_stages,
    )
    return result.reshape(*original_batch_shape, -1)


# ----------------------------------------------------------------------------- ours


def pallas_forge_swiglu(x, w_gate, w_up, block_m=128, block_n=128):
    return fused_swiglu(x, w_gate, w_up, block_m=block_m, block_n=block_n)


def pallas_forge_geglu(x, w_gate, w_up, block_m=128, block_n=128):
    return fused_geglu(x, w_gate, w_up, block_m=block_m, block_n=block_n)


def pallas_forge_swiglu_reference(x, w_gate, w_up, block_m=128, block_n=128):
    """silu(x @ w_gate) * (x @ w_up), in f32, cast to x's dtype."""
    hi = jax.lax.Precision.HIGHEST
    gate = jnp.dot(x, w_gate, precision=hi, preferred_element_type=jnp.float32)
    up = jnp.dot(x, w_up, precision=hi, preferred_element_type=jnp.float32)
    return (jax.nn.silu(gate) * up).astype(x.dtype)


def pallas_forge_geglu_reference(x, w_gate, w_up, block_m=128, block_n=128):
    """gelu(x @ w_gate) * (x @ w_up) (jax.nn.gelu's default, the tanh approximation), in f32."""
    hi = jax.lax.Precision.HIGHEST
    gate = jnp.dot(x, w_gate, precision=hi, preferred_element_type=jnp.float32)
    up = jnp.dot(x, w_up, precision=hi, preferred_element_type=jnp.float32)
    return (jax.nn.gelu(gate) * up).astype(x.dtype)


INSPECT = {
    "pallas_forge_swiglu": {
        "args": "f32[256,256] f32[256,512] f32[256,512]",
        "params": {"block_m": [128, 256], "block_n": [128, 256]},
        "reference": "pallas_forge_swiglu_reference",
        "rtol": 5e-2, "atol": 5e-2,
    },
    "pallas_forge_geglu": {
        "args": "bf16[256,256] bf16[256,512] bf16[256,512]",
        "params": {"block_m": [128, 256], "block_n": [128, 256]},
        "reference": "pallas_forge_geglu_reference",
        "rtol": 5e-2, "atol": 5e-2,
    },
}
