"""Which block dimensions of a kernel's inputs reach its outputs straight: element i along the
input's dimension only ever lands at element i along one output dimension (elementwise math,
broadcasts, transposes, reductions and matmuls over other dimensions). Padding read past an
array's edge along such a dimension only reaches output elements past the output's edge, which
Pallas drops; along any other dimension it can reach real results.

A conservative walk of the kernel's top-level equations (and of jitted helpers): anything it does
not model (control flow, scratch, partial or dynamic slices, reshapes beyond adding or dropping
dims of size 1) taking a value derived from the input makes it give up on that input dimension.
"""
from __future__ import annotations

from typing import Any

_ELEMENTWISE = {
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "neg", "abs", "sign", "floor", "ceil", "round",
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "cbrt", "erf",
    "integer_pow", "square", "reciprocal", "convert_element_type", "select_n", "clamp", "eq", "ne", "lt", "le",
    "gt", "ge", "and", "or", "not", "xor", "is_finite", "nextafter", "atan2", "copy", "copy_p",
    "reduce_precision", "stop_gradient",
}
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin"}


class _GiveUp(Exception):
    pass


def _full_access(eqn, ref, value) -> bool:
    """A get/swap of the whole ref, no index operands: ``x_ref[...]``."""
    return len([v for v in eqn.invars if v is not ref and v is not value]) == 0 and \
        tuple(getattr(value.aval, "shape", ())) == tuple(getattr(ref.aval, "shape", ()))


def _out_axis(eqn, tags: list) -> int:
    """The output axis the tracked axis lands on, for one equation whose inputs carry ``tags``
    (None: not derived from the input; an int: the axis it lies along)."""
    p, params = eqn.primitive.name, eqn.params
    tracked = [(v, t) for v, t in zip(eqn.invars, tags) if t is not None]
    out_shape = tuple(getattr(eqn.outvars[0].aval, "shape", ()))
    if p in _ELEMENTWISE:
        # operands of the output's rank may broadcast dims of size 1, but not the tracked one:
        # a single row broadcast over all of them would mix
        axes = {t for _, t in tracked}
        if len(axes) != 1 or any(len(v.aval.shape) != len(out_shape) or v.aval.shape[t] != out_shape[t]
                                 for v, t in tracked):
            raise _GiveUp
        return axes.pop()
    if p == "dot_general":
        return _dot_axis(eqn, tags)
    if len(tracked) != 1:
        raise _GiveUp
    v, a = tracked[0]
    if p == "broadcast_in_dim":
        b = params["broadcast_dimensions"][a]
        if v.aval.shape[a] != out_shape[b]:
            raise _GiveUp
        return b
    if p == "transpose":
        return list(params["permutation"]).index(a)
    if p in _REDUCTIONS:
        axes = params["axes"]
        if a in axes:
            raise _GiveUp
        return a - sum(1 for x in axes if x < a)
    if p == "reshape" and params.get("dimensions") is None:
        return _reshaped_axis(tuple(v.aval.shape), out_shape, a)
    if p == "squeeze":
        dims = params["dimensions"]
        if a in dims:
            raise _GiveUp
        return a - sum(1 for x in dims if x < a)
    raise _GiveUp


def _reshaped_axis(before: tuple, after: tuple, a: int) -> int:
    """A reshape that only adds or drops dims of size 1 (keepdims, expand_dims) moves the axis."""
    kept = lambda shape: [(i, n) for i, n in enumerate(shape) if n != 1]
    if before[a] == 1 or [n for _, n in kept(before)] != [n for _, n in kept(after)]:
        raise _GiveUp
    rank = [i for i, _ in kept(before)].index(a)
    return kept(after)[rank][0]


def _dot_axis(eqn, tags: list) -> int:
    """dot_general's output is (batch dims, lhs free dims, rhs free dims): a contracted axis mixes."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars[:2]
    lhs_free = [d for d in range(len(lhs.aval.shape)) if d not in lc and d not in lb]
    rhs_free = [d for d in range(len(rhs.aval.shape)) if d not in rc and d not in rb]
    found = set()
    for side, tag in enumerate(tags[:2]):
        if tag is None:
            continue
        contract, batch, free = (lc, lb, lhs_free) if side == 0 else (rc, rb, rhs_free)
        if tag in contract:
            raise _GiveUp
        found.add(list(batch).index(tag) if tag in batch else
                  len(lb) + (free.index(tag) if side == 0 else len(lhs_free) + free.index(tag)))
    if len(found) != 1:
        raise _GiveUp
    return found.pop()


def straight_flows(kernel, first_ref: int, n_inputs: int, n_outputs: int, ref_dims: list[list[int]]) -> list[dict]:
    """For each input (kernel ref ``first_ref + i``), {array dim: [(output index, output array
    dim), ...]} for the dimensions whose elements only reach outputs straight. ``ref_dims[k]``
    lists operand k's array dimensions in the kernel ref's axis order (squeezed ones left out)."""
    refs = kernel.invars
    outputs = {id(refs[first_ref + n_inputs + o]): o for o in range(n_outputs)}
    found = []
    for i in range(n_inputs):
        flows: dict[int, list] = {}
        for axis, dim in enumerate(ref_dims[i]):
            try:
                reached = _follow(kernel, refs[first_ref + i], axis, outputs)
            except _GiveUp:
                continue
            flows[dim] = [(o, ref_dims[n_inputs + o][a]) for o, a in sorted(reached)]
        found.append(flows)
    return found


def _follow(kernel, ref, axis: int, outputs: dict) -> set:
    tags: dict[int, Any] = {id(ref): ("ref", axis)}  # a ref: ("ref", its axis); a value: the axis of its rows
    reached: set = set()
    for eqn in kernel.eqns:
        ins = [tags.get(id(v)) for v in eqn.invars]
        if all(t is None for t in ins):
            continue
        p = eqn.primitive.name
        if p == "get" and ins[0] is not None and all(t is None for t in ins[1:]):
            if not _full_access(eqn, eqn.invars[0], eqn.outvars[0]):
                raise _GiveUp
            tags[id(eqn.outvars[0])] = ins[0][1]
            continue
        if p == "swap" and len(eqn.invars) >= 2 and all(t is None for t in ins[2:]):
            target, value = eqn.invars[0], eqn.invars[1]
            if ins[1] is not None:
                if id(target) not in outputs or not _full_access(eqn, target, value) or ins[0] not in (None, ("ref", ins[1])):
                    raise _GiveUp
                reached.add((outputs[id(target)], ins[1]))
                tags[id(target)] = ("ref", ins[1])  # what is read back from it lies along the same axis
            elif id(target) not in outputs:
                raise _GiveUp  # a value written into the input's own ref
            if tags.get(id(target)):
                tags[id(eqn.outvars[0])] = tags[id(target)][1]  # the contents it swapped out
            continue
        if any(isinstance(t, tuple) for t in ins):
            raise _GiveUp  # a ref handed to anything else (a cond, a DMA, a scoped body)
        _values(eqn, ins, tags)
    if any(id(v) in tags for v in kernel.outvars):
        raise _GiveUp
    return reached


def _values(eqn, ins: list, tags: dict) -> None:
    """Tag the outputs of an equation on values (no refs); a jitted helper (jnp.where is one) is
    followed inside."""
    inner = eqn.params.get("jaxpr") if eqn.primitive.name in ("pjit", "jit", "closed_call") else None
    if inner is not None:
        inner = getattr(inner, "jaxpr", inner)
        scope = {id(v): t for v, t in zip(inner.invars, ins) if t is not None}
        for sub in inner.eqns:
            sub_ins = [scope.get(id(v)) for v in sub.invars]
            if any(t is not None for t in sub_ins):
                _values(sub, sub_ins, scope)
        for outer, v in zip(eqn.outvars, inner.outvars):
            if id(v) in scope:
                tags[id(outer)] = scope[id(v)]
        return
    if len(eqn.outvars) != 1:
        raise _GiveUp
    tags[id(eqn.outvars[0])] = _out_axis(eqn, ins)
