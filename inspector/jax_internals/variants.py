"""A program with some of its pallas_calls changed, built at trace time: the target's function is
traced, the chosen pallas_call equations get new parameters (CompilerParams' vmem_limit_bytes or
dimension_semantics, Triton's num_stages or num_warps, an input BlockSpec's pipeline_mode) and the
program is evaluated again. The user's file is never edited; `inspector fix` compiles and runs what
this returns.

Reads jax's pallas_call parameters (jax/_src/pallas, 0.10.x): ``compiler_params`` (Mosaic's
CompilerParams, Triton's, or None), ``grid_mapping.block_mappings[i].pipeline_mode``."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..base.fix_model import Change
from .evaluate import KERNEL_PRIMITIVES, called_jaxpr
from .tracing import sub_jaxprs


def _compiler_params(params: dict, **fields):
    from jax.experimental.pallas import tpu as pltpu

    return _params_of(pltpu.CompilerParams, "Mosaic's: not a TPU kernel", params, fields)


def _triton_params(params: dict, **fields):
    from jax.experimental.pallas import triton as plt

    return _params_of(plt.CompilerParams, "Triton's: not a Pallas-Triton kernel", params, fields)


def _params_of(kind: type, whose: str, params: dict, fields: dict):
    """The pallas_call's compiler_params of ``kind`` (a dataclass) with ``fields`` changed (new ones
    where none given)."""
    given = params.get("compiler_params")
    if given is None:
        return kind(**fields)
    if not isinstance(given, kind):
        raise ValueError(f"the pallas_call's compiler_params are {type(given).__name__}, not {whose}")
    return dataclasses.replace(given, **fields)  # type: ignore[type-var]


def _changed_params(params: dict, change: Change) -> dict:
    params = dict(params)
    if change.kind == "vmem_limit":
        params["compiler_params"] = _compiler_params(params, vmem_limit_bytes=int(change.value))  # type: ignore[arg-type]
    elif change.kind == "semantics":
        params["compiler_params"] = _compiler_params(params, dimension_semantics=tuple(change.value))  # type: ignore[arg-type]
    elif change.kind == "buffered":
        from jax.experimental import pallas as pl

        position, count = change.value  # type: ignore[misc]
        gm = params["grid_mapping"]
        mappings = list(gm.block_mappings)
        mappings[position] = dataclasses.replace(mappings[position], pipeline_mode=pl.Buffered(count))
        params["grid_mapping"] = dataclasses.replace(gm, block_mappings=tuple(mappings))
    elif change.kind == "order":
        params = _reordered(params, [int(a) for a in change.value])  # type: ignore[union-attr]
    elif change.kind == "triton":
        params["compiler_params"] = _triton_params(params, **change.value)  # type: ignore[arg-type]
    else:
        raise ValueError(f"a {change.kind} change is not made in the traced program")
    return params


def _reordered(params: dict, perm: list[int]) -> dict:
    """The grid in the order ``perm`` (new axis k is old axis perm[k]): each index map takes its
    grid indices in the new order, the dimension semantics follow their axes. The body is not
    edited: only a body that reads no pl.program_id is reordered (pallas/fixes.py)."""
    from jax._src import core

    gm = params["grid_mapping"]
    n = len(perm)
    mappings = []
    for bm in gm.block_mappings:
        closed = bm.index_map_jaxpr
        invars = list(closed.jaxpr.invars)
        jaxpr = closed.jaxpr.replace(invars=[invars[perm[k]] for k in range(n)] + invars[n:])
        mappings.append(dataclasses.replace(bm, index_map_jaxpr=core.ClosedJaxpr(jaxpr, closed.consts)))
    names = getattr(gm, "grid_names", None)
    params = dict(params, grid_mapping=dataclasses.replace(
        gm, grid=tuple(gm.grid[p] for p in perm), block_mappings=tuple(mappings),
        **({"grid_names": tuple(names[p] for p in perm)} if names else {})))
    given = params.get("compiler_params")
    semantics = getattr(given, "dimension_semantics", None)
    if semantics:
        params["compiler_params"] = _compiler_params(params, dimension_semantics=tuple(semantics[p] for p in perm))
    return params


def program_id_axes(kernel_jaxpr) -> list[int]:
    """The grid axes a kernel body reads with pl.program_id or pl.num_programs: a reorder of the
    grid changes what they give, so such a body is not reordered without editing it."""
    from .tracing import walk_eqns

    return sorted({int(e.params.get("axis", -1)) for e in walk_eqns(kernel_jaxpr)
                   if e.primitive.name in ("program_id", "num_programs")})


def call_name(eqn) -> str:
    """The pallas_call's name as PallasCall.name gives it (jax_internals/pallas.py)."""
    kernel = eqn.params.get("jaxpr")
    return str(eqn.params.get("name") or getattr(getattr(kernel, "debug_info", None), "func_name", "pallas_call"))


class _Rewriter:
    """Walks the program in the order pallas_occurrences does, counting each name's pallas_calls
    (``Change.call``: the how-manieth call of that name)."""

    def __init__(self, changes: list[Change]):
        self.changes = changes
        self.seen: dict[str, int] = {}
        self.applied: set[tuple[str, int]] = set()

    def jaxpr(self, jaxpr):
        eqns = [self.eqn(e) for e in jaxpr.eqns]
        return jaxpr.replace(eqns=eqns)

    def eqn(self, eqn):
        if eqn.primitive.name in KERNEL_PRIMITIVES:
            name = call_name(eqn)
            index = self.seen[name] = self.seen.get(name, -1) + 1
            params = eqn.params
            for change in self.changes:
                if change.kernel == name and change.call == index:
                    params = _changed_params(params, change)
                    self.applied.add((name, index))
            return eqn if params is eqn.params else eqn.replace(params=params)
        if called_jaxpr(eqn) is None and not any(True for _ in sub_jaxprs(eqn.params)):
            return eqn
        return eqn.replace(params={k: self.value(v) for k, v in eqn.params.items()})

    def value(self, v):
        from jax._src import core

        if isinstance(v, core.ClosedJaxpr):
            return core.ClosedJaxpr(self.jaxpr(v.jaxpr), v.consts)
        if isinstance(v, core.Jaxpr):
            return self.jaxpr(v)
        if isinstance(v, tuple) and any(isinstance(x, (core.Jaxpr, core.ClosedJaxpr)) for x in v):
            return tuple(self.value(x) for x in v)
        return v


def changed_program(closed_jaxpr, changes: list[Change]):
    """The closed jaxpr with each change made to its pallas_call (``Change.kernel``, and
    ``Change.call``: which of the calls of that name, in program order, nested calls included). A
    change whose call is not there raises ValueError."""
    from jax._src import core

    rewriter = _Rewriter([c for c in changes if c.kind != "params"])
    jaxpr = rewriter.jaxpr(closed_jaxpr.jaxpr)
    missing = {(c.kernel, c.call) for c in rewriter.changes} - rewriter.applied
    if missing:
        name, index = sorted(missing, key=str)[0]
        raise ValueError(f"no pallas_call {name} number {index} in the program ({rewriter.seen.get(name, -1) + 1} of that name)")
    return core.ClosedJaxpr(jaxpr, closed_jaxpr.consts)


def changed_function(fn: Callable, static_names: tuple[str, ...], changes: list[Change]) -> Callable:
    """``fn`` with the changes made each time it is traced: a function of the same inputs, to jit,
    lower and run as the original. Keyword arguments named in ``static_names`` (the target's static
    params) reach ``fn`` as they are, not traced."""
    import jax

    from .tracing import eval_jaxpr

    def changed(*args, **kwargs):
        static = {k: kwargs.pop(k) for k in list(kwargs) if k in static_names}
        leaves, tree = jax.tree.flatten((args, kwargs))
        abstract = jax.tree.unflatten(tree, [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves])
        closed, shapes = jax.make_jaxpr(lambda a, k: fn(*a, **k, **static), return_shape=True)(*abstract)
        out = eval_jaxpr(changed_program(closed, changes), *leaves)
        return jax.tree.unflatten(jax.tree.structure(shapes), out)

    changed.__name__ = getattr(fn, "__name__", "changed")
    return changed
