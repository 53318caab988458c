"""Kernels that reduce one block along its rows several times, written by the team to test one claim
of the VMEM estimate before they were compiled (issue 28): where row statistics are the body's
largest values, the results of all but the last reduction along the rows wait whole, in VMEM, for
the pass that uses them ((reductions - 1) statistics of rows / 8 vregs each), and a single reduction
keeps none (vmem.py, the statistics' "waiting" term). tests/test_vmem_row_reductions.py holds libtpu's
verdicts (tests/data/vmem_truth_reductions.json) against the estimate.

- one_max: x - max(x), one reduction (the control: nothing waits);
- mean_max: (x - mean) * max, two reductions of one block;
- four_stats: (x - mean) * rsqrt(mean(x^2)) / (max - min), four reductions;
- wide_centred: (x - mean) / (max - min) over 512-wide rows: a statistic is a quarter of the
  block, so two waiting statistics and two waiting block-sized values differ;
- layer_norm_256: flax's LayerNorm (the mean, then the variance of x - mean: two reductions, one
  after the other) over 256-wide rows.

A second round tests whether a value the body computes, which a reduction must see whole before the
value is used whole, is kept whole (written after the first round, before its own compiles):

- layer_norm_1024, layer_norm_2048: the same LayerNorm over 1024- and 2048-wide rows (a statistic
  is 1/8 and 1/16 of the block);
- shifted_square, shifted_square_1024: d = x - 0.5, then d * sum(d^2): one reduction, of a computed
  value used whole after it (the RMSNorm reduces x * x but uses x, which it can read again);
- centred_1024: the three reductions of x itself over 1024-wide rows, no computed value reduced;
- row_softmax_1024: exp(x - max) / sum(exp(x - max)) over 1024-wide rows.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _one_max_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x - jnp.max(x, axis=-1, keepdims=True)


def _mean_max_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = (x - jnp.mean(x, axis=-1, keepdims=True)) * jnp.max(x, axis=-1, keepdims=True)


def _four_stats_kernel(x_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    mean_square = jnp.mean(x * x, axis=-1, keepdims=True)
    spread = jnp.max(x, axis=-1, keepdims=True) - jnp.min(x, axis=-1, keepdims=True)
    o_ref[...] = (x - mean) * jax.lax.rsqrt(mean_square + 1e-6) / (spread + 1e-6)


def _centred_kernel(x_ref, o_ref):
    x = x_ref[...]
    spread = jnp.max(x, axis=-1, keepdims=True) - jnp.min(x, axis=-1, keepdims=True)
    o_ref[...] = (x - jnp.mean(x, axis=-1, keepdims=True)) / (spread + 1e-6)


def _layer_norm_kernel(x_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    diff = x - mean
    var = jnp.mean(diff * diff, axis=-1, keepdims=True)
    o_ref[...] = diff * jax.lax.rsqrt(var + 1e-6)


def _shifted_square_kernel(x_ref, o_ref):
    d = x_ref[...] - 0.5
    o_ref[...] = d * jnp.sum(d * d, axis=-1, keepdims=True)


def _row_softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def _row_blocks(kernel, x, block_rows):
    rows, dim = x.shape
    return pl.pallas_call(
        kernel, grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, dim), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, dim), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def _entry(name, kernel):
    """The pallas_call of ``kernel`` over row blocks, as a function named ``name`` (INSPECT's)."""
    def call(x, block_rows=256):
        return _row_blocks(kernel, x, block_rows)
    call.__name__ = call.__qualname__ = name
    return call


one_max = _entry("one_max", _one_max_kernel)
mean_max = _entry("mean_max", _mean_max_kernel)
four_stats = _entry("four_stats", _four_stats_kernel)
wide_centred = _entry("wide_centred", _centred_kernel)
layer_norm_256 = _entry("layer_norm_256", _layer_norm_kernel)
layer_norm_1024 = _entry("layer_norm_1024", _layer_norm_kernel)
layer_norm_2048 = _entry("layer_norm_2048", _layer_norm_kernel)
shifted_square = _entry("shifted_square", _shifted_square_kernel)
shifted_square_1024 = _entry("shifted_square_1024", _shifted_square_kernel)
centred_1024 = _entry("centred_1024", _centred_kernel)
row_softmax_1024 = _entry("row_softmax_1024", _row_softmax_kernel)


def one_max_reference(x, **_):
    return x - x.max(-1, keepdims=True)


def mean_max_reference(x, **_):
    return (x - x.mean(-1, keepdims=True)) * x.max(-1, keepdims=True)


def four_stats_reference(x, **_):
    spread = x.max(-1, keepdims=True) - x.min(-1, keepdims=True)
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) / (spread + 1e-6)


def wide_centred_reference(x, **_):
    spread = x.max(-1, keepdims=True) - x.min(-1, keepdims=True)
    return (x - x.mean(-1, keepdims=True)) / (spread + 1e-6)


def layer_norm_256_reference(x, **_):
    diff = x - x.mean(-1, keepdims=True)
    return diff * jax.lax.rsqrt((diff * diff).mean(-1, keepdims=True) + 1e-6)


def shifted_square_reference(x, **_):
    d = x - 0.5
    return d * (d * d).sum(-1, keepdims=True)


def row_softmax_reference(x, **_):
    return jax.nn.softmax(x, axis=-1)


def _rows(dim):
    return lambda: jax.random.normal(jax.random.key(8), (1024, dim), jnp.float32)


INSPECT = {
    "one_max": {"args": _rows(128), "reference": "one_max_reference", "params": {"block_rows": [256, 512]}},
    "mean_max": {"args": _rows(128), "reference": "mean_max_reference", "params": {"block_rows": [256, 512]}},
    "four_stats": {"args": _rows(128), "reference": "four_stats_reference", "params": {"block_rows": [256, 512]}},
    "wide_centred": {"args": _rows(512), "reference": "wide_centred_reference", "params": {"block_rows": [256, 512]}},
    "layer_norm_256": {"args": _rows(256), "reference": "layer_norm_256_reference", "params": {"block_rows": [256, 512]}},
    "layer_norm_1024": {"args": _rows(1024), "reference": "layer_norm_256_reference", "params": {"block_rows": [256, 512]}},
    "layer_norm_2048": {"args": _rows(2048), "reference": "layer_norm_256_reference", "params": {"block_rows": [256, 512]}},
    "shifted_square": {"args": _rows(128), "reference": "shifted_square_reference", "params": {"block_rows": [256, 512]}},
    "shifted_square_1024": {"args": _rows(1024), "reference": "shifted_square_reference",
                            "params": {"block_rows": [256, 512]}},
    "centred_1024": {"args": _rows(1024), "reference": "wide_centred_reference", "params": {"block_rows": [256, 512]}},
    "row_softmax_1024": {"args": _rows(1024), "reference": "row_softmax_reference", "params": {"block_rows": [256, 512]}},
}
