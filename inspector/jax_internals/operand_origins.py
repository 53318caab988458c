"""Which kernel operands the program computes before the kernel, and which it passes through from
its own arguments. XLA can write a computed operand straight into VMEM (its producer's output in
`S(1)`), or copy any operand there while other work runs before the kernel; an argument handed to
a kernel that starts the program gets no such window (measured with libtpu 0.0.42.1 on v5e: a
16 MiB input in two (512, 8192) blocks stays in HBM when it is an argument, and comes in `S(1)`
when a fusion makes it or when the copy of an aliased argument runs first)."""
from __future__ import annotations

from .evaluate import KERNEL_PRIMITIVES, called_jaxpr
from .tracing import sub_jaxprs

# equations XLA turns into no work on the operand's buffer: a reshape that keeps the two minor
# dimensions (the (8, 128) tiles stay as they are) and a conversion to the same dtype
_VIEWS = ("reshape", "squeeze", "expand_dims", "convert_element_type")


def _is_view(eqn) -> bool:
    name = eqn.primitive.name
    if name not in _VIEWS or not eqn.invars:
        return False
    src, dst = getattr(eqn.invars[0], "aval", None), getattr(eqn.outvars[0], "aval", None)
    if src is None or dst is None or getattr(src, "dtype", None) != getattr(dst, "dtype", None):
        return False
    return tuple(src.shape[-2:]) == tuple(dst.shape[-2:]) or name != "reshape"


def operands_made_by_ops(closed_jaxpr) -> dict[int, list[bool]]:
    """{id(kernel eqn): [is operand i computed by the program before the kernel?]}. An argument of
    the program or a constant, reached through views and calls only, is not; anything inside a
    loop or branch is (conservatively: the question is whether XLA may place it in VMEM)."""
    result: dict[int, list[bool]] = {}

    def visit(jaxpr, made: list[bool]) -> list[bool]:
        state = {id(v): m for v, m in zip(jaxpr.invars, made)}

        def of(v) -> bool:
            return False if hasattr(v, "val") else state.get(id(v), False)

        for eqn in jaxpr.eqns:
            ins = [of(v) for v in eqn.invars]
            if eqn.primitive.name in KERNEL_PRIMITIVES:
                result[id(eqn)] = [a or b for a, b in zip(result.get(id(eqn), ins), ins)]  # any call site
                outs = [True] * len(eqn.outvars)
            elif _is_view(eqn):
                outs = [ins[0]]
            elif (called := called_jaxpr(eqn)) is not None:
                outs = visit(called[0], ins)
            else:
                for sub in sub_jaxprs(eqn.params):
                    visit(sub, [True] * len(sub.invars))
                outs = [True] * len(eqn.outvars)
            state.update((id(v), m) for v, m in zip(eqn.outvars, outs))
        return [of(v) for v in jaxpr.outvars]

    visit(closed_jaxpr.jaxpr, [False] * len(closed_jaxpr.jaxpr.invars))
    return result
