"""The grid steps that run a Pallas kernel's guarded code (``pl.when`` / ``lax.cond`` at the top of
its body), and the kernel with that code forced on or off.

libtpu's static simulation does not follow such a guard step by step: on the v5e the causal flash
sample's simulation ran its ``pl.when(needed)`` body at none of its steps (130 us against 377 us
measured), JAX's own flash kernel at most of them, while the sample without the mask, whose steps
all run the body, simulated at 584 us against 587 us measured. So the time of a kernel with such a
guard is a simulation of each side at every step, weighted by how many steps take it. Which steps
take it follows from the program ids when the guard's predicate depends on nothing else (a causal
mask, a first or last step) or on the scalar prefetch values too where the inputs decide them
(a block mask, a MoE's group offsets); it is evaluated here for every step of the grid, in numpy.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

MAX_STEPS = 1 << 20  # grids beyond this are evaluated on this many steps drawn evenly at random, and scaled


@dataclasses.dataclass(frozen=True, kw_only=True)
class Guard:
    """A kernel's costliest top-level guard: which of its branches holds the most code, and on how
    many of the grid's steps that branch runs."""

    eqn: int  # index of the cond among the kernel body's equations
    heavy: int  # the branch with the most equations (pl.when's body: 1)
    light: int  # the branch with the fewest (pl.when's: 0, nothing)
    heavy_eqns: int
    light_eqns: int
    steps: int  # the full grid's steps
    heavy_steps: int | None  # of them, those that run the heavy branch; None: decided by values known at run time
    read_values: bool = False  # heavy_steps read the scalar prefetch values the example inputs give, not only the program ids
    source: str | None  # file:line of the guard, where jax recorded it


def _size(jaxpr) -> int:
    """Equations, counting those of nested jaxprs (branches, loops, calls)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for sub in _subjaxprs(eqn):
            total += _size(sub)
    return total


def _subjaxprs(eqn) -> list:
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def costliest_guard_eqn(jaxpr) -> tuple[int, int, int, int, int] | None:
    """(equation index, heavy branch, light branch, their sizes) of the top-level cond whose
    branches differ most; None without one."""
    best = None
    for i, eqn in enumerate(jaxpr.eqns):
        if eqn.primitive.name != "cond":
            continue
        sizes = [_size(b.jaxpr) for b in eqn.params["branches"]]
        heavy = max(range(len(sizes)), key=sizes.__getitem__)
        light = min(range(len(sizes)), key=sizes.__getitem__)
        gap = sizes[heavy] - sizes[light]
        if gap > 0 and (best is None or gap > best[3] - best[4]):
            best = (i, heavy, light, sizes[heavy], sizes[light])
    return best


def guard(jaxpr, grid: tuple, prefetch: list | None = None) -> Guard | None:
    """The kernel's costliest top-level guard and how many steps of ``grid`` run its heavy branch
    (None when its predicate reads more than the program ids and the scalar prefetch values
    ``prefetch`` gives, in order, None where unknown); None without a guard or a grid of static size."""
    found = costliest_guard_eqn(jaxpr)
    if found is None or any(not isinstance(g, int) for g in grid):
        return None
    index, heavy, light, heavy_eqns, light_eqns = found
    steps = math.prod(grid)
    flat = np.arange(steps) if steps <= MAX_STEPS else np.random.default_rng(0).integers(0, steps, MAX_STEPS)
    ids = [np.asarray(a, dtype=np.int64) for a in np.unravel_index(flat, grid)] if grid else []
    predicate = jaxpr.eqns[index].invars[0]
    chosen = _value(predicate, _evaluate(jaxpr.eqns[:index], ids, grid))
    read_values = False
    if chosen is None and (known := {ref: np.asarray(v) for ref, v in zip(jaxpr.invars, prefetch or ()) if v is not None}):
        chosen = _value(predicate, _evaluate(jaxpr.eqns[:index], ids, grid, known))
        read_values = chosen is not None
    heavy_steps = None if chosen is None else \
        round(float(np.broadcast_to(np.asarray(chosen) == heavy, flat.shape).mean()) * steps)
    return Guard(eqn=index, heavy=heavy, light=light, heavy_eqns=heavy_eqns, light_eqns=light_eqns, steps=steps,
                 heavy_steps=heavy_steps, read_values=read_values, source=_source(jaxpr.eqns[index].source_info))


def branch_steps(jaxpr, grid: tuple, prefetch: list | None = None) -> dict[int, list[float]]:
    """Of each top-level cond (by its index among the body's equations) whose index the program ids
    (and the scalar prefetch values ``prefetch`` gives) decide: the grid steps that take each of its
    branches. Conds decided by values known only at run time are left out; so is every cond of a
    grid of run-time size."""
    conds = [i for i, e in enumerate(jaxpr.eqns) if e.primitive.name == "cond"]
    if not conds or any(not isinstance(g, int) for g in grid):
        return {}
    steps = math.prod(grid)
    flat = np.arange(steps) if steps <= MAX_STEPS else np.random.default_rng(0).integers(0, steps, MAX_STEPS)
    ids = [np.asarray(a, dtype=np.int64) for a in np.unravel_index(flat, grid)] if grid else []
    known = {ref: np.asarray(v) for ref, v in zip(jaxpr.invars, prefetch or ()) if v is not None}
    values = _evaluate(jaxpr.eqns, ids, grid, known)
    found = {}
    for i in conds:
        chosen = _value(jaxpr.eqns[i].invars[0], values)
        if chosen is None:
            continue
        n = len(jaxpr.eqns[i].params["branches"])
        picked = np.clip(np.broadcast_to(np.asarray(chosen), flat.shape).astype(np.int64), 0, n - 1)
        found[i] = [float(c) * steps / len(flat) for c in np.bincount(picked, minlength=n)]
    return found


def cond_choices(jaxpr, index: int, grid: tuple[int, ...]) -> np.ndarray | None:
    """The branch the cond at ``jaxpr.eqns[index]`` takes at each step of ``grid`` (row-major, every
    step: the caller keeps to MAX_STEPS), where the program ids decide it; None where they do not."""
    steps = math.prod(grid)
    ids = [np.asarray(a, dtype=np.int64) for a in np.unravel_index(np.arange(steps), grid)] if grid else []
    chosen = _value(jaxpr.eqns[index].invars[0], _evaluate(jaxpr.eqns[:index], ids, grid))
    return None if chosen is None else np.broadcast_to(np.asarray(chosen), (steps,))


def forced(jaxpr, eqn: int, branch: int):
    """The kernel body with its ``eqn``-th equation (a cond) taking ``branch`` at every step."""
    from jax._src import core as jax_core

    cond = jaxpr.eqns[eqn]
    literal = jax_core.Literal(np.int32(branch), jax_core.ShapedArray((), np.dtype("int32")))
    eqns = list(jaxpr.eqns)
    eqns[eqn] = cond.replace(invars=[literal, *cond.invars[1:]])
    return jaxpr.replace(eqns=eqns)


def _source(info) -> str | None:
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(info.traceback) if info is not None else None
    except (ImportError, AttributeError):
        return None
    return f"{frame.file_name.rsplit('/', 1)[-1]}:{frame.start_line}" if frame is not None else None


def _value(var, values: dict) -> Any:
    if hasattr(var, "val") and not hasattr(var, "count"):  # a Literal
        return np.asarray(var.val)
    return values.get(var)


def _int_div(a, b):
    """lax.div on integers: truncated toward zero (numpy's // floors)."""
    q = np.floor_divide(a, b)
    return np.where((np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0)), q + 1, q)


def _div(a, b):
    return _int_div(a, b) if np.issubdtype(np.asarray(a).dtype, np.integer) else np.true_divide(a, b)


_OPS: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "rem": np.fmod, "max": np.maximum,
    "min": np.minimum, "neg": np.negative, "abs": np.abs, "sign": np.sign,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "and": np.logical_and, "or": np.logical_or, "not": np.logical_not, "xor": np.logical_xor,
    "select_n": lambda which, *cases: np.choose(np.asarray(which).astype(np.int64), cases),
}


def _load(eqn, args: list) -> np.ndarray | None:
    """``ref[i, j, ...]`` at every step, for integer indices (one per step, or one for all) within
    the ref; None for slices, other transforms or an index out of bounds (what the chip reads is
    then unknown here)."""
    try:
        from jax._src.state.indexing import NDIndexer
    except ImportError:
        return None
    ref, *leaves = args
    transforms = eqn.params["tree"].unflatten(leaves)
    value = np.asarray(ref)
    for t in transforms:
        if not isinstance(t, NDIndexer) or len(t.indices) != value.ndim:
            return None
        index = [np.asarray(i) for i in t.indices]
        if not all(np.issubdtype(i.dtype, np.integer) for i in index):
            return None
        if any(((i < 0) | (i >= n)).any() for i, n in zip(index, value.shape)):
            return None
        value = value[tuple(np.broadcast_arrays(*index))]
    return value


def _evaluate(eqns, ids: list, grid: tuple[int, ...], values: dict | None = None) -> dict:
    """The values (one per grid step, or a scalar) of every variable the equations compute from the
    program ids and literals alone; the others are absent."""
    values = {} if values is None else values
    for eqn in eqns:
        name = eqn.primitive.name
        if name == "program_id":
            values[eqn.outvars[0]] = ids[eqn.params["axis"]]
            continue
        if name == "num_programs":
            values[eqn.outvars[0]] = np.asarray(grid[eqn.params["axis"]])
            continue
        args = [_value(v, values) for v in eqn.invars]
        if any(a is None for a in args):
            continue
        if name == "get":  # a load from a ref whose value is known: a scalar prefetch
            if (loaded := _load(eqn, args)) is not None:
                values[eqn.outvars[0]] = loaded
        elif name == "convert_element_type":
            values[eqn.outvars[0]] = np.asarray(args[0]).astype(np.dtype(eqn.params["new_dtype"]))
        elif name in ("jit", "pjit", "closed_call", "core_call"):
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            inner = getattr(inner, "jaxpr", inner)
            if inner is None:
                continue
            scope = dict(zip(inner.invars, args))
            _evaluate(inner.eqns, ids, grid, scope)
            for out, inner_out in zip(eqn.outvars, inner.outvars):
                if (v := _value(inner_out, scope)) is not None:
                    values[out] = v
        elif name in _OPS and len(eqn.outvars) == 1:
            with np.errstate(all="ignore"):
                values[eqn.outvars[0]] = _OPS[name](*args)
    return values
