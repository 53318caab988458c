"""What each compiler pass did: read XLA's pass-by-pass dumps (``--xla_dump_hlo_pass_re=.*``).

XLA writes one file per pass that changed the module, plus one at each pipeline's start:
``module_0000.jit_f[.cl_123].0042.<pipeline>.after_<pass>.before_<next pass>.txt`` (some passes
write their own stages: ``copy-insertion.after_adding_copies_to_resolve_interference.txt``),
and around them ``before_optimizations.txt`` (the HLO jax gave) and ``[cpu_]after_optimizations.txt``
(the final HLO: on TPU it still differs from the last per-pass dump, memory-space assignment runs
after it). A pass that left the module alone writes nothing.

``read_dumps`` reads every dump once, in order, as bytes (never decoded: the names come from one
bytes regex, the fusions and custom calls from counting what only they print, and a dump equal
to the one before, as most pipeline starts are, is not counted again), and keeps only an index
in memory: per step the file and its counts (instructions, fusions, custom calls), and per
instruction of the final HLO the step that first made it (the start of its last unbroken run of
appearances, so a name reused after a pass deleted it counts from its new birth). At most two
dumps and two name sets are held at a time. The module texts are read again only for the diff
asked for (``diff_steps``). Plain data, never printed.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import re
from typing import Protocol, Sequence

from .pass_select import selector_problem


_PASS_FILE = re.compile(r"^module_(\d+)\.(.+?)\.(\d{4,})\.([^.]+)\.(.+)\.txt$")
_FINAL_FILE = re.compile(r"^module_(\d+)\.(.+?)\.(?:cpu_|gpu_)?after_optimizations\.txt$")
_FIRST_FILE = re.compile(r"^module_(\d+)\.(.+?)\.before_optimizations\.txt$")
# The name of every instruction, as XLA prints its line (on bytes: the dumps are ASCII, never decoded).
_INSTR = re.compile(rb"\n +(?:ROOT )?%([\w.\-]+) = ")
# What only a fusion, and only a custom call, prints: its kind (kLoop, kInput, kOutput, kCustom) and
# its target. Counted with bytes.count, twice as fast as taking every line's opcode apart (the same
# counts on the transformer's dumps, cpu and v5e); the pass list's dumps carry no op names, the
# only free text where a user's words could say ", kind=k".
_FUSION, _CUSTOM_CALL = b", kind=k", b' custom_call_target="'

FIRST = "before-optimizations"  # the HLO jax handed to XLA
FINAL = "after-optimizations"  # the compiled module (what `--view hlo` shows)


@dataclasses.dataclass(kw_only=True)
class PassStep:
    """One dump: the module after a pass (or at a pipeline's start, or before / after all passes)."""

    index: int
    name: str  # the pass, e.g. "fusion"; "pipeline-start", FIRST or FINAL
    pipeline: str  # e.g. "HLO_passes_after_layout_assignment"; "" for FIRST and FINAL
    next: str | None  # the pass that ran next, when the file name says (a pass between that changed nothing)
    changed: bool  # the module text differs from the step before (as dumped: with metadata only for a diff)
    instructions: int  # after this step, in every computation
    fusions: int
    custom_calls: int
    delta: int  # instructions minus those of the step before
    fusions_delta: int
    custom_calls_delta: int
    made: int = 0  # instructions of the final HLO this step created
    file: str = ""  # the dump's file name (in a temporary folder that is gone by the time anyone reads this)

    @property
    def label(self) -> str:
        return f"#{self.index} {self.name}" + (f" ({self.pipeline})" if self.pipeline else "")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PassDiff:
    """The module before step ``first`` against the module after step ``last``."""

    first: int
    last: int
    title: str
    text: str  # unified diff; empty when nothing changed
    added: int
    removed: int


@dataclasses.dataclass(kw_only=True)
class PassLog:
    module: str  # e.g. jit_flash
    steps: list[PassStep]
    origins: dict[str, int]  # instruction of the final HLO -> index of the step that made it
    files: int  # dump files read (the whole dump folder, LLVM IR and objects included, is `dump_bytes`)
    dump_bytes: int
    diff: PassDiff | None = None
    note: str = ("XLA dumps a pass only when it changed the module (and each pipeline at its start): "
                 "passes that changed nothing are not listed")

    def release(self) -> None:
        """Forget the dump files and the final text (the folder is gone; the log is sent on)."""
        self._paths: list[str] = []
        self._final: str | None = None

    def made_by(self, instruction: str) -> str | None:
        i = self.origins.get(instruction)
        return self.steps[i].label if i is not None else None


@dataclasses.dataclass
class _Dump:
    seq: int  # -1 for FIRST, a large number for FINAL
    name: str
    pipeline: str
    next: str | None
    path: str


def _split_rest(rest: str) -> tuple[str, str | None]:
    """`after_X.before_Y` -> (X, Y); `after_X` -> (X, None); `before_X` -> ("before " X, None)."""
    if rest.startswith("after_"):
        body = rest[len("after_"):]
        name, sep, nxt = body.partition(".before_")
        return name, (nxt if sep else None)
    if rest.startswith("before_"):
        return "before " + rest[len("before_"):], None
    return rest, None


def index_dumps(directory: str, module: str | None = None) -> tuple[str, list[_Dump], int]:
    """The dumps of one module in order: (module name, dumps, bytes in the folder). With several
    modules in the folder, the one named ``module`` (e.g. jit_f), else the one with most dumps."""
    groups: dict[tuple[str, str], list[_Dump]] = {}
    total = 0
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        total += entry.stat().st_size
        fname = entry.name
        if m := _FIRST_FILE.match(fname):
            dump = _Dump(-1, FIRST, "", None, entry.path)
        elif m := _FINAL_FILE.match(fname):
            dump = _Dump(1 << 30, FINAL, "", None, entry.path)
        elif m := _PASS_FILE.match(fname):
            name, nxt = _split_rest(m[5])
            dump = _Dump(int(m[3]), name, m[4], nxt, entry.path)
        else:
            continue
        mod = m[2].split(".", 1)[0]  # jit_f.cl_933746096 -> jit_f
        groups.setdefault((m[1], mod), []).append(dump)
    if not groups:
        return module or "", [], total
    key = max(groups, key=lambda k: (k[1] == module, len(groups[k])))
    return key[1], sorted(groups[key], key=lambda d: d.seq), total


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _body(text: str) -> str:
    """The module without jax's source-location tables (FileNames ... StackFrames, the same in every dump)."""
    at = text.find("\nFileNames\n")
    if at < 0:
        return text
    frames = text.find("\nStackFrames\n", at)
    end = text.find("\n\n", frames + 1) if frames >= 0 else -1
    return text if end < 0 else text[:at + 1] + text[end + 2:]


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _census(data) -> tuple[set[bytes], int, int]:
    """Instruction names, fusions and custom calls of one module's dump."""
    return set(_INSTR.findall(data)), data.count(_FUSION), data.count(_CUSTOM_CALL)


def read_dumps(directory: str, module: str | None = None, final_hlo: str | None = None) -> PassLog:
    """Index the dumps in ``directory`` (one read of each file); ``final_hlo`` (the compiled
    module's text) stands in for the final dump when XLA wrote none (a compile that failed)."""
    name, dumps, total = index_dumps(directory, module)
    steps: list[PassStep] = []
    start: dict[bytes, int] = {}  # name -> step where its current run of appearances began
    prev_names: set[bytes] = set()
    prev_data, prev = None, (0, 0, 0)
    texts: list[tuple[_Dump, bytes | None]] = [(d, None) for d in dumps]
    if final_hlo and not any(d.name == FINAL for d in dumps):
        texts.append((_Dump(1 << 30, FINAL, "", None, ""), final_hlo.encode()))
    for i, (d, given) in enumerate(texts):
        data = given if given is not None else _read_bytes(d.path)
        changed = data != prev_data  # the first module is all new
        if not changed:  # most pipeline starts: nothing to count again
            names, (_, fusions, customs) = prev_names, prev
        else:
            names, fusions, customs = _census(data)
            for n in names - prev_names:
                start[n] = i
            for n in prev_names - names:
                start.pop(n, None)
        count = len(names)
        steps.append(PassStep(index=i, name=d.name, pipeline=d.pipeline, next=d.next, changed=changed, instructions=count,
                              fusions=fusions, custom_calls=customs, delta=count - prev[0], fusions_delta=fusions - prev[1],
                              custom_calls_delta=customs - prev[2], file=os.path.basename(d.path)))
        prev_names, prev_data, prev = names, data, (count, fusions, customs)
    origins = {n.decode(): i for n, i in start.items()}  # what is alive in the last step: the final HLO
    for i in origins.values():
        steps[i].made += 1
    log = PassLog(module=name, steps=steps, origins=origins, files=len(dumps), dump_bytes=total)
    log._paths = [d.path for d, _ in texts]  # for diff_steps, while the folder exists
    log._final = final_hlo
    return log


class _Step(Protocol):
    index: int
    name: str
    pipeline: str
    changed: bool


class StepLog(Protocol):
    """What --pass selects in: XLA's PassLog, a Mosaic kernel's passes (mosaic.dumps.KernelPasses)."""

    @property
    def steps(self) -> Sequence[_Step]: ...


class UnknownPass(ValueError):
    """A --pass selector that names no step; the message lists what there is."""


def select_step(log: StepLog, selector: str, view: str = "--view passes") -> int:
    """An index, or a case-insensitive substring of a pass name (an exact name wins; of several
    matches the first that changed the module). ``log``: anything with ``steps`` (each with
    index, name, pipeline, changed): the Mosaic passes take the same grammar; ``view`` lists them."""
    selector = selector.strip()
    n = len(log.steps)
    if re.fullmatch(r"-?\d+", selector):
        i = int(selector)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise UnknownPass(f"--pass {selector}: there are {n} steps (0 to {n - 1}); `{view}` lists them")
        return i
    low = selector.lower()
    exact = [s.index for s in log.steps if s.name.lower() == low]
    found = exact or [s.index for s in log.steps if low in s.name.lower() or low in s.pipeline.lower()]
    if not found:
        names = sorted({s.name for s in log.steps if s.changed})
        raise UnknownPass(f"--pass {selector!r} matches no pass; passes that changed the module: "
                          + ", ".join(names[:25]) + (" ..." if len(names) > 25 else ""))
    changed = [i for i in found if log.steps[i].changed]
    return (changed or found)[0]


def parse_range(log: StepLog, selector: str, view: str = "--view passes") -> tuple[int, int]:
    """`A` -> (A, A); `A..B` -> (A, B), each an index or a name; an empty side is the first or last step."""
    if (problem := selector_problem(selector)) is not None:
        raise UnknownPass(problem)
    if ".." in selector:
        a, b = selector.split("..", 1)
        first = select_step(log, a, view) if a.strip() else 0
        last = select_step(log, b, view) if b.strip() else len(log.steps) - 1
        if last < first:
            raise UnknownPass(f"--pass {selector}: step {last} comes before step {first}; give the earlier one first")
        return first, last
    i = select_step(log, selector, view)
    return i, i


def _text_at(log: PassLog, i: int) -> str:
    if i < 0:
        return ""
    path = log._paths[i]
    return _read(path) if path else (log._final or "")


def diff_steps(log: PassLog, first: int, last: int, context: int = 3) -> PassDiff:
    """Unified diff of the module before step ``first`` and after step ``last`` (the files must
    still exist: call it before the dump folder is removed)."""
    before, after = _body(_text_at(log, first - 1)), _body(_text_at(log, last))
    a, b = log.steps[first], log.steps[last]
    title = a.label if first == last else f"{a.label} .. {b.label}"
    before_name = f"before #{first}: " + (f"after {log.steps[first - 1].label}" if first else "nothing")
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name,
                                      f"after {b.label}", n=context, lineterm=""))
    added = sum(1 for l in lines if l.startswith("+") and not l.startswith("+++"))
    removed = sum(1 for l in lines if l.startswith("-") and not l.startswith("---"))
    return PassDiff(first=first, last=last, title=title, text="\n".join(lines), added=added, removed=removed)
