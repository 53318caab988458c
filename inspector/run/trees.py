"""Comparing the kernel's output tree with the reference's: every leaf's structure, shape, dtype
and values (``outputs``), each mismatch folded onto the blocks of the pallas_call output that made
it, with the first grid points that wrote each bad block."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..base.findings import Finding
from ..jax_internals.accumulation import accumulations
from ..pallas.grid_walk import MAX_STEPS, grid_points
from .outputs import coarse_blocks, compare, error_map, leaf_findings, pair_leaves, value_notes
from .result import LeafDiff


def _writers(call, operand: int):
    """block -> the first grid points whose output block it is."""
    info = call.info
    if not info.grid or info.steps is None or info.steps > MAX_STEPS // 4 or (info.scalar_prefetch and not call.prefetch_known):
        return None  # no grid (one step), a run-time grid, too many steps, or index maps that read run-time data
    points = grid_points(info.grid, 0, info.steps)
    try:
        blocks = [np.broadcast_to(np.asarray(b), (info.steps,)) for b in call.index_maps[operand](*points)]
    except Exception:  # noqa: BLE001 - an index map the walk cannot evaluate: no writers named
        return None

    def find(block: list[int]) -> list[list[int]]:
        hit = np.ones(info.steps, bool)
        for b, want in zip(blocks, block):
            hit &= b == want
        return [[int(p[i]) for p in points] for i in np.flatnonzero(hit)[:4]]

    return find


def _output_blockspec(found_calls, shape: tuple[int, ...], dtype: str):
    """The pallas_call output that has this leaf's shape: (call, operand index)."""
    for call in found_calls:
        for i, op in enumerate(call.info.operands):
            if op.role == "output" and op.pipelined and tuple(op.array_shape) == tuple(shape) and op.dtype == dtype:
                return call, i
    return None, None


def accumulations_of(fn, args, kwargs):
    """Per flat output of ``fn``, the terms it sums (jax_internals.accumulation); None when it cannot be traced."""
    import jax

    try:
        return accumulations(jax.make_jaxpr(fn)(*args, **kwargs))
    except Exception:  # noqa: BLE001 - the tolerance falls back to the dtype's; the run reports the function's errors
        return None


def by_leaf(ref_out, accs) -> dict[int, object]:
    """The reference's leaves (by id) -> their accumulations, where there is one per flat output."""
    import jax

    leaves = jax.tree.leaves(ref_out)
    return {id(leaf): acc for leaf, acc in zip(leaves, accs)} if accs is not None and len(accs) == len(leaves) else {}


def compare_trees(kernel_out, ref_out, found_calls, atol, rtol, label: str = "", accs=None) -> tuple[list[LeafDiff], list[Finding]]:
    """Every output leaf compared, and the structure/shape/dtype findings. ``accs``: the reference's
    accumulations per flat output (accumulations_of), from which tolerances not given are derived."""
    pairs, findings = pair_leaves(kernel_out, ref_out, label)
    accumulated = by_leaf(ref_out, accs)
    diffs = []
    for name, k, r in pairs:
        comparable, leaf_notes = leaf_findings(name, k, r)
        findings += leaf_notes
        if not comparable:
            continue
        leaf, bad, nan, diff = compare(name, k, r, atol, rtol, accumulated.get(id(r)))
        findings += value_notes(leaf)
        call, operand = _output_blockspec(found_calls, tuple(np.shape(k)), str(np.asarray(k).dtype))
        if call is not None:
            op = call.info.operands[operand]
            blocks = [b or 1 for b in op.block_shape]
            leaf = dataclasses.replace(leaf, error_map=error_map(bad, nan, diff, blocks, "blockspec", call.info.name,
                                                                 _writers(call, operand)))
        elif bad.ndim:
            leaf = dataclasses.replace(leaf, error_map=error_map(bad, nan, diff, coarse_blocks(bad.shape), "coarse"))
        diffs.append(leaf)
    return diffs, findings


def wrong(kernel_out, ref_out, tol) -> int | None:
    """Elements outside tolerance (None: the trees do not even match). ``tol``: (atol, rtol, accumulations)."""
    atol, rtol, accs = tol
    diffs, findings = compare_trees(kernel_out, ref_out, [], atol, rtol, accs=accs)
    if any(f.severity == "error" for f in findings):
        return None
    return sum(l.bad + max(0, l.nan_kernel - l.nan_reference) for l in diffs)
