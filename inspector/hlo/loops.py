"""How many times a while loop runs. XLA:CPU writes it on the loop (backend_config
known_trip_count); XLA:TPU (libtpu 0.0.42.1) does not, so we read the loop the way lax.scan and
fori_loop write it: a counter in the loop state that starts at a constant, grows by a constant
each trip, and is compared with a constant in the condition (``i < n``)."""
from __future__ import annotations

import math

from .module import Computation, HloModule, Instruction

_FORWARD = {"copy", "bitcast", "convert"}  # ops that pass the counter on unchanged


def trip_count(module: HloModule, loop: Instruction, caller: Computation) -> int | None:
    """The loop's trip count, or None when it cannot be read."""
    known = ((loop.backend_config or {}).get("known_trip_count") or {}).get("n")
    if known is not None:
        return int(known) if str(known).isdigit() else None
    cond = module.computations.get((loop.attr("condition") or "").lstrip("%"))
    body = module.computations.get((loop.attr("body") or "").lstrip("%"))
    if cond is None or body is None or not loop.operands:
        return None
    bound = _bound(cond)
    if bound is None:
        return None
    index, limit = bound
    start = _state_constant(caller, loop.operands[0], index)
    step = _step(body, index)
    if start is None or not step or step <= 0:
        return None
    return max(0, math.ceil((limit - start) / step))


def _root(comp: Computation) -> Instruction | None:
    return next((i for i in comp.instructions if i.is_root), None)


def _behind(name: str, by_name: dict[str, Instruction]) -> Instruction | None:
    instr = by_name.get(name)
    for _ in range(16):
        if instr is None or instr.opcode not in _FORWARD or not instr.operands:
            return instr
        instr = by_name.get(instr.operands[0])
    return instr


def _int(instr: Instruction | None) -> int | None:
    if instr is None or instr.opcode != "constant" or instr.literal is None:
        return None
    try:
        return int(instr.literal)
    except ValueError:
        return None


def _element(instr: Instruction | None) -> int | None:
    """i when ``instr`` is get-tuple-element(the computation's parameter), index=i."""
    if instr is None or instr.opcode != "get-tuple-element":
        return None
    index = instr.attr("index")
    return int(index) if index and index.isdigit() else None


def _bound(cond: Computation) -> tuple[int, int] | None:
    """(counter's place in the loop state, limit) of a condition ``counter < limit``."""
    root, by_name = _root(cond), cond.by_name()
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return None
    a, b = (_behind(o, by_name) for o in root.operands)
    direction = root.attr("direction")
    if direction == "GT":  # limit > counter
        a, b = b, a
    elif direction != "LT":
        return None
    index, limit = _element(a), _int(b)
    if a is None or index is None or limit is None or by_name.get(a.operands[0], a).opcode != "parameter":
        return None
    return index, limit


def _state_constant(caller: Computation, state: str, index: int) -> int | None:
    """The constant the loop's state starts with at ``index``."""
    by_name = caller.by_name()
    init = by_name.get(state)
    if init is None or init.opcode != "tuple" or index >= len(init.operands):
        return None
    return _int(_behind(init.operands[index], by_name))


def _step(body: Computation, index: int) -> int | None:
    """What the body adds to the counter each trip."""
    root, by_name = _root(body), body.by_name()
    if root is None or root.opcode != "tuple" or index >= len(root.operands):
        return None
    add = _behind(root.operands[index], by_name)
    if add is None or add.opcode != "add" or len(add.operands) != 2:
        return None
    x, y = (_behind(o, by_name) for o in add.operands)
    if _element(y) == index:
        x, y = y, x
    if _element(x) != index:
        return None
    return _int(y)
