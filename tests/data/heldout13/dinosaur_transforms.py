# Held-out programs for jax-inspector (round thirteen; the chip's fourth held-out round), vendored from
# neuralgcm/dinosaur (Google's spectral dynamical core behind NeuralGCM), two files (seen 2026-12-06):
#   https://github.com/neuralgcm/dinosaur/blob/05145601c1415f4bcf751d2a234af48723f367e8/dinosaur/spherical_harmonic.py
#   https://github.com/neuralgcm/dinosaur/blob/28766d58c4591f3b59742300995f51789a6b0ba9/benchmarks/semi_lagrangian_gather_benchmark.py
# Licence: Apache License 2.0 (both files' own headers below; the repository's LICENSE).
#
# Verbatim: from spherical_harmonic.py, the module's `einsum` (jnp.einsum at Precision.HIGHEST) and
# the bodies of RealSphericalHarmonics.transform and .inverse_transform; from the benchmark,
# _linearized_take and _advanced_indexing (both @jax.jit, as there). Changed: the two transforms
# are functions taking the basis (`f`, the real Fourier matrix; `p`, the associated Legendre
# values; `w`, the quadrature weights) as arguments instead of reading `self.basis`, which
# computes them in numpy (fourier.real_basis, associated_legendre.evaluate, not vendored): the
# inputs here are seeded random arrays of the basis's shapes, and the time does not depend on the
# values. Dropped: everything else (the SphericalHarmonics classes, FastSphericalHarmonics and
# its sharded einsums, the benchmark's timing and input-building code). Ours, below the "ours"
# line: INSPECT.
# Style: plain XLA. The transforms are a dense real DFT done as a matmul and a Legendre transform
# as a batched matmul, all f32 at HIGHEST precision (several bf16 MXU passes each); the gathers
# fetch a 2x4x4 stencil per point from a 3-D field, once through a 1-D jnp.take on linearised
# indices and once through multi-array advanced indexing, then a weighted sum of the 32 values.
#
# Copyright 2023 Google LLC
# (spherical_harmonic.py; the benchmark's header reads "Copyright 2026 Google LLC")

# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at

#     https://www.apache.org/licenses/LICENSE-2.0

# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import functools

import jax
import jax.numpy as jnp


# All `einsum`s should be done at highest available precision.
einsum = functools.partial(jnp.einsum, precision=jax.lax.Precision.HIGHEST)


def inverse_transform(x, p, f):
  """RealSphericalHarmonics.inverse_transform, the basis passed in."""
  px = jax.named_call(einsum, name='inv_legendre')('mjl,...ml->...mj', p, x)
  # note: explicitly matrix multiplication seems to be faster than using an
  # explicit FFT at the resolutions we use.
  fpx = jax.named_call(einsum, name='inv_fourier')('im,...mj->...ij', f, px)
  return fpx


def transform(x, w, f, p):
  """RealSphericalHarmonics.transform, the basis passed in."""
  wx = w * x
  fwx = jax.named_call(einsum, name='fwd_fourier')('im,...ij->...mj', f, wx)
  pfwx = jax.named_call(einsum, name='fwd_legendre')(
      'mjl,...mj->...ml', p, fwx
  )
  return pfwx


@jax.jit
def _linearized_take(field, k, i, j, weights):
  """The formulation used by `semi_lagrangian.interpolate_3d`."""
  _, num_lon, extended_lat = field.shape
  flat_index = (k * num_lon + i) * extended_lat + j
  values = jnp.take(field.ravel(), flat_index, mode='clip')
  return (values * weights).sum(axis=(-3, -2, -1))


@jax.jit
def _advanced_indexing(field, k, i, j, weights):
  """The equivalent multi-array advanced-indexing formulation."""
  values = field[k, i, j]
  return (values * weights).sum(axis=(-3, -2, -1))


# ----------------------------------------------------------------------------- ours


def sh_transform(x, w, f, p):
  return transform(x, w, f, p)


def sh_inverse_transform(x, p, f):
  return inverse_transform(x, p, f)


def linearized_take(field, k, i, j, weights):
  return _linearized_take(field, k, i, j, weights)


def advanced_indexing(field, k, i, j, weights):
  return _advanced_indexing(field, k, i, j, weights)


# The T170 grid (512 longitudes x 256 Gaussian latitudes, 171 longitudinal and 172 total
# wavenumbers: a (512, 341) Fourier matrix, (341, 256, 172) Legendre values) on 64 levels.
# The gathers on the benchmark's T85 grid, 4 levels (its case has 32): 4 x 256 x 128 points, a 2x4x4 stencil each
# (k, i, j broadcast to it) from a (4, 256, 132) field (latitude extended by 4); the stencil arrays' trailing
# (2, 4, 4) and (1, 1, 4) dims make them mostly tile padding in HBM.
_GRID = "f32[64,512,256] f32[256] f32[512,341] f32[341,256,172]"
_STENCIL = "f32[4,256,132] s32[4,256,128,2,1,1] s32[4,256,128,1,4,1] s32[4,256,128,1,1,4] f32[4,256,128,2,4,4]"
_RANGES = {"k": (0, 3), "i": (0, 256), "j": (0, 132)}  # as the benchmark draws them
INSPECT = {
    "sh_transform": {"args": _GRID},
    "sh_inverse_transform": {"args": "f32[64,341,172] f32[341,256,172] f32[512,341]"},
    "linearized_take": {"args": _STENCIL, "int_ranges": _RANGES},
    "advanced_indexing": {"args": _STENCIL, "int_ranges": _RANGES},
}
