"""Which kernel operands the program computes before the kernel, and which it passes through from
its own arguments. XLA can write a computed operand straight into VMEM (its producer's output in
`S(1)`), or copy any operand there while other work runs before the kernel; an argument handed to
a kernel that starts the program gets no such window (measured with libtpu 0.0.42.1 on v5e: a
16 MiB input in two (512, 8192) blocks stays in HBM when it is an argument, and comes in `S(1)`
when a fusion makes it or when the copy of an aliased argument runs first). The same holds after
the kernel: an output a fusion reads next can be written into VMEM whole (fused recurrent GLA's
16 MiB output, transposed and summed after the kernel, came back in `S(1)` on v5e; returned from
the program, or read by no op, it stays in HBM)."""
from __future__ import annotations

import math

from .evaluate import KERNEL_PRIMITIVES, called_jaxpr
from .tpu_layout import copied_for_a_kernel, row_major_signature, signature_of, tiled_signature
from .tracing import sub_jaxprs

# equations XLA turns into no work on the operand's buffer: a reshape that keeps the two minor
# dimensions (the (8, 128) tiles stay as they are), a conversion to the same dtype, and what XLA's
# simplifier turns into a bitcast: a transpose of dimensions of size 1 (fused recurrent GLA's one
# head: (1, T, 1, 128) to (1, 1, T, 128)), a sum over them, adding them, a pad by nothing
_VIEWS = ("reshape", "squeeze", "expand_dims", "convert_element_type")


def _is_view(eqn) -> bool:
    name = eqn.primitive.name
    shape = getattr(getattr(eqn.invars[0], "aval", None), "shape", None) if eqn.invars else None
    if name == "pad" and shape is not None:  # padding by nothing: XLA's simplifier removes it
        return all(lo == hi == inner == 0 for lo, hi, inner in eqn.params.get("padding_config", ((1, 1, 1),)))
    if name in ("reduce_sum", "reduce_max", "reduce_min") and shape is not None:  # over dims of size 1
        return all(shape[a] == 1 for a in eqn.params.get("axes", (0,)))
    if name == "broadcast_in_dim" and shape is not None:  # adding dims of size 1 only (x[None])
        return math.prod(shape) == math.prod(eqn.outvars[0].aval.shape)
    if name == "transpose":  # one that moves only dims of size 1 is a bitcast in XLA
        perm = eqn.params.get("permutation")
        if shape is None or perm is None:
            return False
        moved = [d for d in perm if shape[d] != 1]
        return moved == sorted(moved) and tuple(shape[-1:]) == tuple(shape[d] for d in perm[-1:])
    if name not in _VIEWS or not eqn.invars:
        return False
    src, dst = getattr(eqn.invars[0], "aval", None), getattr(eqn.outvars[0], "aval", None)
    if src is None or dst is None or getattr(src, "dtype", None) != getattr(dst, "dtype", None):
        return False
    if name != "reshape" or tuple(src.shape[-2:]) == tuple(dst.shape[-2:]):
        return True
    bits = 8 * getattr(src.dtype, "itemsize", 4)  # rows split or merged in whole tiles (tpu_layout.tiled_signature)
    return tiled_signature(row_major_signature(tuple(src.shape)), bits) == \
        tiled_signature(row_major_signature(tuple(dst.shape)), bits)


def operands_made_by_ops(closed_jaxpr) -> dict[int, list[bool]]:
    """{id(kernel eqn): [is operand i computed by the program before the kernel?]}. An argument of
    the program or a constant, reached through views and calls only, is not, unless XLA copies it
    out of its default TPU layout first (tpu_layout.py); anything inside a loop or branch is
    (conservatively: the question is whether XLA may place it in VMEM)."""
    result: dict[int, list[bool]] = {}

    # per value: True (an op made it), False, or an argument's layout signature (tpu_layout.py)
    def visit(jaxpr, made: list) -> list:
        state = {id(v): m for v, m in zip(jaxpr.invars, made)}

        def of(v):
            return False if hasattr(v, "val") else state.get(id(v), False)

        for eqn in jaxpr.eqns:
            ins = [of(v) for v in eqn.invars]
            if eqn.primitive.name in KERNEL_PRIMITIVES:
                here = [m is True or copied_for_a_kernel(m, v.aval) for m, v in zip(ins, eqn.invars)]
                result[id(eqn)] = [a or b for a, b in zip(result.get(id(eqn), here), here)]  # any call site
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

    visit(closed_jaxpr.jaxpr, [signature_of(v.aval) for v in closed_jaxpr.jaxpr.invars])
    return result


def outputs_read_by_ops(closed_jaxpr) -> dict[int, list[bool]]:
    """{id(kernel eqn): [does an op of the program read output i after the kernel?]}. An output
    the program returns, through views and calls only, is not read, unless XLA copies it into its
    default TPU layout after the kernel; one used inside a loop or branch, or by another kernel, is
    (conservatively, as above)."""
    result: dict[int, list[bool]] = {}

    # per value: True (an op reads it), False, or a result's layout signature (tpu_layout.py)
    def visit(jaxpr, outs_read: list) -> list:
        read: dict[int, object] = {}

        def mark(v, r) -> None:
            if not hasattr(v, "val"):
                before = read.get(id(v), False)
                read[id(v)] = True if True in (before, r) else before or r

        for v, r in zip(jaxpr.outvars, outs_read):
            mark(v, r)
        for eqn in reversed(jaxpr.eqns):
            outs = [read.get(id(v), False) for v in eqn.outvars]
            if eqn.primitive.name in KERNEL_PRIMITIVES:
                here = [r is True or copied_for_a_kernel(r, v.aval) for r, v in zip(outs, eqn.outvars)]
                result[id(eqn)] = [a or b for a, b in zip(result.get(id(eqn), here), here)]  # any call site
                ins: list = [True] * len(eqn.invars)
            elif _is_view(eqn):
                ins = [outs[0]]
            elif (called := called_jaxpr(eqn)) is not None:
                ins = visit(called[0], outs)
            else:
                for sub in sub_jaxprs(eqn.params):
                    visit(sub, [True] * len(sub.outvars))
                ins = [True] * len(eqn.invars)
            for v, r in zip(eqn.invars, ins):
                mark(v, r)
        return [read.get(id(v), False) for v in jaxpr.invars]

    visit(closed_jaxpr.jaxpr, [signature_of(getattr(v, "aval", None)) for v in closed_jaxpr.jaxpr.outvars])
    return result


def kernels_in_control_flow(closed_jaxpr) -> set[int]:
    """id(kernel eqn) of kernels reached only inside a loop, a branch or a map (shard_map): their
    operands' origins above are assumed, not followed (a kernel in a lax.cond branch, or given its
    shard whole by shard_map, kept its blocks in the scoped limit on v5e)."""
    inside: set[int] = set()
    outside: set[int] = set()

    def visit(jaxpr, nested: bool) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in KERNEL_PRIMITIVES:
                (inside if nested else outside).add(id(eqn))
            elif (called := called_jaxpr(eqn)) is not None:
                visit(called[0], nested)
            else:
                for sub in sub_jaxprs(eqn.params):
                    visit(sub, True)

    visit(closed_jaxpr.jaxpr, False)
    return inside - outside

