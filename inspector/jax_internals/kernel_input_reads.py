"""Which elements of its pipelined inputs a pallas_call reads: the blocks it loads at the grid
steps where its body reads the block before writing all of it.

A kernel may load a block and overwrite it before reading it: axlearn's Mamba scan backward takes
the forward's boundary states as an input and, at its last step, zeroes that block (the state
before the first chunk) before it reads it, so the block the forward never writes is never read.
Counting every input as read whole made the forward's unwritten block an error. Only the body's
top level is followed: an unconditional write of the whole ref, or a ``pl.when`` / ``lax.cond``
whose predicate the program ids decide (branches.py evaluates it at every step) and whose branch
writes the whole ref before anything reads it. Anything else reads the block (never less read
than the kernel may read)."""
from __future__ import annotations

import math

import numpy as np

from ..base.user_code import short_path
from .branches import MAX_STEPS, cond_choices
from .index_maps import Box, dim_kind, index_map_callable, is_dynamic_dim
from .tracing import eqn_frame

_WRITE, _READ = "write", "read"


def _whole(eqn, ref) -> bool:
    """``eqn`` (a swap) stores every element of ``ref`` (``ref[...] = x``, no other transform)."""
    try:
        from jax._src.state.indexing import NDIndexer, Slice
    except ImportError:
        return False
    shape = tuple(ref.aval.shape)
    transforms = eqn.params["tree"].unflatten(eqn.invars[2:])
    if not transforms:
        return True
    if len(transforms) != 1 or not isinstance(transforms[0], NDIndexer):
        return False
    indices = transforms[0].indices
    return len(indices) == len(shape) and all(
        isinstance(i, Slice) and isinstance(i.start, int) and i.start == 0 and i.size == n and i.stride == 1
        for i, n in zip(indices, shape))


def _first_touch(jaxpr, ref) -> tuple[str, object] | None:
    """How the equations of ``jaxpr`` first touch ``ref``: (write, the swap) when they store all of
    it before any read, (read, None) for anything else, None when they never touch it."""
    for eqn in jaxpr.eqns:
        if not any(v is ref for v in eqn.invars):
            continue
        if eqn.primitive.name == "swap" and eqn.invars[0] is ref and _whole(eqn, ref):
            return _WRITE, eqn
        if eqn.primitive.name == "cond":
            touches = {_first_touch(b.jaxpr, b.jaxpr.invars[k]) for b in eqn.params["branches"]
                       for k, v in enumerate(eqn.invars[1:]) if v is ref}
            if touches == {None}:
                continue
        return _READ, None
    return None


def written_first(kernel, ref, grid: tuple[int, ...]) -> tuple[np.ndarray, object] | None:
    """(per grid step in row-major order: the body stores the whole of ``ref`` before reading it,
    the swap that does) or None where no step does or the steps are too many to follow."""
    steps = math.prod(grid)
    if steps > MAX_STEPS:
        return None
    open_ = np.ones(steps, bool)  # steps whose first touch is still to come
    written = np.zeros(steps, bool)
    store = None
    for index, eqn in enumerate(kernel.eqns):
        if not any(v is ref for v in eqn.invars):
            continue
        if eqn.primitive.name == "swap" and eqn.invars[0] is ref and _whole(eqn, ref):
            written |= open_
            store = eqn
            break
        if eqn.primitive.name != "cond":
            break  # a read (or a partial write) where the steps still open come
        chosen = cond_choices(kernel, index, grid)
        if chosen is None:
            break
        for b, branch in enumerate(eqn.params["branches"]):
            inner = [branch.jaxpr.invars[k] for k, v in enumerate(eqn.invars[1:]) if v is ref]
            touch = _first_touch(branch.jaxpr, inner[0]) if inner else None
            if touch is None:
                continue
            taken = open_ & (chosen == b)
            if touch[0] == _WRITE:
                written |= taken
                store = touch[1]
            open_ &= ~taken
        if not open_.any():
            break
    return (written, store) if written.any() else None


def _boxes(blocks: np.ndarray, kinds: list[str], sizes: list[int | None], shape: tuple[int, ...]) -> list[Box]:
    found = []
    for row in np.unique(blocks, axis=0):
        box = []
        for idx, kind, size, n in zip(row, kinds, sizes, shape):
            start = int(idx) if kind == "squeezed" else int(idx) * int(size or 1)
            box.append((start, min(start + (1 if kind == "squeezed" else int(size or 1)), n)))
        found.append(tuple(box))
    return found


def input_reads(eqn) -> list[tuple[list[Box], list[str]] | None]:
    """What the pallas_call ``eqn`` reads of each of its operands (eqn.invars' order): None for the
    whole operand; for a pipelined input some of whose loads the body overwrites before reading,
    (the boxes it reads, where the body writes the rest: "k writes it at f.py:257 before reading it")."""
    reads: list[tuple[list[Box], list[str]] | None] = [None] * len(eqn.invars)
    p = eqn.params
    gm = p.get("grid_mapping")
    if gm is None or any(is_dynamic_dim(d) for d in gm.grid) or int(gm.num_index_operands):
        return reads  # grids sized, or blocks chosen, at run time: not followed
    grid = tuple(int(d) for d in gm.grid)
    kernel = p["jaxpr"]
    first = len(eqn.invars) - gm.num_inputs
    for j, bm in enumerate(gm.block_mappings[:gm.num_inputs]):
        kinds, sizes = zip(*(dim_kind(d) for d in bm.block_shape)) if bm.block_shape else ((), ())
        if not set(kinds) <= {"blocked", "squeezed"} or len(kinds) != len(bm.array_aval.shape):
            continue
        found = written_first(kernel, kernel.invars[j], grid)
        if found is None:
            continue
        written, store = found
        read_steps = np.flatnonzero(~written)
        shape = tuple(int(d) for d in bm.array_aval.shape)
        boxes: list[Box] = []
        if len(read_steps):
            ids = np.unravel_index(read_steps, grid) if grid else ()
            blocks = np.stack([np.asarray(b).reshape(-1) for b in
                               index_map_callable(bm.index_map_jaxpr, None, len(grid))(*[np.asarray(i, np.int32) for i in ids])],
                              axis=1)
            boxes = _boxes(blocks, list(kinds), list(sizes), shape)
        frame = eqn_frame(store) if store is not None else None
        name = str(p.get("name") or getattr(getattr(kernel, "debug_info", None), "func_name", "pallas_call"))
        where = f" at {short_path(frame[0])}:{frame[1]}" if frame else ""
        reads[first + j] = (boxes, [f"{name} writes it{where} before reading it"])
    return reads
