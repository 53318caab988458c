# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/AI-Hypercomputer/maxdiffusion/blob/593e33765743cd46c8f8d434a468808dcc072175/src/maxdiffusion/kernels/fused_rmsnorm_rope_pallas.py
# """
# Copyright 2026 Google LLC
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#      https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# """
#
# The kernels (exact and fused), _apply_rope, _pair_swap, _rope_tables, _run_exact, _run_fused and
# fused_rmsnorm_rope_pallas are verbatim (argument checks shortened). Trimmed: the platform-
# dependent rounding resolver (wan_runtime_options), the custom-VJP helper, long docstrings.
# Ours: the reference (the unfused producer's maths), inputs, INSPECT.
# Style: pltpu.roll (lane rotations), pl.multiple_of on a dynamic lane offset, a Python-unrolled
# per-head loop storing into a 4-D output block, full-width row tiles, vmem_limit_bytes = 64 MiB,
# pl.cdiv grids, a (block_s, 1) block, two pallas_calls per call.
"""Fused RMSNorm + RoPE + head-transposition Pallas kernel for TPU."""

import functools
from typing import Tuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NUM_LANES = 128

DEFAULT_BLOCK_S_EXACT = 512
DEFAULT_BLOCK_S_FUSED = 256

# v6e exposes 128 MiB of VMEM per core and tpu7x exposes 64 MiB. 64 MiB fits
# both (the full tpu7x budget).
DEFAULT_VMEM_LIMIT_BYTES = 64 * 1024 * 1024

NORM_MODES = ("exact", "fused")
ROPE_ACCUM_MODES = ("dtype", "f32")


def _apply_rope(
    normed: jax.Array,
    cos: jax.Array,
    sin_signed: jax.Array,
    accum: str,
    even_mask: jax.Array | None = None,
) -> jax.Array:
  """Combines `normed * cos + swap(normed) * sin` under a chosen rounding mode."""
  if accum == "f32":
    wide = normed.astype(jnp.float32)
    out = wide * cos.astype(jnp.float32) + _pair_swap(wide, even_mask=even_mask) * sin_signed.astype(jnp.float32)
    return out.astype(normed.dtype)
  return normed * cos + _pair_swap(normed, even_mask=even_mask) * sin_signed


def _pair_swap(x: jax.Array, even_mask: jax.Array | None = None) -> jax.Array:
  """Swaps adjacent lane pairs: `[a0, a1, a2, a3, ...] -> [a1, a0, a3, a2, ...]`.

  Rotation is done at 32-bit width on all platforms (required by
  `tpu.DynamicRotate` on TPU 7x); the round-trip cast is exact.
  """
  orig_dtype = x.dtype
  if orig_dtype != jnp.float32 and orig_dtype != jnp.int32:
    x = x.astype(jnp.float32)
  dim = x.shape[-1]
  axis = x.ndim - 1
  roll_right = pltpu.roll(x, 1, axis)  # roll_right[i] = x[i - 1]
  roll_left = pltpu.roll(x, dim - 1, axis)  # roll_left[i]  = x[i + 1]
  if even_mask is None:
    lane = jax.lax.broadcasted_iota(jnp.int32, x.shape, axis)
    even_mask = jax.lax.rem(lane, 2) == 0
  res = jnp.where(even_mask, roll_left, roll_right)
  return res.astype(orig_dtype)


def _rope_tables(freqs_cis: jax.Array, seq_len: int, dtype: jnp.dtype) -> Tuple[jax.Array, jax.Array]:
  """Expands `freqs_cis` into lane-aligned `cos` / signed-`sin` tables."""
  cos = jnp.real(freqs_cis)[0, :, :seq_len, :].astype(dtype)
  sin = jnp.imag(freqs_cis)[0, :, :seq_len, :].astype(dtype)
  cos_full = jnp.repeat(cos, 2, axis=-1)
  sin_full = jnp.repeat(sin, 2, axis=-1)
  # [-1, +1, -1, +1, ...]; scaling a float by +-1 is exact.
  sign = jnp.tile(jnp.array([-1.0, 1.0], dtype=dtype), (sin_full.shape[-1] // 2,))
  return cos_full, sin_full * sign


def _exact_kernel(
    x_ref,
    scale_ref,
    rsqrt_ref,
    cos_ref,
    sin_ref,
    o_ref,
    *,
    dim_head: int,
    rope_accum: str,
    head_block: int,
    prescale: float = 1.0,
):
  """Scale + RoPE + transpose for one `(batch, sequence tile, head block)` step."""
  blk = pl.program_id(2)
  rsqrt_val = rsqrt_ref[0]
  cos = cos_ref[0].astype(jnp.float32) if rope_accum == "f32" else cos_ref[0]
  sin = sin_ref[0].astype(jnp.float32) if rope_accum == "f32" else sin_ref[0]
  lane = jax.lax.broadcasted_iota(jnp.int32, cos.shape, cos.ndim - 1)
  even_mask = jax.lax.rem(lane, 2) == 0
  prescale_val = jnp.asarray(prescale, o_ref.dtype) if prescale != 1.0 else None

  for i in range(head_block):
    # Pure lane-tile selection: `dim_head` is a multiple of NUM_LANES, so this
    # picks whole lane tiles and needs no relayout. `pl.multiple_of` supplies
    # the alignment fact Mosaic cannot infer from a dynamic product.
    offset = pl.multiple_of((blk * head_block + i) * dim_head, dim_head)
    x = x_ref[0, :, pl.ds(offset, dim_head)]

    # Flax's association: fold the scale into the reciprocal before applying it.
    mul = rsqrt_val * scale_ref[i, 0].astype(jnp.float32)
    normed = (x.astype(jnp.float32) * mul).astype(x.dtype)
    out = _apply_rope(normed, cos, sin, rope_accum, even_mask=even_mask)
    if prescale_val is not None:
      out = out * prescale_val
    o_ref[0, i] = out


def _fused_kernel(
    x_ref,
    scale_ref,
    cos_ref,
    sin_ref,
    o_ref,
    *,
    dim_head: int,
    eps: float,
    rope_accum: str,
    head_block: int,
    prescale: float = 1.0,
):
  """As `_exact_kernel`, but also computes the feature-axis reduction in VMEM."""
  blk = pl.program_id(2)
  x_full_f32 = x_ref[0].astype(jnp.float32)
  var = jnp.mean(x_full_f32 * x_full_f32, axis=-1, keepdims=True)
  inv_rms = jax.lax.rsqrt(var + eps)
  cos = cos_ref[0].astype(jnp.float32) if rope_accum == "f32" else cos_ref[0]
  sin = sin_ref[0].astype(jnp.float32) if rope_accum == "f32" else sin_ref[0]
  lane = jax.lax.broadcasted_iota(jnp.int32, cos.shape, cos.ndim - 1)
  even_mask = jax.lax.rem(lane, 2) == 0
  prescale_val = jnp.asarray(prescale, o_ref.dtype) if prescale != 1.0 else None

  for i in range(head_block):
    offset = pl.multiple_of((blk * head_block + i) * dim_head, dim_head)
    x = x_ref[0, :, pl.ds(offset, dim_head)]
    mul = inv_rms * scale_ref[i, 0].astype(jnp.float32)
    normed = (x.astype(jnp.float32) * mul).astype(x.dtype)
    out = _apply_rope(normed, cos, sin, rope_accum, even_mask=even_mask)
    if prescale_val is not None:
      out = out * prescale_val
    o_ref[0, i] = out


def _run_exact(
    x,
    scale,
    cos_full,
    sin_signed,
    *,
    heads,
    dim_head,
    eps,
    block_s,
    vmem_limit_bytes,
    interpret,
    rope_accum,
    head_block,
    prescale: float = 1.0,
):
  batch, seq_len, feature = x.shape
  block_s = min(block_s, seq_len)

  x_f32 = x.astype(jnp.float32)
  rsqrt_val = jax.lax.rsqrt(jnp.mean(jnp.square(x_f32), axis=-1, keepdims=True) + eps)

  return pl.pallas_call(
      functools.partial(_exact_kernel, dim_head=dim_head, rope_accum=rope_accum, head_block=head_block, prescale=prescale),
      grid=(batch, pl.cdiv(seq_len, block_s), heads // head_block),
      in_specs=[
          # Full-width and head-invariant: one sequential fetch per tile.
          pl.BlockSpec((1, block_s, feature), lambda b, s, h: (b, s, 0)),
          pl.BlockSpec((head_block, 1, dim_head), lambda b, s, h: (h, 0, 0)),
          pl.BlockSpec((1, block_s, 1), lambda b, s, h: (b, s, 0)),
          pl.BlockSpec((1, block_s, dim_head), lambda b, s, h: (0, s, 0)),
          pl.BlockSpec((1, block_s, dim_head), lambda b, s, h: (0, s, 0)),
      ],
      out_specs=pl.BlockSpec((1, head_block, block_s, dim_head), lambda b, s, h: (b, h, s, 0)),
      out_shape=jax.ShapeDtypeStruct((batch, heads, seq_len, dim_head), x.dtype),
      compiler_params=pltpu.CompilerParams(
          dimension_semantics=("parallel", "parallel", "arbitrary"), vmem_limit_bytes=vmem_limit_bytes
      ),
      interpret=interpret,
  )(x, scale.reshape(heads, 1, dim_head), rsqrt_val, cos_full, sin_signed)


def _run_fused(
    x,
    scale,
    cos_full,
    sin_signed,
    *,
    heads,
    dim_head,
    eps,
    block_s,
    vmem_limit_bytes,
    interpret,
    rope_accum,
    head_block,
    prescale: float = 1.0,
):
  batch, seq_len, feature = x.shape
  block_s = min(block_s, seq_len)

  return pl.pallas_call(
      functools.partial(
          _fused_kernel, dim_head=dim_head, eps=eps, rope_accum=rope_accum, head_block=head_block, prescale=prescale
      ),
      grid=(batch, pl.cdiv(seq_len, block_s), heads // head_block),
      in_specs=[
          pl.BlockSpec((1, block_s, feature), lambda b, s, h: (b, s, 0)),
          pl.BlockSpec((head_block, 1, dim_head), lambda b, s, h: (h, 0, 0)),
          pl.BlockSpec((1, block_s, dim_head), lambda b, s, h: (0, s, 0)),
          pl.BlockSpec((1, block_s, dim_head), lambda b, s, h: (0, s, 0)),
      ],
      out_specs=pl.BlockSpec((1, head_block, block_s, dim_head), lambda b, s, h: (b, h, s, 0)),
      out_shape=jax.ShapeDtypeStruct((batch, heads, seq_len, dim_head), x.dtype),
      compiler_params=pltpu.CompilerParams(
          dimension_semantics=("parallel", "parallel", "arbitrary"), vmem_limit_bytes=vmem_limit_bytes
      ),
      interpret=interpret,
  )(x, scale.reshape(heads, 1, dim_head), cos_full, sin_signed)


def fused_rmsnorm_rope_pallas(
    raw_q: jax.Array,
    raw_k: jax.Array,
    q_norm_scale: jax.Array,
    k_norm_scale: jax.Array,
    freqs_cis: jax.Array,
    q_heads: int = 8,
    kv_heads: int | None = None,
    dim_head: int = 128,
    eps: float = 1e-6,
    k_eps: float | None = None,
    heads: int | None = None,
    norm_mode: str = "exact",
    rope_accum: str = "dtype",
    block_s: int | None = None,
    head_block: int | None = None,
    vmem_limit_bytes: int = DEFAULT_VMEM_LIMIT_BYTES,
    interpret: bool = False,
    q_prescale: float = 1.0,
    k_prescale: float = 1.0,
) -> Tuple[jax.Array, jax.Array]:
  """Fused FP32 RMSNorm + RoPE + head transposition on TPU via Pallas (q_heads default 40 upstream)."""
  if heads is not None:
    q_heads = heads
  kv_heads = q_heads if kv_heads is None else kv_heads
  effective_k_eps = eps if k_eps is None else k_eps

  if norm_mode not in NORM_MODES:
    raise ValueError(f"norm_mode must be one of {NORM_MODES}, got {norm_mode!r}.")
  if rope_accum not in ROPE_ACCUM_MODES:
    raise ValueError(f"rope_accum must be one of {ROPE_ACCUM_MODES}, got {rope_accum!r}.")
  if dim_head % NUM_LANES != 0:
    raise ValueError(f"fused_rmsnorm_rope_pallas requires dim_head to be a multiple of {NUM_LANES}, got {dim_head}.")
  if head_block is not None:
    for name, n in (("q_heads", q_heads), ("kv_heads", kv_heads)):
      if n % head_block != 0:
        raise ValueError(f"head_block ({head_block}) must divide {name} ({n}).")

  _, seq_q, feature_q = raw_q.shape
  _, seq_k, feature_k = raw_k.shape
  if feature_q != q_heads * dim_head:
    raise ValueError(f"raw_q feature dim ({feature_q}) must equal q_heads ({q_heads}) * dim_head ({dim_head})")
  if feature_k != kv_heads * dim_head:
    raise ValueError(f"raw_k feature dim ({feature_k}) must equal kv_heads ({kv_heads}) * dim_head ({dim_head})")

  if block_s is None:
    block_s = DEFAULT_BLOCK_S_EXACT if norm_mode == "exact" else DEFAULT_BLOCK_S_FUSED
  elif norm_mode == "fused":
    block_s = min(block_s, DEFAULT_BLOCK_S_FUSED)
  runner = _run_exact if norm_mode == "exact" else _run_fused

  cos_q, sin_q = _rope_tables(freqs_cis, seq_q, raw_q.dtype)
  if seq_k == seq_q and raw_k.dtype == raw_q.dtype:
    cos_k, sin_k = cos_q, sin_q
  else:
    cos_k, sin_k = _rope_tables(freqs_cis, seq_k, raw_k.dtype)

  common = {
      "dim_head": dim_head,
      "block_s": block_s,
      "vmem_limit_bytes": vmem_limit_bytes,
      "interpret": interpret,
      "rope_accum": rope_accum,
  }
  q_out = runner(
      raw_q,
      q_norm_scale,
      cos_q,
      sin_q,
      heads=q_heads,
      head_block=q_heads if head_block is None else head_block,
      eps=eps,
      prescale=q_prescale,
      **common,
  )
  k_out = runner(
      raw_k,
      k_norm_scale,
      cos_k,
      sin_k,
      heads=kv_heads,
      head_block=kv_heads if head_block is None else head_block,
      eps=effective_k_eps,
      prescale=k_prescale,
      **common,
  )
  return q_out, k_out


# ----------------------------------------------------------------------------- ours


def fused_rmsnorm_rope_ref(raw_q, raw_k, q_norm_scale, k_norm_scale, freqs_cis, q_heads=8, kv_heads=None,
                           dim_head=128, eps=1e-6, **_):
  """The unfused producer: f32 RMSNorm (x * (rsqrt(var + eps) * scale)), heads to the front, RoPE
  on interleaved pairs."""
  kv_heads = q_heads if kv_heads is None else kv_heads

  def one(x, scale, heads):
    b, s, _ = x.shape
    xf = x.astype(jnp.float32)
    rs = jax.lax.rsqrt(jnp.mean(jnp.square(xf), axis=-1, keepdims=True) + eps)
    normed = (xf * (rs * scale.astype(jnp.float32))).astype(x.dtype)
    h = normed.reshape(b, s, heads, dim_head).transpose(0, 2, 1, 3).astype(jnp.float32)
    cos = jnp.real(freqs_cis)[0, 0, :s].astype(x.dtype).astype(jnp.float32)
    sin = jnp.imag(freqs_cis)[0, 0, :s].astype(x.dtype).astype(jnp.float32)
    even, odd = h[..., 0::2], h[..., 1::2]
    out = jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
    return out.reshape(h.shape).astype(x.dtype)

  return one(raw_q, q_norm_scale, q_heads), one(raw_k, k_norm_scale, kv_heads)


def _rope_inputs():
  batch, seq, heads, dim = 1, 1024, 8, 128
  k1, k2, k3, k4 = jax.random.split(jax.random.key(10), 4)
  raw_q = jax.random.normal(k1, (batch, seq, heads * dim), jnp.float32).astype(jnp.bfloat16)
  raw_k = jax.random.normal(k2, (batch, seq, heads * dim), jnp.float32).astype(jnp.bfloat16)
  q_scale = 1.0 + 0.1 * jax.random.normal(k3, (heads * dim,), jnp.float32)
  k_scale = 1.0 + 0.1 * jax.random.normal(k4, (heads * dim,), jnp.float32)
  theta = jnp.arange(seq, dtype=jnp.float32)[:, None] / 10000 ** (jnp.arange(dim // 2, dtype=jnp.float32) / (dim // 2))
  freqs_cis = jnp.exp(1j * theta).astype(jnp.complex64)[None, None]
  return raw_q, raw_k, q_scale, k_scale, freqs_cis


INSPECT = {
    "fused_rmsnorm_rope_pallas": {
        "args": _rope_inputs, "reference": "fused_rmsnorm_rope_ref", "atol": 2e-2, "rtol": 2e-2,
        "params": {"norm_mode": ["exact", "fused"], "rope_accum": ["dtype", "f32"], "block_s": [512, 256, 1024],
                   "head_block": [8, 4, 2, 1]},
    },
}
