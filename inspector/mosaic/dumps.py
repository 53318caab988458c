"""What each Mosaic pass did to a kernel: read libtpu's Mosaic pass dumps.

With ``LIBTPU_INIT_ARGS="--xla_mosaic_dump_to=DIR --xla_mosaic_enable_dump_debug_info=true"``
libtpu 0.0.42.1 writes, per kernel it compiles, the module after each pass:
``<id>-<NNNN>-mosaic-dump-<module>-<pass>.txt`` (``original``, ``post-infer-memref-layout``, ...,
``post-infer-vector-layout``, ``post-relayout-insertion``, ``post-apply-vector-layout``,
``post-lower-to-llo``, ``post-finalize-llo``: 18 for a flash attention kernel on v5e), with each
op's location (the debug-info flag) as ``loc(#locN)`` aliases defined after the module. It also
writes lone ``-0000-...-post-deserialization`` files for the module read back by other compiler
passes: not a pass of the kernel's pipeline, left out.

Only the names of these files and the MLIR text are read; a folder this reader cannot follow
gives notes (the caller turns them into info findings), never an exception or a guessed figure.
"""
from __future__ import annotations

import collections
import dataclasses
import difflib
import os
import re
from ..hlo.passes import PassDiff
from ..hlo.mlir_locations import LocationTable, op_alias, strip_locations

_FILE = re.compile(r"^(?P<id>\d+)-(?P<seq>\d{4,})-mosaic-dump-(?P<rest>.+)\.txt$")
_PASS = re.compile(r"-(original|post-[\w.-]+)$")
_FUNC = re.compile(r"func\.func (?:public |private )?@([\w$.-]+)\(")
_OP = re.compile(r'^\s*(?:%[\w#.:]+(?:\s*,\s*%[\w#.:]+)*\s*=\s*)?"?([a-z_][a-z0-9_]*\.[a-z0-9_.]+)"?(?=[\s(<{]|$)')
_RETURN = re.compile(r"^\s*return\b")
_VPAD = re.compile(r'#tpu\.vpad<"([^"]*)">')
_OUT_LAYOUT = re.compile(r"out_layout = \[([^\]]*)\]")
_IN_LAYOUT = re.compile(r"in_layout = \[([^\]]*)\]")
_VECTOR = re.compile(r"vector<((?:\d+x)*)([a-zA-Z]\w*)>")
_RESULT = re.compile(r"^\s*(%[\w#.]+) = ")
_RELAYOUT = re.compile(r"^\s*(%[\w#.]+) = tpu\.relayout (%[\w#.]+)")
_DTYPES = {"f32": "f32", "bf16": "bf16", "f16": "f16", "i32": "s32", "i16": "s16", "i8": "s8", "i4": "s4", "i1": "pred",
           "f8E5M2": "f8e5m2", "f8E4M3FN": "f8e4m3fn"}

LAYOUT_PASS = "infer-vector-layout"
RELAYOUT_PASS = "relayout-insertion"


@dataclasses.dataclass(kw_only=True)
class MosaicPass:
    """The module after one Mosaic pass (``original``: as Pallas handed it over)."""

    index: int
    name: str  # e.g. "infer-vector-layout"
    changed: bool  # the module (without locations) differs from the one before
    ops: dict[str, int]  # op kind -> how many after this pass, most first
    delta: dict[str, int]  # op kind -> the change from the pass before (kinds that changed)
    total: int  # ops after this pass
    total_delta: int
    lines: int  # lines of the module text, locations left out
    failed: bool = False  # the pass failed (libtpu dumped what it had: ``post-<pass>-failed``)
    file: str = ""  # the dump's file name (in a folder removed by the time anyone reads this)
    pipeline: str = ""  # (none: one pipeline per kernel; the field lets --pass share the XLA passes grammar)

    @property
    def label(self) -> str:
        return f"#{self.index} {self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValueLayout:
    """The layout infer-vector-layout gave one vector value."""

    value: str  # the SSA name in that dump, e.g. %72
    op: str  # the op that makes it
    shape: str  # e.g. bf16[512,128]
    layout: str  # Mosaic's own spelling: "bitwidth,{row offset,lane offset},(tile rows,tile lanes)[,implicit dim]"
    source: str | None  # file:line of the op


@dataclasses.dataclass(frozen=True, kw_only=True)
class Relayout:
    """Relayouts relayout-insertion put in at one source line, between one pair of layouts."""

    source: str | None  # file:line of the op that needed the other layout (the relayout's own, else its user's)
    count: int
    from_layout: str
    to_layout: str
    shape: str

    def as_json(self) -> dict:
        return {"source": self.source, "count": self.count, "from": self.from_layout, "to": self.to_layout,
                "shape": self.shape}


@dataclasses.dataclass(kw_only=True)
class KernelPasses:
    """One kernel's trip through Mosaic."""

    kernel: str  # the kernel function's name in the module (the pallas_call's name)
    passes: list[MosaicPass]
    layouts: list[ValueLayout] | None  # None: no readable infer-vector-layout dump
    relayouts: list[Relayout] | None  # None: no readable relayout-insertion dump
    relayout_count: int | None
    dump_id: str
    files: int
    dump_bytes: int
    source: str | None = None  # file:line of the pallas_call
    diff: PassDiff | None = None  # when asked for
    notes: list[str] = dataclasses.field(default_factory=list)  # what could not be read

    @property
    def failed_pass(self) -> str | None:
        """The pass Mosaic failed in (the compile error's), if one did."""
        return next((p.name for p in self.passes if p.failed), None)

    def step(self, name: str) -> MosaicPass | None:
        return next((p for p in self.passes if p.name == name), None)

    @property
    def steps(self) -> list[MosaicPass]:  # the name --pass selection (hlo.passes.parse_range) reads
        return self.passes

    def release(self) -> None:
        """Forget the dump files' paths (the folder is gone; the kernel is sent on)."""
        self._paths: list[str] = []


def _shape(dims: str, dtype: str) -> str:
    return f"{_DTYPES.get(dtype, dtype)}[{','.join(d for d in dims.split('x') if d)}]"


def count_ops(text: str) -> collections.Counter:
    """Op kinds of a module text (pretty or generic form), e.g. {"arith.addf": 12, ...}."""
    found: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        m = _OP.match(line)
        if m:
            found[m[1]] += 1
        elif _RETURN.match(line):
            found["func.return"] += 1
    return found


def _index(directory: str) -> tuple[dict[str, list[tuple[int, str, str]]], int, list[str]]:
    """{dump id: [(seq, pass name, path)]} of the kernels' pipelines, bytes in the folder, notes."""
    groups: dict[str, list[tuple[int, str, str]]] = collections.defaultdict(list)
    total, unknown = 0, []
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        total += entry.stat().st_size
        m = _FILE.match(entry.name)
        p = _PASS.search(m["rest"]) if m else None
        if not m or not p:
            unknown.append(entry.name)
            continue
        groups[m["id"]].append((int(m["seq"]), p[1].removeprefix("post-"), entry.path))
    pipelines = {k: sorted(v) for k, v in groups.items() if any(name != "deserialization" for _, name, _ in v)}
    notes = [f"{len(unknown)} file(s) in the Mosaic dump folder are not named as this reader knows "
             f"(e.g. {unknown[0]})"] if unknown else []
    return pipelines, total, notes


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _layouts(text: str) -> list[ValueLayout]:
    table = LocationTable(text)
    found = []
    for line in text.splitlines():
        result, out = _RESULT.match(line), _OUT_LAYOUT.search(line)
        if not result or not out:
            continue
        layouts = _VPAD.findall(out[1])
        vectors = _VECTOR.findall(line[: line.rfind(" loc(")] if " loc(" in line else line)
        if len(layouts) != 1 or layouts[0] == "none" or not vectors:
            continue
        op = _OP.match(line)
        dims, dtype = vectors[-1]
        if op and op[1] in ("arith.cmpi", "arith.cmpf"):  # printed with its operands' type; the result is i1
            dtype = "i1"
        found.append(ValueLayout(value=result[1], op=op[1] if op else "?", shape=_shape(dims, dtype), layout=layouts[0],
                                 source=table.source(op_alias(line))))
    return found


def _relayouts(text: str) -> tuple[list[Relayout], int]:
    """Every tpu.relayout, grouped by (source line, from, to, shape), most first."""
    table = LocationTable(text)
    lines = text.splitlines()
    uses: dict[int, str | None] = {}  # relayout's line -> the source of the first op after it that reads it
    made = []
    for i, line in enumerate(lines):
        m = _RELAYOUT.match(line)
        if not m:
            continue
        ins, outs = _IN_LAYOUT.search(line), _OUT_LAYOUT.search(line)
        vectors = _VECTOR.findall(line)
        made.append((i, m[1], _VPAD.findall(ins[1]) if ins else [], _VPAD.findall(outs[1]) if outs else [],
                     _shape(*vectors[-1]) if vectors else "?", table.source(op_alias(line))))
    for i, name, *_ in made:
        use = re.compile(re.escape(name) + r"(?![\w#.])")
        for later in lines[i + 1:]:
            if not later.startswith("#loc") and use.search(later.split(" = ", 1)[-1]):
                uses[i] = table.source(op_alias(later))
                break
    groups: collections.Counter[tuple[str | None, str, str, str]] = collections.Counter()
    for i, _, froms, tos, shape, own in made:  # SSA names repeat across regions: by line, not by name
        groups[(own or uses.get(i), froms[0] if froms else "?", tos[0] if tos else "?", shape)] += 1
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0][0] or ""))
    return [Relayout(source=src, count=n, from_layout=a, to_layout=b, shape=shape) for (src, a, b, shape), n in ordered], len(made)


def _kernel_name(text: str) -> str | None:
    m = _FUNC.search(text)
    return m[1] if m else None


def _missing(steps: list[MosaicPass], layouts, relayouts, count) -> list[str]:
    """What a kernel's dumps leave unknown (a pipeline that stopped at a failed pass never got
    to the later passes: nothing is missing there)."""
    notes = []
    if not steps or not any(s.total for s in steps):
        notes.append("its Mosaic dumps hold no operations this reader recognises")
    if any(s.failed for s in steps):
        return notes
    if layouts is None:
        notes.append(f"no {LAYOUT_PASS} dump: the layout of each value is unknown")
    if relayouts is None:
        notes.append(f"no {RELAYOUT_PASS} dump: the relayouts are unknown")
    elif count and not any(r.source for r in relayouts):
        notes.append("the relayouts carry no source locations (a dump made without --xla_mosaic_enable_dump_debug_info?)")
    return notes


def _read_pipeline(dump_id: str, files: list[tuple[int, str, str]]) -> KernelPasses:
    steps: list[MosaicPass] = []
    prev_ops: collections.Counter[str] = collections.Counter()
    prev_text: str | None = None
    layouts = relayouts = count = name = None
    size = 0
    for i, (_, dumped, path) in enumerate(files):
        failed = dumped.endswith("-failed")
        pass_name = dumped.removesuffix("-failed")
        raw = _read(path)
        size += len(raw)
        name = name or _kernel_name(raw)
        text = strip_locations(raw)
        ops = count_ops(text)
        delta = {k: ops[k] - prev_ops[k] for k in set(ops) | set(prev_ops) if ops[k] != prev_ops[k]}
        steps.append(MosaicPass(index=i, name=pass_name, changed=text != prev_text, ops=dict(ops.most_common()),
                                delta=dict(sorted(delta.items(), key=lambda kv: -abs(kv[1]))), total=sum(ops.values()),
                                total_delta=sum(ops.values()) - sum(prev_ops.values()), lines=text.count("\n") + 1, failed=failed,
                                file=os.path.basename(path)))
        if pass_name == LAYOUT_PASS and not failed:
            layouts = _layouts(raw)
        elif pass_name == RELAYOUT_PASS and not failed:
            relayouts, count = _relayouts(raw)
        prev_ops, prev_text = ops, text
    kernel = KernelPasses(kernel=name or f"kernel-{dump_id}", passes=steps, layouts=layouts, relayouts=relayouts,
                          relayout_count=count, dump_id=dump_id, files=len(files), dump_bytes=size,
                          notes=_missing(steps, layouts, relayouts, count))
    kernel._paths = [p for _, _, p in files]
    return kernel


def read_kernel_dumps(directory: str) -> tuple[list[KernelPasses], list[str]]:
    """Every kernel pipeline in ``directory`` (in the order libtpu wrote them) and notes about
    what could not be read. The texts are read once each; the paths stay for ``diff_passes``."""
    pipelines, total, notes = _index(directory)
    kernels = [_read_pipeline(k, pipelines[k]) for k in sorted(pipelines, key=int)]
    if not kernels:
        notes.append("Mosaic wrote no pass dumps this reader can follow" + (f" ({total} bytes of other files)" if total else ""))
    return kernels, notes


def reattach(kernels: list[KernelPasses], directory: str) -> None:
    """Give kernels read (and released) elsewhere the paths of their dumps in ``directory``, the
    folder they were read from, so ``diff_passes`` can read them again."""
    pipelines, _, _ = _index(directory)
    for k in kernels:
        k._paths = [p for _, _, p in pipelines.get(k.dump_id, [])]


def diff_passes(kernel: KernelPasses, first: int, last: int, context: int = 3):
    """Unified diff of the module before pass ``first`` and after pass ``last`` (locations left
    out), as the XLA passes view's diff (hlo.passes.PassDiff); the dump files must still exist."""
    paths = kernel._paths
    before = strip_locations(_read(paths[first - 1])) if first > 0 else ""
    after = strip_locations(_read(paths[last]))
    a, b = kernel.passes[first], kernel.passes[last]
    title = a.label if first == last else f"{a.label} .. {b.label}"
    before_name = f"before #{first}: " + (f"after {kernel.passes[first - 1].label}" if first else "nothing")
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, f"after {b.label}",
                                      n=context, lineterm=""))
    added = sum(1 for l in lines if l.startswith("+") and not l.startswith("+++"))
    removed = sum(1 for l in lines if l.startswith("-") and not l.startswith("---"))
    return PassDiff(first=first, last=last, title=title, text="\n".join(lines), added=added, removed=removed)
