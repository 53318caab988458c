"""One op of an optimized HLO module as a module of its own, as XLA compiled it: the op with its
layouts and backend config (a fusion's window_config, which decides its loops), its operands as
parameters, and the computations it calls. libtpu compiles such a module without changing the op
(libtpu/pjrt.py), so its simulation of the op alone is the op that ran.

An entry computation's parameters and result live in HBM; an operand or result the program kept
in another memory space (``S(1)``: VMEM) is copied there and back by ops of their own, so the op
reads and writes where it did in its program (a fusion of a small attention: 6,224 cycles in its
program and alone, 15,952 alone with its operands in HBM).
"""
from __future__ import annotations

import functools
import re

from .module import logical_lines

_COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.\-]+) \(.*?^\}$", re.S | re.M)
_CALLED = re.compile(r"\b(?:calls|to_apply|condition|body)=%([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_MEMORY_SPACE = re.compile(r"S\(\d+\)")
_STACK_FRAME = re.compile(r"\s*stack_frame_id=\d+")  # the module's frame table stays behind


class NotReplayable(Exception):
    """The op cannot be cut out of its module; ``str`` says why."""


def replay_module(hlo_text: str, op: str) -> str:
    """HLO text of a module whose entry runs ``op`` alone on parameters shaped as its operands."""
    computations = _computations(hlo_text)
    owner, line = _find(computations, op)
    shape, opcode, operands, attributes = _split(line, op)
    defined = _definitions(computations[owner])
    entry, args, params = [], [], []
    for i, name in enumerate(operands):
        if name not in defined:
            raise NotReplayable(f"{op}: operand %{name} is not defined in its computation")
        placed = _STACK_FRAME.sub("", defined[name])
        params.append(_in_hbm(placed))
        entry.append(f"  %replay.param.{i} = {params[-1]} parameter({i})")
        args.append(_moved(entry, f"replay.operand.{i}", f"%replay.param.{i}", params[-1], placed))
    placed = _STACK_FRAME.sub("", shape)
    entry.append(f"  %{op} = {placed} {opcode}({', '.join(args)})" + (f", {_STACK_FRAME.sub('', attributes)}" if attributes else ""))
    result = _in_hbm(placed)
    if placed == result:
        entry[-1] = "  ROOT " + entry[-1].lstrip()
    elif placed.startswith("("):  # each element back to HBM
        outs = []
        for j, element in enumerate(_elements(placed)):
            entry.append(f"  %replay.element.{j} = {element} get-tuple-element(%{op}), index={j}")
            outs.append(_moved(entry, f"replay.result.{j}", f"%replay.element.{j}", element, _in_hbm(element)))
        entry.append(f"  ROOT %replay.result = {result} tuple({', '.join(outs)})")
    else:
        entry.append(f"  ROOT %replay.result = {result} copy(%{op})")
    called = [_STACK_FRAME.sub("", computations[c]) for c in _called(computations, attributes)]
    layout = "{(" + ", ".join(params) + ")->" + result + "}"
    return "\n\n".join([f"HloModule replay, is_scheduled=true, entry_computation_layout={layout}", *called,
                        "ENTRY %main {\n" + "\n".join(entry) + "\n}"]) + "\n"


@functools.lru_cache(maxsize=2)
def _computations(hlo_text: str) -> dict[str, str]:
    """Computation name -> its text: split once per module, however many of its ops are cut out."""
    return {m.group(1): m.group(0) for m in _COMPUTATION.finditer(hlo_text)}


def _in_hbm(shape: str) -> str:
    return _MEMORY_SPACE.sub("", shape)


def _moved(entry: list[str], name: str, value: str, shape: str, wanted: str) -> str:
    """``value`` (of ``shape``) where ``wanted`` places it: itself, or a copy of its own (a copy's
    cycles are its own in the simulation, not the op's)."""
    if shape == wanted:
        return value
    entry.append(f"  %{name} = {wanted} copy({value})")
    return f"%{name}"


def _elements(shape: str) -> list[str]:
    """The top-level elements of a tuple shape."""
    elements, depth, current = [], 0, ""
    for ch in shape[1:-1]:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            elements.append(current.strip())
            current = ""
        else:
            current += ch
    return elements + [current.strip()] if current.strip() else elements


def _find(computations: dict[str, str], op: str) -> tuple[str, str]:
    pattern = re.compile(rf"\s+(?:ROOT )?%{re.escape(op)} = ")
    for name, text in computations.items():
        if f"%{op} = " in text:
            for line in logical_lines(text):
                if pattern.match(line):
                    return name, line.strip().removeprefix("ROOT ")
    raise NotReplayable(f"{op}: no such instruction in the module")


def _split(line: str, op: str) -> tuple[str, str, list[str], str]:
    """(result shape, opcode, operand names, the attributes after the operands) of one instruction."""
    rest = line.split(" = ", 1)[1]
    shape, rest = _balanced_prefix(rest)
    m = re.match(r"\s*([\w-]+)\(", rest)
    if m is None:
        raise NotReplayable(f"{op}: cannot read its opcode")
    opcode = m.group(1)
    inside, after = _balanced_prefix(rest[m.end() - 1:])
    operands = re.findall(r"%([\w.\-]+)", inside)
    return shape, opcode, operands, after.lstrip(", ").strip()


def _balanced_prefix(text: str) -> tuple[str, str]:
    """The first token of ``text`` with its brackets balanced (a shape, a parenthesized list), and the rest."""
    text = text.lstrip()
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if depth == 0 and (ch == " " or (ch == ")" and text[0] == "(")):
            end = i + 1 if ch == ")" else i
            return text[:end], text[end:]
    return text, ""


def _definitions(computation: str) -> dict[str, str]:
    """Instruction name -> its result shape, in one computation."""
    found = {}
    for line in list(logical_lines(computation))[1:]:
        m = re.match(r"\s+(?:ROOT )?%([\w.\-]+) = (.*)$", line)
        if m:
            found[m.group(1)] = _balanced_prefix(m.group(2))[0]
    return found


def _called(computations: dict[str, str], attributes: str) -> list[str]:
    """The computations ``attributes`` call, and theirs, callees first."""
    order: list[str] = []

    def visit(text: str) -> None:
        names = _CALLED.findall(text) + [n.strip().lstrip("%") for b in _BRANCHES.findall(text) for n in b.split(",")]
        for name in names:
            if name in order or name not in computations:
                continue
            visit(computations[name])
            order.append(name)

    visit(attributes)
    return order

