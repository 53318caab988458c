"""Which pallas_call outputs the rest of the program reads. An output nothing reads (kernels
that pass scratch buffers as outputs, as JAX's splash attention does for m, l and o) cannot
corrupt a result, so the grid walk does not hold it to the rules of real outputs."""
from __future__ import annotations

from .evaluate import called_jaxpr
from .tracing import sub_jaxprs


def live_outputs(closed_jaxpr) -> dict[int, list[bool]]:
    """{id(pallas_call eqn): [is output i read?]}. Conservative: inside loops and branches, and for
    equations with effects, everything counts as read; a jaxpr shared by call sites is live where
    any site reads it."""
    result: dict[int, list[bool]] = {}

    def visit(jaxpr, live_out: list[bool]) -> list[bool]:
        live = {id(v) for v, keep in zip(jaxpr.outvars, live_out) if keep and not hasattr(v, "val")}
        for eqn in reversed(jaxpr.eqns):
            outs = [id(v) in live for v in eqn.outvars]
            effectful = bool(getattr(eqn, "effects", None))
            if eqn.primitive.name in ("pallas_call", "mpmd_map"):  # a core_map has no outputs: its refs are
                before = result.get(id(eqn), [False] * len(outs))
                result[id(eqn)] = [a or b for a, b in zip(before, outs)]
                uses = [any(outs) or effectful] * len(eqn.invars)
            elif (called := called_jaxpr(eqn)) is not None:
                inner = visit(called[0], [True] * len(outs) if effectful else outs)
                uses = [effectful or u for u in inner]
            else:
                subs = list(sub_jaxprs(eqn.params))
                for sub in subs:
                    visit(sub, [True] * len(sub.outvars))
                uses = [any(outs) or effectful or bool(subs)] * len(eqn.invars)
            live |= {id(v) for v, used in zip(eqn.invars, uses) if used and not hasattr(v, "val")}
        return [id(v) in live for v in jaxpr.invars]

    visit(closed_jaxpr.jaxpr, [True] * len(closed_jaxpr.jaxpr.outvars))
    return result
