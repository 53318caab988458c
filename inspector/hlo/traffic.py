"""How many bytes a kernel really moves from and to each of its buffers, when that is less than
the whole buffer: a dynamic-slice reads only its slice, an in-place dynamic-update-slice reads
and writes only its update. Inside a while loop (lax.scan, fori_loop) these kernels touch one
layer of a stacked buffer per trip; counting the whole stack on every trip multiplies the
traffic by the trip count.

The rules are XLA's own (xla/service/hlo_cost_analysis.cc: HandleDynamicSlice,
HandleDynamicUpdateSlice, HandleSlice, HandleGather, and for fusions FusionParameterReadBytes and
FusionProcessOutputBytesAccessed), so a kernel's bytes agree with ``compiled.cost_analysis()``.
Where we part from XLA we say why below: inside a fusion XLA counts a gathered operand whole,
which put GPT-2's embedding lookup's roofline 11x above the time the v5e took.
"""
from __future__ import annotations

from .module import Computation, HloModule, Instruction


def operand_reads(module: HloModule, instr: Instruction) -> dict[int, int]:
    """Bytes read of each operand (by position) that is not read whole; positions left out are."""
    op = instr.opcode
    if op == "fusion" and instr.calls and instr.calls[0] in module.computations:
        return _fusion_reads(module, module.computations[instr.calls[0]])
    out = instr.shapes[0].bytes if instr.shapes else 0
    if op in ("slice", "dynamic-slice"):
        # XLA counts the slice and, of the start indices, only the first (one scalar each).
        return {0: out} | {i: 0 for i in range(2, len(instr.operands))}
    if op == "dynamic-update-slice":
        # Operand 0 is the buffer updated in place: not read.
        return {0: 0} | {i: 0 for i in range(3, len(instr.operands))}
    if op == "gather":
        return {0: out}  # HandleGather: the gathered elements, as many as the result holds
    return {}


def result_writes(module: HloModule, instr: Instruction, operand_bytes: dict[str, int]) -> dict[int, int]:
    """Bytes written of each result (by position) that is not written whole: a dynamic-update-slice
    (a fusion's root, or an element of its root tuple) writes its update into the buffer in place.
    ``operand_bytes``: the size of each value of the calling computation, for a bare one."""
    if instr.opcode == "dynamic-update-slice":
        update = instr.operands[1] if len(instr.operands) > 1 else None
        return {0: operand_bytes[update]} if update in operand_bytes else {}
    if instr.opcode != "fusion" or not instr.calls or instr.calls[0] not in module.computations:
        return {}
    comp = module.computations[instr.calls[0]]
    by_name = comp.by_name()
    root = next((i for i in comp.instructions if i.is_root), None)
    if root is None:
        return {}
    roots = [by_name.get(o) for o in root.operands] if root.opcode == "tuple" else [root]
    writes = {}
    for n, r in enumerate(roots):
        if r is not None and r.opcode == "dynamic-update-slice" and len(r.operands) > 1:
            written = by_name.get(r.operands[1])
            if written is not None and written.shapes:
                writes[n] = written.shapes[0].bytes
    return writes


def _fusion_reads(module: HloModule, comp: Computation) -> dict[int, int]:
    users = _users(comp)
    reads = {}
    for p in comp.instructions:
        if p.opcode == "parameter" and p.parameter_number is not None and len(p.shapes) == 1:
            n = _parameter_read(module, comp, p, users)
            if n != p.shapes[0].bytes:
                reads[p.parameter_number] = n
    return reads


def _users(comp: Computation) -> dict[str, list[Instruction]]:
    users: dict[str, list[Instruction]] = {}
    for i in comp.instructions:
        for o in dict.fromkeys(i.operands):
            users.setdefault(o, []).append(i)
    return users


def _parameter_read(module: HloModule, comp: Computation, param: Instruction, users: dict, depth: int = 0) -> int:
    """What a fused parameter costs to read, after FusionParameterReadBytes: a slice or
    dynamic-slice of it reads the slice; as the buffer of a dynamic-update-slice it is not read;
    every other use shares one read of the whole, and a nested fusion reads what its own
    parameter reads. Where XLA counts more than one whole read (a read for each broadcast,
    reshape or nested fusion besides the shared one; slices summed past the whole) we count
    the buffer once: a kernel need not fetch its operand twice."""
    whole = param.shapes[0].bytes
    part = 0
    for user in users.get(param.name, []):
        op = user.opcode
        if op in ("slice", "dynamic-slice", "gather") and user.operands[0] == param.name:
            # a gather reads the elements it gathers (XLA counts the whole operand here, though
            # not for a gather alone): what it must read, and at most the whole, below
            part += user.shapes[0].bytes if user.shapes else 0
        elif op == "dynamic-update-slice" and user.operands[0] == param.name and param.name not in user.operands[1:]:
            pass  # the buffer it writes into in place
        elif op == "fusion" and depth < 8 and user.calls and user.calls[0] in module.computations:
            nested = module.computations[user.calls[0]]
            nested_users = _users(nested)
            for idx, o in enumerate(user.operands):
                p = next((i for i in nested.instructions if i.opcode == "parameter" and i.parameter_number == idx), None)
                if o == param.name and p is not None and len(p.shapes) == 1:
                    part += _parameter_read(module, nested, p, nested_users, depth + 1)
        else:
            return whole
    return min(part, whole)
