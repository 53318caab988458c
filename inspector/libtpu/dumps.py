"""Read libtpu's dump files: the one place that knows their (undocumented) formats.

Measured with libtpu 0.0.42.1 (samples of each file in tests/data/libtpu/, read by tests/test_libtpu_dumps.py):

- ``<hlo op>_static_llo_profile.textproto``: a text proto ``hlo_op_estimate { hlo_op_name: "..."
  estimated_cycles: N ... }`` per HLO op, written by ``--xla_jf_dump_static_llo_profile_to``.
- ``<id>-<hlo op>-NN-final_bundles.txt`` (``--xla_jf_dump_to`` with ``--xla_jf_dump_llo_text``):
  a legend, then one bundle per line (a DMA's comment may run over several lines):
  ``  0x96 PF: > { %v1 = vld [...] /* loc("k.py":25:28 to :38) */  ;;  %v2 = vor.u32 ... }``:
  the address, a control marker (LB loop body, PF predicated fallthrough, ...), one ``>`` per
  enclosing loop, then the instructions separated by ``;;``.
- ``<id>-<hlo op>-NN-final_hlo-static-per-bundle-utilization.txt``: ``== CAPACTIY:`` (sic), the
  unit names, their slots per bundle, ``== UTILIZATION:``, then one row of slots used per bundle,
  in the order of the bundles file.

Every reader checks the shape it expects and raises ``UnreadableDump`` (the message says what
it found instead) rather than guess: an unread figure is shown as missing, never as a wrong one.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re

PROFILE_SUFFIX = "_static_llo_profile.textproto"
BUNDLES_LABEL = "final_bundles"
UTILIZATION_LABEL = "final_hlo-static-per-bundle-utilization"
# the LLO passes whose text libtpu should write (--xla_jf_dump_llo_pass_label_regex): the rest are
# ~300 files and tens of MB per program that nothing here reads
DUMP_LABELS = f"{BUNDLES_LABEL}|{UTILIZATION_LABEL}"
PROGRAM_PARTS = ("TLP", "<late-initialization>", "<late-finalization>")  # libtpu's own glue, not kernels


class UnreadableDump(Exception):
    """A dump file in a format this reader does not know; ``str`` says which file and why."""


# ----------------------------------------------------------------------------- static profile

_ESTIMATE = re.compile(r"hlo_op_estimate\s*\{(.*?)\}", re.S)
_FIELD = re.compile(r'^\s*(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|\S+)\s*$', re.M)


def read_profile(text: str, where: str = "profile") -> dict[str, int]:
    """HLO op name -> estimated cycles, from one static LLO profile file."""
    found: dict[str, int] = {}
    for block in _ESTIMATE.findall(text):
        fields = {k: v for k, v in _FIELD.findall(block)}
        name, cycles = fields.get("hlo_op_name"), fields.get("estimated_cycles")
        if name is None or cycles is None or not cycles.isdigit():
            raise UnreadableDump(f"{where}: an hlo_op_estimate without hlo_op_name and a whole estimated_cycles "
                                 f"(fields: {', '.join(sorted(fields)) or 'none'})")
        found[name.strip('"')] = int(cycles)
    if not found:
        raise UnreadableDump(f"{where}: no hlo_op_estimate block (starts {text[:60]!r})")
    return found


def read_profiles(folder: str) -> tuple[dict[str, int], list[str]]:
    """Every profile in ``folder``: (op -> cycles, the problems of files that could not be read)."""
    cycles: dict[str, int] = {}
    problems: list[str] = []
    for name in sorted(_listing(folder)):
        if not name.endswith(PROFILE_SUFFIX):
            continue
        try:
            cycles.update(read_profile(_read(os.path.join(folder, name)), name))
        except (UnreadableDump, OSError, UnicodeDecodeError) as err:
            problems.append(str(err))
    return cycles, problems


# ----------------------------------------------------------------------------- LLO text dumps

_LLO_FILE = re.compile(r"^\d+-(?P<op>.+)-(?P<pass>\d+)-(?P<label>[\w.-]+)\.txt$")


def llo_files(folder: str) -> dict[str, dict[str, str]]:
    """HLO op -> {label: path} for the final bundles and utilization files in ``folder``; libtpu's
    own program parts (the top-level program, its initialization and finalization) left out."""
    found: dict[str, dict[str, str]] = {}
    for name in _listing(folder):
        match = _LLO_FILE.match(name)
        if not match or match["label"] not in (BUNDLES_LABEL, UTILIZATION_LABEL) or match["op"] in PROGRAM_PARTS:
            continue
        found.setdefault(match["op"], {})[match["label"]] = os.path.join(folder, name)
    return found


@dataclasses.dataclass
class Instruction:
    result: str | None  # "%v1721_v1"
    opcode: str  # "vld", "vmatmul.bf16.gmra.mxu0"
    source: str | None  # "path/to/kernel.py:25" from the Mosaic source annotation
    spill: str | None = None  # "store" | "fill": a vector spill to or fill from a spill slot
    slot: str | None = None  # the spill slot ("#allocation8_spill")
    stored: str | None = None  # a store's value ("%v327502_v21")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Branch:
    """A bundle's ``sbr.rel``: where it jumps, and whether a predicate decides it."""

    target: int  # the region it jumps to (``target = $regionN``)
    predicated: bool  # ``sbr.rel (%p...)`` or ``(!%p...)``: taken only when the predicate says so
    predicate: str | None = None  # the predicate register (``%p569_p6``), without its ``!``


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bundle:
    index: int
    depth: int  # enclosing loops (the ">" marks); an empty bundle (a branch's delay slot) takes its predecessor's
    marker: str  # LB | LH | LE | PB | PF | CT | ""
    instructions: list[Instruction]
    regions: tuple[int, ...] = ()  # the regions that start at this bundle (a branch's target names one)
    branch: Branch | None = None
    exit_bound: int | None = None  # the constant a "loop exit test" in this bundle compares the loop's counter with
    compares: dict[str, int] = dataclasses.field(default_factory=dict)  # predicate register -> the constant it compares a counter with


_BUNDLE_START = re.compile(r"^\s*(0x[0-9a-f]+|\d+)\s+([A-Z]{2})?\s*:\s*(>*)\s*\{")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LOC = re.compile(r'loc\("(?P<file>[^"]+)":(?P<line>\d+)')
_INSTRUCTION = re.compile(r"^\s*(?:(?P<result>%[\w.]+)\s*=\s*)?(?P<opcode>[a-z_][\w.]*)")
_REGION_START = re.compile(r"Start(?:/End empty)? region (\d+)")
_BRANCH = re.compile(r"\bsbr\.rel\s*(\(!?(%[\w.]+)\))?[^;]*?target = \$region(\d+)")
_COMPARE = re.compile(r"(%p[\w.]*)\s*=\s*scmp\.\w+\.s32\.totalorder\s+%s[\w.]*,\s*(\d+)\b")
_EXIT_TEST = re.compile(r"scmp\.\w+(?:\.\w+)*\s+%[\w.]+,\s*(\d+)\s*/\*\s*loop exit test")
_SLOT = re.compile(r"\[(?:vmem|smem):\[(#allocation\d+_spill)")
_STORED = re.compile(r"/\*vst_source=\*/\s*(%[\w.]+)")


def read_bundles(text: str, where: str = "bundles", relative=lambda path: path) -> list[Bundle]:
    """The bundles of one final_bundles file, in order; ``relative`` shortens source paths."""
    if "control target key" not in text[:400]:
        raise UnreadableDump(f"{where}: no control target legend at the top (starts {text[:60]!r})")
    chunks: list[tuple[re.Match, list[str]]] = []
    for line in text.splitlines():
        start = _BUNDLE_START.match(line)
        if start:
            chunks.append((start, [line[start.end():]]))
        elif chunks:
            chunks[-1][1].append(line)
    if not chunks:
        raise UnreadableDump(f"{where}: no line looks like a bundle ('ADDR [MARK]: [>] {{ ... }}')")
    relative = functools.lru_cache(maxsize=None)(relative)  # a few files, named by tens of thousands of instructions
    bundles: list[Bundle] = []
    for number, (start, lines) in enumerate(chunks):
        address = int(start[1], 16) if start[1].startswith("0x") else int(start[1])
        if address != number:
            raise UnreadableDump(f"{where}: bundle {number} is numbered {start[1]}")
        text = "\n".join(lines)
        instructions = _instructions(text, relative)
        depth = len(start[3]) if instructions or not bundles else bundles[-1].depth  # a delay slot is where its branch is
        plain = _COMMENT.sub(" ", text)
        branch = _BRANCH.search(plain)
        bound = _EXIT_TEST.search(text)
        bundles.append(Bundle(index=number, depth=depth, marker=start[2] or "", instructions=instructions,
                              regions=tuple(int(r) for r in _REGION_START.findall(text)),
                              branch=Branch(target=int(branch[3]), predicated=bool(branch[1]), predicate=branch[2])
                              if branch else None,
                              exit_bound=int(bound[1]) if bound else None,
                              compares={p: int(c) for p, c in _COMPARE.findall(plain)}))
    return bundles


def _instructions(body: str, relative) -> list[Instruction]:
    """The instructions of one bundle's text (what follows its opening brace)."""
    comments: list[str] = []

    def hide(match: re.Match) -> str:
        comments.append(match[0])
        return f"\x00{len(comments) - 1}\x00"

    plain = _COMMENT.sub(hide, body)
    plain = plain[:plain.rfind("}")] if "}" in plain else plain
    found = []
    for part in plain.split(";;"):
        match = _INSTRUCTION.match(part.replace("\x00", " "))
        if not match:
            continue
        notes = "".join(comments[int(i)] for i in re.findall(r"\x00(\d+)\x00", part))
        loc = _LOC.search(notes)
        source = f"{relative(loc['file'])}:{loc['line']}" if loc else None
        instruction = Instruction(match["result"], match["opcode"], source)
        slot = _SLOT.search(part)
        if slot and instruction.opcode == "vst":
            instruction.spill, instruction.slot = "store", slot[1]
            stored = _STORED.search(re.sub(r"\x00(\d+)\x00", lambda m: comments[int(m[1])], part))
            instruction.stored = stored[1] if stored else None
        elif slot and instruction.opcode == "vld":
            instruction.spill, instruction.slot = "fill", slot[1]
        found.append(instruction)
    return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class Utilization:
    units: list[str]  # MXU, XLU, VALU, VPOP, EUP, VLOAD, VLOAD:FILL, VSTORE, VSTORE:SPILL, SALU
    capacity: list[int]  # slots per bundle, per unit
    rows: list[list[int]]  # slots used, per bundle and unit


def read_utilization(text: str, where: str = "utilization") -> Utilization:
    lines = [line.strip() for line in text.splitlines()]
    try:
        head = next(i for i, line in enumerate(lines) if line.startswith("== CAPAC"))
        body = next(i for i, line in enumerate(lines) if line.startswith("== UTILIZATION"))
    except StopIteration:
        raise UnreadableDump(f"{where}: no '== CAPACITY' and '== UTILIZATION' sections (starts {text[:60]!r})") from None
    units = [u.strip() for u in lines[head + 1].split(",") if u.strip()]
    try:
        capacity = [int(x) for x in lines[head + 2].split()]
        rows = [[int(x) for x in line.split()] for line in lines[body + 1:] if line]
    except ValueError as err:
        raise UnreadableDump(f"{where}: a capacity or utilization row that is not whole numbers ({err})") from None
    if not units or len(capacity) != len(units) or any(len(r) != len(units) for r in rows):
        raise UnreadableDump(f"{where}: {len(units)} units but rows of other lengths")
    return Utilization(units=units, capacity=capacity, rows=rows)


# ----------------------------------------------------------------------------- abort messages

_ABORT_LINES = re.compile(r"(Static LLO profiling of .*|LLO_CHECK failure.*|Check failed.*|F\d{4} .*|"
                          r"INVALID_ARGUMENT: .*|INTERNAL: .*|UNIMPLEMENTED: .*)")


_GLOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def abort_reason(log: str) -> str | None:
    """The line of libtpu's output (stderr of a process it aborted) that says why; None if none."""
    lines = [_GLOG_PREFIX.sub("", line) for line in _ABORT_LINES.findall(log)]
    if not lines:
        return None
    line = next((m for m in lines if m.startswith("Static LLO profiling")), lines[-1]).strip()
    return line if len(line) <= 300 else line[:297] + "..."


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="strict") as f:
        return f.read()


def read_text(path: str) -> str:
    return _read(path)
