"""A parser for optimized HLO text: computations, instructions, shapes with layouts, and the
stack-frame table that maps each op to a source line.

We read the text (not jaxlib's private HloModule bindings, which have no shape accessors): it is
what XLA prints for every backend, and what users paste into bug reports.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import re

from ..base.user_code import short_path

# Bits per element; sub-byte types are packed.
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16,
         "s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128,
         "f8e4m3fn": 8, "f8e5m2": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8, "f8e4m3fnuz": 8, "token": 0}

_ARRAY = re.compile(r"([a-z0-9]+)\[([\d,]*)\](?:\{([^}]*)\})?")
_TILE = re.compile(r"T\(([\d,]*)\)")
_MEMSPACE = re.compile(r"S\((\d+)\)")


@dataclasses.dataclass(frozen=True)
class ArrayShape:
    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None = None
    tile: tuple[int, ...] | None = None  # the first (outer) tile of a TPU layout, e.g. (8, 128)
    memory_space: int = 0  # S(n): 0 is HBM (device memory), 1 is VMEM on TPU

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def logical_bytes(self) -> int:
        return math.ceil(self.elements * _BITS.get(self.dtype, 32) / 8)

    @property
    def bytes(self) -> int:
        """Bytes in memory: the most-minor dims padded up to the layout's tile (TPU (8,128) tiles)."""
        if not self.tile or not self.dims:
            return self.logical_bytes
        order = list(reversed(self.minor_to_major)) if self.minor_to_major else list(range(len(self.dims)))
        physical = [self.dims[i] for i in order]  # major to minor
        k = min(len(self.tile), len(physical))
        for j in range(1, k + 1):
            t = self.tile[-j]
            physical[-j] = math.ceil(physical[-j] / t) * t if t else physical[-j]
        return math.ceil(math.prod(physical) * _BITS.get(self.dtype, 32) / 8)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@functools.lru_cache(maxsize=8192)
def parse_shape(text: str) -> tuple[ArrayShape, ...]:
    """All arrays in a shape (a tuple shape gives several). Programs repeat a few shapes many
    times, so results are cached."""
    found = []
    for m in _ARRAY.finditer(text):
        dtype, dims, layout = m[1], m[2], m[3]
        if dtype not in _BITS:
            continue
        m2m, tile, space = None, None, 0
        if layout:
            order, _, rest = layout.partition(":")
            m2m = tuple(int(x) for x in order.split(",") if x.strip().isdigit()) or None
            t = _TILE.search(rest)
            tile = tuple(int(x) for x in t[1].split(",") if x) if t else None
            s = _MEMSPACE.search(rest)
            space = int(s[1]) if s else 0
        found.append(ArrayShape(dtype, tuple(int(d) for d in dims.split(",") if d), m2m, tile, space))
    return tuple(found)


@functools.cache
def _attr_pattern(key: str) -> re.Pattern:
    return re.compile(rf"(?:^|, ){re.escape(key)}=(\"[^\"]*\"|\{{[^}}]*\}}|[^,\s]+)")


@dataclasses.dataclass
class Instruction:
    name: str
    shape_text: str
    opcode: str
    operands: list[str]
    attrs: str  # everything after the operand list
    is_root: bool = False
    shapes: tuple[ArrayShape, ...] = ()
    op_name: str | None = None
    stack_frame_id: int | None = None
    parameter_number: int | None = None  # N of parameter(N): which operand of the caller it is
    literal: str | None = None  # a scalar constant's value, as written: constant(8)

    def __post_init__(self):
        # Read once here: plain fields are far cheaper than cached properties on 100k-line modules.
        self.shapes = parse_shape(self.shape_text)
        start = self.attrs.find("metadata={")
        while start > 0 and (self.attrs[start - 1].isalnum() or self.attrs[start - 1] == "_"):
            start = self.attrs.find("metadata={", start + 1)  # skip kernel_metadata={} and friends
        if start >= 0:  # string search, not regex: this runs for every instruction
            block = self.attrs[start + 10:self.attrs.find("}", start)]
            name = block.find('op_name="')
            if name >= 0:
                self.op_name = block[name + 9:block.find('"', name + 9)]
            frame = block.find("stack_frame_id=")
            if frame >= 0:
                digits = re.match(r"\d+", block[frame + 15:])
                self.stack_frame_id = int(digits[0]) if digits else None

    def attr(self, key: str) -> str | None:
        """A simple attribute value: kind=kLoop, calls=%x, custom_call_target="..."."""
        m = _attr_pattern(key).search(self.attrs)
        if not m:
            return None
        v = m[1]
        return v[1:-1] if v.startswith('"') else v

    @functools.cached_property
    def calls(self) -> list[str]:  # few instructions call computations: computed on first use
        names = []
        for key in ("calls", "to_apply", "body", "condition", "branch_computations", "true_computation", "false_computation"):
            v = self.attr(key)
            if v:
                names += [n.strip().lstrip("%") for n in v.strip("{}").split(",") if n.strip()]
        return names

    @functools.cached_property
    def backend_config(self) -> dict | None:
        block = _braced(self.attrs, "backend_config=")
        if block is None:
            return None
        try:
            return json.loads(block)
        except ValueError:
            return None


def _braced(text: str, key: str) -> str | None:
    """The {...} value after ``key``, braces balanced."""
    i = text.find(key)
    if i < 0 or i + len(key) >= len(text) or text[i + len(key)] != "{":
        return None
    start = i + len(key)
    depth = 0
    in_str = False
    for j in range(start, len(text)):
        ch = text[j]
        if in_str:
            if ch == "\\":
                continue
            if ch == '"' and text[j - 1] != "\\":
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:j + 1]
    return None


@dataclasses.dataclass
class Computation:
    name: str
    instructions: list[Instruction]
    is_entry: bool = False

    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}


@dataclasses.dataclass(frozen=True)
class Frame:
    """One Python frame of the stack jax records for an op: where the call (or the op) is."""

    file: str  # as short_path writes it
    line: int
    function: str  # e.g. block, train_step.<locals>.<lambda>

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.function}"


@dataclasses.dataclass
class HloModule:
    name: str
    computations: dict[str, Computation]
    entry: str
    frames: dict[int, str]  # stack_frame_id -> "file:line" of the innermost frame
    stacks: dict[int, tuple[Frame, ...]] = dataclasses.field(default_factory=dict)  # stack_frame_id -> its frames, outermost first

    @property
    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    def source(self, instr: Instruction) -> str | None:
        return self.frames.get(instr.stack_frame_id) if instr.stack_frame_id is not None else None

    def stack(self, instr: Instruction) -> tuple[Frame, ...]:
        return self.stacks.get(instr.stack_frame_id, ()) if instr.stack_frame_id is not None else ()


_COMP_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\)\s+->\s+.*\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def split_instruction(line: str) -> Instruction | None:
    """One instruction line of HLO text, or None for any other line."""
    m = _INSTR.match(line)
    if not m:
        return None
    rest = line[m.end():]
    # shape: a tuple in balanced parens, or one token
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):  # noqa: B007 (i is where the tuple ends, read after the loop)
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        shape, rest = rest[:i + 1], rest[i + 1:].lstrip()
    else:
        shape, _, rest = rest.partition(" ")
    opcode, paren, rest = rest.partition("(")
    if not paren:
        return None
    close = rest.find(")")
    if "(" in rest[:close]:  # nested parentheses in the operand list: match them properly
        depth, close = 1, 0
        while close < len(rest) and depth:
            depth += rest[close] == "("
            depth -= rest[close] == ")"
            close += 1
        close -= 1
    operand_text, attrs = rest[:close], rest[close + 1:].lstrip(", ")
    operands = re.findall(r"%([\w.\-]+)", operand_text)
    instr = Instruction(m[2], shape, opcode.strip(), operands, attrs, is_root=bool(m[1]))
    if instr.opcode == "parameter" and operand_text.strip().isdigit():
        instr.parameter_number = int(operand_text)
    elif instr.opcode == "constant" and len(operand_text) < 40 and "{" not in operand_text:
        instr.literal = operand_text.strip()
    return instr


def _frames(text: str) -> tuple[dict[int, str], dict[int, tuple[Frame, ...]]]:
    """The FileNames / FunctionNames / FileLocations / StackFrames tables jax adds to the module:
    each stack frame's innermost file:line, and its whole stack (outermost first). XLA prints a
    frame's parent as the parent's id plus one (0: none), as its own parser test spells it."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = line
            sections[current] = []
        elif not line.strip() or line.startswith(("%", "ENTRY", "HloModule")):
            current = None if not line.strip() or line.startswith(("%", "ENTRY")) else current
        elif current:
            sections[current].append(line)
    files = {int(k): v.strip('"') for k, v in (l.split(" ", 1) for l in sections.get("FileNames", []))}
    functions = {int(k): v.strip('"') for k, v in (l.split(" ", 1) for l in sections.get("FunctionNames", []))}
    locations: dict[int, Frame] = {}
    for line in sections.get("FileLocations", []):
        k, body = line.split(" ", 1)
        f = re.search(r"file_name_id=(\d+)", body)
        ln = re.search(r"\bline=(\d+)", body)
        fn = re.search(r"function_name_id=(\d+)", body)
        if f and ln:
            locations[int(k)] = Frame(short_path(files.get(int(f[1]), "?")), int(ln[1]),
                                      functions.get(int(fn[1]), "?") if fn else "?")
    links: dict[int, tuple[Frame, int]] = {}
    for line in sections.get("StackFrames", []):
        k, body = line.split(" ", 1)
        loc = re.search(r"file_location_id=(\d+)", body)
        parent = re.search(r"parent_frame_id=(\d+)", body)
        if loc and int(loc[1]) in locations:
            links[int(k)] = (locations[int(loc[1])], int(parent[1]) - 1 if parent else 0)
    stacks: dict[int, tuple[Frame, ...]] = {}

    def stack(frame_id: int) -> tuple[Frame, ...]:
        chain, seen, at = [], set(), frame_id
        while at in links and at not in seen and at not in stacks:
            seen.add(at)
            chain.append(at)
            at = links[at][1]
        tail = stacks.get(at, ())
        for i in reversed(chain):  # outermost first: each frame's stack is its parent's plus itself
            tail = stacks[i] = tail + (links[i][0],)
        return stacks[frame_id]

    for frame_id in links:
        stack(frame_id)
    return {k: f"{fr.file}:{fr.line}" for k, (fr, _) in links.items()}, stacks


def entry_is_whole(text: str) -> bool:
    """Whether ``text`` has an ENTRY computation that ``parse_hlo`` reads, with a ROOT and its
    closing brace: a cheap check of a stored HLO text (a few string searches, not a parse)."""
    start = text.find("\nENTRY ")
    if start < 0:
        return False
    header_end = text.find("\n", start + 1)
    if header_end < 0 or not _COMP_HEADER.match(text[start + 1:header_end]):
        return False
    close = _COMP_CLOSE.search(text, header_end)
    return close is not None and text.find("ROOT ", header_end, close.start()) >= 0


# A computation ends at a line that is only its closing brace; an instruction's attributes may run
# over several lines (a Pallas kernel's kernel_metadata, its xprof_metadata on a line of its own and
# "}}, metadata=..." on the next), so a line starting with "}" need not end anything.
_COMP_CLOSE = re.compile(r"\n\}[ \t]*(?:\n|$)")


def _open_braces(line: str) -> int:
    """The braces ``line`` opens less those it closes, outside its quoted strings."""
    if line.count("{") == line.count("}"):  # nearly every line: the scan below is for the few that differ
        return 0
    depth, quoted, escaped = 0, False, False
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = quoted
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch == "{":
            depth += 1
        elif not quoted and ch == "}":
            depth -= 1
    return depth


def logical_lines(text: str):
    """HLO text's lines, an instruction whose attributes run over several lines joined into one."""
    pending, depth = "", 0
    for line in text.splitlines():
        if depth > 0:
            pending += line
            depth += _open_braces(line)
            if depth <= 0:
                yield pending
                pending, depth = "", 0
            continue
        depth = _open_braces(line) if line.startswith("  ") else 0
        if depth > 0:
            pending = line
        else:
            yield line
    if pending:
        yield pending


def parse_hlo(text: str) -> HloModule:
    name_m = re.match(r"HloModule\s+([\w.\-]+)", text)
    computations: dict[str, Computation] = {}
    entry = None
    current: Computation | None = None
    for line in logical_lines(text):
        if current is None:
            m = _COMP_HEADER.match(line)
            if m:
                current = Computation(m[2], [], is_entry=bool(m[1]))
                if m[1]:
                    entry = m[2]
            continue
        if line.rstrip() == "}":
            computations[current.name] = current
            current = None
            continue
        instr = split_instruction(line)
        if instr:
            current.instructions.append(instr)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    frames, stacks = _frames(text)
    return HloModule(name_m[1] if name_m else "module", computations, entry, frames, stacks)
