"""The values a pallas_call's leading operands take (dynamic grid sizes, scalar-prefetch data)
when the program's constants and the example inputs decide them: the part of the program before
the kernel is evaluated on them, equation by equation, and nothing else (no kernel runs).

Follows values into jit / custom_jvp / custom_vjp calls; inside loops and branches (scan, while,
cond) a value depends on the iteration, so it stays unknown (None).
"""
from __future__ import annotations

import sys

import numpy as np

# Primitives that call a jaxpr with their own operands, and the param that holds it.
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "checkpoint": "jaxpr"}
_UNKNOWN = object()
_MAX_ELEMENTS = 1 << 24  # past this an intermediate is not worth evaluating for grid sizes


class _Program:
    def __init__(self, closed_jaxpr, example_values):
        self.env: dict[int, object] = {}
        self.defs: dict[int, tuple] = {}  # id(var) -> (eqn, output index)
        self.links: dict[int, object] = {}  # id(inner invar) -> outer var
        self.calls: dict[int, object] = {}  # id(call eqn) -> inner jaxpr
        jaxpr = closed_jaxpr.jaxpr
        for v, c in zip(jaxpr.constvars, closed_jaxpr.consts):
            self.env[id(v)] = c
        for i, v in enumerate(jaxpr.invars):
            value = example_values[i] if example_values is not None and i < len(example_values) else None
            self.env[id(v)] = value if value is not None and hasattr(value, "shape") and not _abstract(value) else _UNKNOWN
        self._index(jaxpr)

    def _index(self, jaxpr) -> None:
        for eqn in jaxpr.eqns:
            for k, v in enumerate(eqn.outvars):
                self.defs[id(v)] = (eqn, k)
            inner = eqn.params.get(_CALLS.get(eqn.primitive.name, ""))
            if inner is not None:
                j = getattr(inner, "jaxpr", inner)
                self.calls[id(eqn)] = inner
                for outer, var in zip(eqn.invars, j.invars):
                    self.links[id(var)] = outer
                for var, c in zip(j.constvars, getattr(inner, "consts", ())):
                    self.env[id(var)] = c
                self._index(j)

    def value(self, var):
        if hasattr(var, "val"):  # a literal
            return var.val
        key = id(var)
        if key in self.env:
            return self.env[key]
        if key in self.links:
            result = self.value(self.links[key])
        elif key in self.defs:
            result = self._evaluate(*self.defs[key])
        else:
            result = _UNKNOWN
        self.env[key] = result
        return result

    def _evaluate(self, eqn, k: int):
        if id(eqn) in self.calls:
            inner = self.calls[id(eqn)]
            return self.value(getattr(inner, "jaxpr", inner).outvars[k])
        if eqn.primitive.name == "pallas_call" or any(_big(v) for v in eqn.outvars):
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


def _abstract(value) -> bool:
    import jax

    return isinstance(value, jax.ShapeDtypeStruct)


def _big(var) -> bool:
    shape = getattr(getattr(var, "aval", None), "shape", ())
    return int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS


def _leading_operands(eqn) -> int:
    gm = eqn.params["grid_mapping"]
    dynamic = sum(1 for d in gm.grid if not isinstance(d, (int, np.integer)))
    return dynamic + int(gm.num_index_operands)


def operand_values(closed_jaxpr, eqns: list, example_values: tuple | None) -> dict[int, list]:
    """{id(eqn): [numpy value or None for each operand]} for the pallas_call equations whose
    dynamic grid sizes or scalar-prefetch operands need values. Best effort: what cannot be
    evaluated (run-time data without example values, a failure) is None."""
    wanted = [e for e in eqns if _leading_operands(e)]
    if not wanted:
        return {}
    program = _Program(closed_jaxpr, example_values)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    out: dict[int, list] = {}
    try:
        for eqn in wanted:
            values = []
            for i, var in enumerate(eqn.invars):
                v = _UNKNOWN
                if i < _leading_operands(eqn):
                    try:
                        v = program.value(var)
                    except Exception:  # a primitive that cannot run eagerly here: unknown, not a crash
                        v = _UNKNOWN
                values.append(None if v is _UNKNOWN else np.asarray(v))
            out[id(eqn)] = values
    finally:
        sys.setrecursionlimit(limit)
    return out
