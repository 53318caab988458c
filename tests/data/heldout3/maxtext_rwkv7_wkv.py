# Held-out kernel for jax-inspector (issue 28, round three), vendored from:
#   https://github.com/AI-Hypercomputer/maxtext/blob/dc8e32a258d49067cfd8f866c74a4458317ff0f4/src/maxtext/kernels/rwkv7_wkv.py
# Copyright 2026 Google LLC
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#    https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# The forward kernels (recurrent and chunked) and their helpers are verbatim. Trimmed: the
# backward kernels and the custom VJP, the packed-sequence `reset` argument's public form (the
# kernels still take the (B, T, 1) reset column, all zeros here), interpret-mode selection (the
# TPU path is always traced). Ours: the reference recurrence, inputs, INSPECT.
# Style: lax.fori_loop over timesteps with dynamic single-row loads/stores (pl.ds(t, 1)), a VMEM
# scratch state carried across an "arbitrary" grid axis, 5-D checkpoint output with squeezed
# (None) block dims; the chunked form: nested fori_loops of matmuls (block forward substitution).
"""Pallas TPU kernels for the RWKV-7 WKV7 recurrence (forward).

Per batch element and head, with an N x N state S (rows index the value
dimension, columns the key dimension):

    S_t = S_{t-1} diag(w_t) + (S_{t-1} a_t) b_t^T + v_t k_t^T
    y_t = S_t r_t
"""

import functools

import jax
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp

DEFAULT_CHUNK_SIZE = 16

_HIGHEST = lax.Precision.HIGHEST


def _row_times_mat(x_row, m):
  """(1, N) @ (N, N) -> (1, N): out[j] = sum_i x[i] m[i, j]."""
  return lax.dot_general(x_row, m, (((1,), (0,)), ((), ())), precision=_HIGHEST, preferred_element_type=jnp.float32)


def _row_times_mat_t(x_row, m):
  """(1, N) @ (N, N)^T -> (1, N): out[i] = sum_j m[i, j] x[j]."""
  return lax.dot_general(x_row, m, (((1,), (1,)), ((), ())), precision=_HIGHEST, preferred_element_type=jnp.float32)


def _outer(x_row, y_row):
  """Outer product of two (1, N) rows: out[i, j] = x[i] y[j]."""
  return jnp.transpose(x_row) * y_row


def _load_row(ref, t):
  return ref[pl.ds(t, 1), :].astype(jnp.float32)


def _step(s, w, k, v, a, b):
  """One recurrence step on an (N, N) state; all vectors are (1, N) rows."""
  sa = _row_times_mat_t(a, s)  # (S a)^T
  return s * w + _outer(sa, b) + _outer(v, k), sa


def _fwd_kernel(r_ref, w_ref, k_ref, v_ref, a_ref, b_ref, reset_ref, s0_ref, y_ref, s_out_ref, ckpt_ref, s_scr, *, chunk):
  """One (batch, head, chunk) program of the forward pass."""

  @pl.when(pl.program_id(2) == 0)
  def _():
    s_scr[...] = s0_ref[...].astype(jnp.float32)

  ckpt_ref[...] = s_scr[...]

  def body(t, s):
    s = s * (1.0 - _load_row(reset_ref, t))  # a reset zeroes the state entering step t
    s, _ = _step(
        s, _load_row(w_ref, t), _load_row(k_ref, t), _load_row(v_ref, t), _load_row(a_ref, t), _load_row(b_ref, t)
    )
    y_ref[pl.ds(t, 1), :] = _row_times_mat_t(_load_row(r_ref, t), s).astype(y_ref.dtype)
    return s

  s = lax.fori_loop(0, chunk, body, s_scr[...])
  s_scr[...] = s
  s_out_ref[...] = s


def _mm(x, y):
  """x @ y."""
  return lax.dot_general(x, y, (((1,), (0,)), ((), ())), precision=_HIGHEST, preferred_element_type=jnp.float32)


def _mm_nt(x, y):
  """x @ y^T."""
  return lax.dot_general(x, y, (((1,), (1,)), ((), ())), precision=_HIGHEST, preferred_element_type=jnp.float32)


def _mm_tn(x, y):
  """x^T @ y."""
  return lax.dot_general(x, y, (((0,), (0,)), ((), ())), precision=_HIGHEST, preferred_element_type=jnp.float32)


def _tri_masks(length):
  rows = lax.broadcasted_iota(jnp.int32, (length, length), 0)
  cols = lax.broadcasted_iota(jnp.int32, (length, length), 1)
  return rows, cols, rows > cols, rows >= cols


def _inverse_block_size(length):
  """Block size for `_unit_lower_inverse`: the divisor minimizing its matmul count."""
  divisors = [b for b in (8, 16, 32) if length % b == 0] or [length]
  return min(divisors, key=lambda b: b + 2 * (length // b))


def _unit_lower_inverse(m):
  """(I - m)^-1 for strictly lower-triangular (L, L) m, by block forward substitution."""
  length = m.shape[0]
  block = _inverse_block_size(length)
  rows, cols, _, _ = _tri_masks(length)
  eye = (rows == cols).astype(jnp.float32)
  # `lax.div`, not `//`: floor division of signed integers lowers through
  # `sign`, which Mosaic cannot lower. Both operands here are iotas, so
  # truncating division is the same thing.
  row_block, col_block = lax.div(rows, block), lax.div(cols, block)
  m_bd = jnp.where(row_block == col_block, m, 0.0)
  m_off = m - m_bd
  d = lax.fori_loop(0, block, lambda _, t: eye + _mm(m_bd, t), eye)

  def body(i, inv):
    return jnp.where(row_block == i, _mm(d, eye + _mm(m_off, inv)), inv)

  return lax.fori_loop(0, length // block, body, eye)


class _ChunkTerms:
  """Every intermediate of one chunk's forward pass (recomputed in the backward)."""

  def __init__(self, s0, r, w, k, v, a, b, reset):
    length = r.shape[0]
    rows, cols, strict, incl = _tri_masks(length)
    incl_f = incl.astype(jnp.float32)
    # Reset masks, from the (L, 1) reset column using only matmuls and iotas.
    # crossings[t, s] = number of resets r with s < r <= t.
    crossings = _mm(incl_f, reset * strict.astype(jnp.float32))
    same_segment = crossings == 0
    self.strict, self.incl = strict & same_segment, incl & same_segment
    self.from_s0 = (_mm(incl_f, reset) == 0).astype(jnp.float32)  # (L, 1): no reset in [0, t]
    self.to_end = (_mm((cols > rows).astype(jnp.float32), reset) == 0).astype(jnp.float32)  # (L, 1): none in (s, L-1]
    s0_to_end = (jnp.sum(reset, axis=0, keepdims=True) == 0).astype(jnp.float32)  # (1, 1)

    self.log_w = jnp.log(w)
    self.c = _mm(incl_f, self.log_w)  # inclusive cumsum over time
    mid = (length - 1) // 2
    ref = self.c[mid : mid + 1, :]  # outputs don't depend on ref; no gradient

    p = jnp.exp(self.c - ref)
    inv_p, inv_w, e_ref = 1.0 / p, 1.0 / w, jnp.exp(ref)
    p_last = p[length - 1 :, :]
    exp_incl = p * e_ref  # exp(c)
    self.exp_excl, self.exp_incl = exp_incl * inv_w * self.from_s0, exp_incl * self.from_s0
    self.exp_to_end = p_last * inv_p * self.to_end
    self.g_last = p_last * e_ref * s0_to_end
    self.scale_a = p * inv_w
    self.scale_r = p
    self.scale_key = inv_p
    self.a_s, self.r_s = a * self.scale_a, r * self.scale_r
    self.b_s, self.k_s = b * self.scale_key, k * self.scale_key

    zero = jnp.zeros((length, length), jnp.float32)
    self.m_ab = jnp.where(self.strict, _mm_nt(self.a_s, self.b_s), zero)
    self.m_ak = jnp.where(self.strict, _mm_nt(self.a_s, self.k_s), zero)
    self.m_rb = jnp.where(self.incl, _mm_nt(self.r_s, self.b_s), zero)
    self.m_rk = jnp.where(self.incl, _mm_nt(self.r_s, self.k_s), zero)

    self.a_t, self.r_t = a * self.exp_excl, r * self.exp_incl
    self.b_e, self.k_e = b * self.exp_to_end, k * self.exp_to_end
    self.inv = _unit_lower_inverse(self.m_ab)
    self.rhs = _mm_nt(self.a_t, s0) + _mm(self.m_ak, v)
    self.sa = _mm(self.inv, self.rhs)


def _chunk_forward(s0, r, w, k, v, a, b, reset):
  """One chunk: `(L, N)` float32 rows, `(L, 1)` resets, `(N, N)` entering state -> (y, end state)."""
  t = _ChunkTerms(s0, r, w, k, v, a, b, reset)
  y = _mm_nt(t.r_t, s0) + _mm(t.m_rb, t.sa) + _mm(t.m_rk, v)
  s_end = s0 * t.g_last + _mm_tn(t.sa, t.b_e) + _mm_tn(v, t.k_e)
  return y, s_end


def _chunked_fwd_kernel(r_ref, w_ref, k_ref, v_ref, a_ref, b_ref, reset_ref, s0_ref, y_ref, s_out_ref, ckpt_ref, s_scr):
  """One (batch, head, chunk) program of the chunked forward pass."""

  @pl.when(pl.program_id(2) == 0)
  def _():
    s_scr[...] = s0_ref[...].astype(jnp.float32)

  s0 = s_scr[...]
  ckpt_ref[...] = s0
  rows = [ref[...].astype(jnp.float32) for ref in (r_ref, w_ref, k_ref, v_ref, a_ref, b_ref, reset_ref)]
  y, s_end = _chunk_forward(s0, *rows)
  y_ref[...] = y.astype(y_ref.dtype)
  s_scr[...] = s_end
  s_out_ref[...] = s_end


ALGORITHMS = ("recurrent", "chunked")
MAX_CHUNKED_CHUNK_SIZE = 128


def _specs(num_chunks, chunk, n, reverse):
  """BlockSpecs for per-timestep (B, H, T, N) arrays, per-chunk checkpoints, and per-(B, H) states."""

  def chunk_index(c):
    return num_chunks - 1 - c if reverse else c

  seq = pl.BlockSpec((None, None, chunk, n), lambda bi, hi, c: (bi, hi, chunk_index(c), 0))
  ckpt = pl.BlockSpec((None, None, None, n, n), lambda bi, hi, c: (bi, hi, chunk_index(c), 0, 0))
  state = pl.BlockSpec((None, None, n, n), lambda bi, hi, c: (bi, hi, 0, 0))
  reset = pl.BlockSpec((None, chunk, 1), lambda bi, hi, c: (bi, chunk_index(c), 0))  # (B, T, 1), shared by heads
  return seq, ckpt, state, reset


def _compiler_params():
  return pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))


def _forward(r, w, k, v, a, b, reset, s0, *, chunk, algorithm):
  """Kernel-layout forward: (B, H, T, N) inputs and (B, T, 1) resets with T a multiple of `chunk`."""
  batch, heads, seq_len, n = r.shape
  num_chunks = seq_len // chunk
  seq, ckpt, state, reset_spec = _specs(num_chunks, chunk, n, reverse=False)
  if algorithm == "chunked":
    kernel, name = _chunked_fwd_kernel, "rwkv7_wkv_chunked_fwd"
  else:
    kernel, name = functools.partial(_fwd_kernel, chunk=chunk), "rwkv7_wkv_fwd"
  return pl.pallas_call(
      kernel,
      grid=(batch, heads, num_chunks),
      in_specs=[seq] * 6 + [reset_spec, state],
      out_specs=[seq, state, ckpt],
      out_shape=[
          jax.ShapeDtypeStruct(r.shape, jnp.float32),
          jax.ShapeDtypeStruct((batch, heads, n, n), jnp.float32),
          jax.ShapeDtypeStruct((batch, heads, num_chunks, n, n), jnp.float32),
      ],
      scratch_shapes=[pltpu.VMEM((n, n), jnp.float32)],
      compiler_params=_compiler_params(),
      name=name,
  )(r, w, k, v, a, b, reset, s0)


def wkv7_pallas(r, w, k, v, a, kk, state, *, chunk_size: int = DEFAULT_CHUNK_SIZE, algorithm: str = "recurrent"):
  """WKV7 recurrence as a Pallas kernel (forward only): `(B, T, H, N)` projections, `(B, H, N, N)`
  state -> (`(B, T, H, N)` out, `(B, H, N, N)` final state), float32."""
  if algorithm not in ALGORITHMS:
    raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
  if chunk_size % 8:
    raise ValueError(f"chunk_size must be a multiple of 8 (TPU sublane tile), got {chunk_size}")
  if algorithm == "chunked" and chunk_size > MAX_CHUNKED_CHUNK_SIZE:
    raise ValueError(f"chunk_size must be at most {MAX_CHUNKED_CHUNK_SIZE} for the chunked algorithm, got {chunk_size}")
  _, seq_len, _, _ = r.shape
  if algorithm == "recurrent":
    r, v = r.astype(jnp.float32), v.astype(jnp.float32)

  chunk = min(chunk_size, seq_len)
  padded_len = -(-seq_len // chunk) * chunk

  def to_kernel_layout(x, pad_value=0.0):
    x = jnp.swapaxes(x, 1, 2)  # (B, H, T, N)
    if padded_len != seq_len:
      x = jnp.pad(x, ((0, 0), (0, 0), (0, padded_len - seq_len), (0, 0)), constant_values=pad_value)
    return x

  batch = r.shape[0]
  reset_col = jnp.zeros((batch, padded_len), jnp.float32)[..., None]  # (B, T, 1); no resets
  y, final_state, _ = _forward(
      to_kernel_layout(r),
      to_kernel_layout(w, pad_value=1.0),
      to_kernel_layout(k),
      to_kernel_layout(v),
      to_kernel_layout(-kk),
      to_kernel_layout(kk * a),
      reset_col,
      state.astype(jnp.float32),
      chunk=chunk,
      algorithm=algorithm,
  )
  return jnp.swapaxes(y[:, :, :seq_len], 1, 2), final_state


# ----------------------------------------------------------------------------- ours


def wkv7_ref(r, w, k, v, a, kk, state, chunk_size=None, algorithm=None):
  """The recurrence step by step (lax.scan over time, float32, HIGHEST precision)."""
  f = lambda x: jnp.swapaxes(x.astype(jnp.float32), 0, 1)  # (T, B, H, N)
  b_vec = kk * a

  def step(s, xs):
    rt, wt, kt, vt, at, bt = xs
    sa = jnp.einsum("bhij,bhj->bhi", s, at, precision=_HIGHEST)
    s = s * wt[:, :, None, :] + sa[..., :, None] * bt[:, :, None, :] + vt[..., :, None] * kt[:, :, None, :]
    return s, jnp.einsum("bhij,bhj->bhi", s, rt, precision=_HIGHEST)

  s, y = lax.scan(step, state.astype(jnp.float32), (f(r), f(w), f(k), f(v), f(-kk), f(b_vec)))
  return jnp.swapaxes(y, 0, 1), s


def _wkv_inputs():
  batch, seq, heads, n = 1, 128, 2, 64
  ks = jax.random.split(jax.random.key(8), 7)
  normal = lambda key, scale=1.0: scale * jax.random.normal(key, (batch, seq, heads, n), jnp.float32)
  w = jnp.exp(-jnp.exp(-0.5 - jax.nn.softplus(-normal(ks[1]))))  # RWKV-7's decay, in (0.54, 1)
  kk = normal(ks[4])
  kk = kk / jnp.linalg.norm(kk, axis=-1, keepdims=True)
  a = jax.nn.sigmoid(normal(ks[5]))
  state = 0.1 * jax.random.normal(ks[6], (batch, heads, n, n), jnp.float32)
  return normal(ks[0], 0.2), w, normal(ks[2], 0.2), normal(ks[3], 0.2), a, kk, state


INSPECT = {
    "wkv7_pallas": {
        "args": _wkv_inputs, "reference": "wkv7_ref", "atol": 1e-4, "rtol": 1e-3,
        "params": {"chunk_size": [16, 32, 64, 128], "algorithm": ["recurrent", "chunked"]},
    },
}
