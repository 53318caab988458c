"""How many terms each output of a function sums: the longest contraction on its path.

A dot over K terms, a sum over K elements, a convolution over K taps: each is an accumulation
whose rounding error grows with K, and two programs that add in another order (a kernel's tiles
against XLA's loop) differ by about that error. Read from the jaxpr (jax.core's Jaxpr: equations,
their params and variables), nowhere else. Per output, the largest K met on any path from the
inputs (max, not product or sum: the errors of a chain of contractions are of the order of the
largest); loops count what their bodies contract, not the iterations (a ``fori_loop`` that
accumulates chunk by chunk is counted as one chunk).
"""
from __future__ import annotations

import dataclasses
import math

from .tracing import sub_jaxprs


@dataclasses.dataclass(frozen=True)
class Accumulation:
    terms: int  # K: the most terms summed on the way to this output (1: no accumulation)
    wide: bool  # some contraction on the way accumulates in float64 (else float32, as the MXU and XLA:CPU do for narrower floats)
    op: str  # the primitive that sums the most, e.g. "dot_general" ("" when none)


NONE = Accumulation(1, False, "")


def _join(*accs: Accumulation) -> Accumulation:
    best = max(accs, key=lambda a: a.terms, default=NONE)
    return dataclasses.replace(best, wide=any(a.wide for a in accs))


def _shape(var) -> tuple[int, ...]:
    return tuple(getattr(getattr(var, "aval", None), "shape", ()) or ())


def _wide(var) -> bool:
    return str(getattr(getattr(var, "aval", None), "dtype", "")) in ("float64", "complex128")


def _terms(eqn) -> int:
    """Terms one equation sums into each of its outputs (1: none)."""
    name, params = eqn.primitive.name, eqn.params
    try:
        if name in ("dot_general", "ragged_dot_general"):  # ragged_dot: jax.lax.ragged_dot, megablox's reference
            numbers = params["dimension_numbers"] if name == "dot_general" else \
                params["ragged_dot_dimension_numbers"].dot_dimension_numbers
            (lhs_contract, _), _ = numbers
            shape = _shape(eqn.invars[0])
            return math.prod(shape[d] for d in lhs_contract)
        if name in ("reduce_sum", "reduce_prod"):
            shape = _shape(eqn.invars[0])
            return math.prod(shape[a] for a in params["axes"])
        if name in ("cumsum", "cumprod", "cumlogsumexp"):
            return _shape(eqn.invars[0])[params["axis"]]
        if name == "conv_general_dilated":
            rhs = _shape(eqn.invars[1])
            out_feature_dim = params["dimension_numbers"].rhs_spec[0]
            return math.prod(rhs) // max(1, rhs[out_feature_dim])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return 1  # a params layout this jax does not have: count nothing rather than guess
    return 1


def _flow(jaxpr, inputs: list[Accumulation]) -> list[Accumulation]:
    env: dict = {}

    def read(v) -> Accumulation:
        return env.get(v, NONE) if not hasattr(v, "val") else NONE  # a Literal has .val

    for v, acc in zip(jaxpr.invars, inputs):
        env[v] = acc
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        subs = list(sub_jaxprs(eqn.params))
        if len(subs) == 1 and len(subs[0].invars) == len(eqn.invars) and len(subs[0].outvars) == len(eqn.outvars):
            outs = _flow(subs[0], ins)  # jit, custom_jvp/vjp, remat: a call, input for input
        else:
            here = _terms(eqn)
            acc = _join(*ins, Accumulation(here, any(_wide(v) for v in eqn.outvars), eqn.primitive.name)
                        if here > 1 else NONE)
            for sub in subs:  # loops and branches: whatever their bodies contract reaches every output
                acc = _join(acc, *_flow(sub, [acc] * len(sub.invars)))
            outs = [acc] * len(eqn.outvars)
        for v, a in zip(eqn.outvars, outs):
            env[v] = a
    return [read(v) for v in jaxpr.outvars]


def accumulations(closed_jaxpr) -> list[Accumulation]:
    """One Accumulation per flat output of ``closed_jaxpr`` (jax.make_jaxpr's result)."""
    jaxpr = closed_jaxpr.jaxpr
    return _flow(jaxpr, [NONE] * len(jaxpr.invars))
