"""The values a pallas_call's leading operands take (dynamic grid sizes, scalar-prefetch data)
when the program's constants and the example inputs decide them: the part of the program before
the kernel is evaluated on them, equation by equation, lazily, and nothing else (no kernel runs).

Values are followed into jit / custom_jvp / custom_vjp calls, each call site with its own
inputs (jax shares one jaxpr between call sites). Inside loops and branches (scan, while, cond)
a value depends on the iteration, so it stays unknown (None).
"""
from __future__ import annotations

import sys
from typing import Any, Iterator

import numpy as np

# Primitives that call a jaxpr with their own operands, and the param that holds it.
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "checkpoint": "jaxpr"}
_UNKNOWN = object()
# the kernels: pallas_call, pl.kernel (mpmd_map) and pl.core_map over a core mesh
KERNEL_PRIMITIVES = ("pallas_call", "mpmd_map", "core_map")
_MAX_ELEMENTS = 1 << 24  # past this an intermediate is not worth evaluating for grid sizes


def called_jaxpr(eqn):
    """(jaxpr, consts) an equation calls with its own operands, or None."""
    inner = eqn.params.get(_CALLS.get(eqn.primitive.name, ""))
    if inner is None:
        return None
    return getattr(inner, "jaxpr", inner), list(getattr(inner, "consts", ()))


def pallas_occurrences(jaxpr, path: tuple | None = ()) -> Iterator[tuple[tuple | None, Any]]:
    """Every pallas_call in program order, with the chain of call equations that leads to it
    (None when a loop or branch lies on the way: its operands then depend on the iteration)."""
    from .tracing import sub_jaxprs

    for eqn in jaxpr.eqns:
        if eqn.primitive.name in KERNEL_PRIMITIVES:  # pallas_call, pl.kernel (mpmd_map), core_map
            yield path, eqn
            continue
        called = called_jaxpr(eqn)
        if called is not None:
            yield from pallas_occurrences(called[0], None if path is None else path + (eqn,))
        else:
            for sub in sub_jaxprs(eqn.params):
                yield from pallas_occurrences(sub, None)


class _Frame:
    """One activation of a jaxpr: its inputs (values, or thunks evaluated when first read)."""

    def __init__(self, jaxpr, consts: list, inputs: list):
        self.jaxpr = jaxpr
        self.env: dict[int, object] = {id(v): c for v, c in zip(jaxpr.constvars, consts)}
        self.inputs = {id(v): x for v, x in zip(jaxpr.invars, inputs)}
        self.defs = {id(v): (eqn, k) for eqn in jaxpr.eqns for k, v in enumerate(eqn.outvars)}
        self.children: dict[int, _Frame] = {}

    def child(self, eqn) -> "_Frame":
        if id(eqn) not in self.children:
            inner, consts = called_jaxpr(eqn)
            self.children[id(eqn)] = _Frame(inner, consts, [lambda v=v: self.value(v) for v in eqn.invars])
        return self.children[id(eqn)]

    def value(self, var):
        if hasattr(var, "val"):  # a literal
            return var.val
        key = id(var)
        if key not in self.env:
            if key in self.inputs:
                given = self.inputs[key]
                self.env[key] = given() if callable(given) else given
            elif key in self.defs:
                self.env[key] = self._evaluate(*self.defs[key])
            else:
                self.env[key] = _UNKNOWN
        return self.env[key]

    def _evaluate(self, eqn, k: int):
        if called_jaxpr(eqn) is not None:
            frame = self.child(eqn)
            return frame.value(frame.jaxpr.outvars[k])
        if eqn.primitive.name in KERNEL_PRIMITIVES or any(_big(v) for v in eqn.outvars):
            return _UNKNOWN
        args = [self.value(v) for v in eqn.invars]
        if any(a is _UNKNOWN for a in args):
            return _UNKNOWN
        params = eqn.primitive.get_bind_params(eqn.params)
        if isinstance(params, tuple):  # older jax: (subfuns, params)
            subfuns, params = params
            args = [*subfuns, *args]
        outs = eqn.primitive.bind(*args, **params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for var, out in zip(eqn.outvars, outs):
            self.env[id(var)] = out
        return outs[k]


def _big(var) -> bool:
    shape = getattr(getattr(var, "aval", None), "shape", ())
    return int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS


def leading_operands(eqn) -> int:
    """How many operands come before the kernel's inputs: dynamic grid sizes, then scalar prefetch."""
    gm = eqn.params.get("grid_mapping")
    if gm is None:  # a kernel over a core mesh: no grid, no scalar prefetch
        return 0
    dynamic = sum(1 for d in gm.grid if not isinstance(d, (int, np.integer)))
    return dynamic + int(gm.num_index_operands)


def _concrete(value) -> bool:
    import jax

    return value is not None and hasattr(value, "shape") and not isinstance(value, jax.ShapeDtypeStruct)


def operand_values(closed_jaxpr, occurrences: list, example_values: tuple | None) -> list[list | None]:
    """Per (path, pallas_call) occurrence: the numpy value of each leading operand, or None where
    the constants and example inputs do not decide it (or it could not be evaluated here)."""
    jaxpr = closed_jaxpr.jaxpr
    inputs = [x if _concrete(x) else _UNKNOWN for x in (example_values or ())]
    inputs += [_UNKNOWN] * (len(jaxpr.invars) - len(inputs))
    top = _Frame(jaxpr, list(closed_jaxpr.consts), inputs)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    out: list[list | None] = []
    try:
        for path, eqn in occurrences:
            n = leading_operands(eqn)
            if not n:
                out.append(None)
                continue
            values: list[np.ndarray | None] = [None] * len(eqn.invars)
            if path is not None:
                try:
                    frame = top
                    for call in path:
                        frame = frame.child(call)
                    for i in range(n):
                        v = frame.value(eqn.invars[i])
                        values[i] = None if v is _UNKNOWN else np.asarray(v)
                except Exception:  # a primitive that cannot run eagerly here: unknown, not a crash
                    pass
            out.append(values)
    finally:
        sys.setrecursionlimit(limit)
    return out


def leading_values(closed_jaxpr, example_values: tuple | None) -> list[tuple[list | None, list | None]]:
    """Per pallas_call, in program order: (its dynamic grid sizes, its scalar prefetch values), each
    value where the constants and example inputs decide it (None where not); (None, None) for a
    call not followed."""
    calls = [(path, eqn) for path, eqn in pallas_occurrences(closed_jaxpr.jaxpr) if eqn.primitive.name == "pallas_call"]
    try:
        values = operand_values(closed_jaxpr, calls, example_values)
    except Exception:  # evaluation is best effort: unknown values leave the guard unknown
        values = [None] * len(calls)
    found: list[tuple[list | None, list | None]] = []
    for (_, eqn), vals in zip(calls, values):
        dynamic = leading_operands(eqn) - int(eqn.params["grid_mapping"].num_index_operands)
        found.append((None, None) if vals is None else (vals[:dynamic], vals[dynamic:leading_operands(eqn)]))
    return found
