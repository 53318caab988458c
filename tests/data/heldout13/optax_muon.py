# Held-out program for jax-inspector (round thirteen; the chip's fourth held-out round), vendored from:
#   https://github.com/google-deepmind/optax/blob/039ec0c1a95c14d9427fa98a0c6c36eb2bd88621/optax/contrib/_muon.py
# (seen 2026-12-06).
# Licence: Apache License 2.0 (the file's own header below; the repository's LICENSE).
#
# Verbatim: orthogonalize_via_newton_schulz. Ours, below the "ours" line: muon_update, the
# arithmetic of scale_by_muon's update_fn (nesterov=True, adaptive=False) written out for three
# matrices, optax.tree.update_moment / bias_correction and numerics.safe_increment inlined as the
# jnp expressions they compute (optax, chex and the GradientTransformation machinery are not
# imported); the wrappers and INSPECT.
# Style: plain XLA, an optimizer step: the Newton-Schulz quintic iteration, five steps of three
# f32 matmuls each (X X^T, A A, B X) in a lax.fori_loop (a while loop in HLO), after a Frobenius
# normalisation; the update applies it to three transformer-layer matrices of different aspect.
#
# Copyright 2025 DeepMind Technologies Limited. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# ==============================================================================
"""Muon.

Implementation of the
[Muon optimizer](https://github.com/KellerJordan/modded-nanogpt)
by Keller Jordan
"""

import jax
import jax.numpy as jnp


def orthogonalize_via_newton_schulz(
    x: jax.Array,
    ns_coeffs: jax.Array,
    ns_steps: int = 5,
    eps: float = 1e-8,
) -> jax.Array:
  r"""Orthogonalize via Newton-Schulz iteration.

  We opt to use a quintic iteration whose coefficients are selected to maximize
  the slope at zero. For the purpose of minimizing steps, it turns out to be
  empirically effective to keep increasing the slope at zero even beyond the
  point where the iteration no longer converges all the way to one everywhere
  on the interval. This iteration therefore does not produce UV^T but rather
  something like US'V^T where S' is diagonal with S_{ii}' ~ Uniform(0.5, 1.5),
  which turns out not to hurt model performance at all relative to UV^T, where
  USV^T = G is the SVD.

  Args:
    x: A matrix to orthogonalize.
    ns_coeffs: Coefficients for the Newton-schulz iterators.
      Must have shape (n, 3) where n is the number of iterations.
    ns_steps: Number of Newton-schulz iterations.
      Ignored if `ns_coeffs` is a 2D array.
    eps: Term added to denominators to improve numerical stability.

  Returns:
    The orthogonalized matrix.
  """
  if x.ndim != 2:
    raise ValueError(f'Input must have shape (m, n), got {x.shape}')
  if ns_coeffs.ndim > 2 or ns_coeffs.shape[-1] != 3:
    raise ValueError(
        'Newton-Schulz coefficients must have shape (3,) or (n, 3), '
        f'got {ns_coeffs.shape}'
    )
  def newton_schulz_iterator(x: jax.Array, coeffs: jax.Array) -> jax.Array:
    a = x @ x.T
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x
  transposed = False
  if x.shape[0] > x.shape[1]:
    x = x.T
    transposed = True
  x /= jnp.linalg.norm(x) + eps  # Ensure spectral norm is at most 1
  ns_coeffs = ns_coeffs.astype(x.dtype)
  if ns_coeffs.ndim == 1:
    x = jax.lax.fori_loop(
        0, ns_steps, lambda _, x: newton_schulz_iterator(x, ns_coeffs), x
    )
  else:
    x, _ = jax.lax.scan(
        lambda x, abc: (newton_schulz_iterator(x, abc), None), x, ns_coeffs
    )
  if transposed:
    x = x.T
  return x


# ----------------------------------------------------------------------------- ours

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # scale_by_muon's default


def newton_schulz(x, ns_steps: int = 5):
  return orthogonalize_via_newton_schulz(x, jnp.asarray(NS_COEFFS), ns_steps)


def muon_update(g_attn, g_up, g_down, mu_attn, mu_up, mu_down, count, beta: float = 0.95, eps: float = 1e-8):
  """scale_by_muon's update_fn (nesterov, not adaptive) on three matrices: returns the updates and
  the new momenta."""
  updates, mu = (g_attn, g_up, g_down), (mu_attn, mu_up, mu_down)
  mu = jax.tree.map(lambda g, m: (1 - beta) * g + beta * m, updates, mu)  # update_moment(order=1)
  count_inc = count + 1  # safe_increment, below int32's maximum
  correct = lambda t, c: jax.tree.map(lambda x: x / (1 - beta ** c).astype(x.dtype), t)  # bias_correction
  mu_hat = jax.tree.map(lambda m, g: beta * m + (1 - beta) * g, correct(mu, count_inc + 1), correct(updates, count_inc))
  updates = jax.tree.map(lambda x: orthogonalize_via_newton_schulz(x, jnp.asarray(NS_COEFFS), 5, eps), mu_hat)
  updates = jax.tree.map(lambda x: jnp.sqrt(jnp.maximum(1, x.shape[-1] / x.shape[-2])) * x, updates)
  return updates, mu


# a 4096 x 1024 f32 matrix (transposed for the iteration); one layer of a 1024-wide model with a
# 4x MLP: a (1024, 1024) attention matrix, (1024, 4096) up and (4096, 1024) down projections
INSPECT = {
    "newton_schulz": {"args": "f32[4096,1024]", "params": {"ns_steps": [5, 3, 8]}},
    "muon_update": {
        "args": "f32[1024,1024] f32[1024,4096] f32[4096,1024] f32[1024,1024] f32[1024,4096] f32[4096,1024] s32[]",
        "int_ranges": {"count": (1, 1000)},
    },
}
