"""The collectives of a compiled (SPMD, per-device) program in schedule order: what each moves,
over which mesh axes, an ICI time estimate, and whether the compiler overlaps it with compute.

Every all-reduce, all-gather, reduce-scatter, all-to-all and collective-permute is listed: the
synchronous ops, the async ``-start``/``-done`` pairs (and ``async-start`` wrappers), and those
XLA:TPU puts inside a fusion (its reduce-scatter is an all-reduce and a dynamic-slice fused as
``all-reduce-scatter``: listed as a reduce-scatter). Bytes are per device, the larger of what
goes in and what comes out (an all-gather's result, a reduce-scatter's input), logical (no tile
padding). Replica groups hold logical device ids, the index into the mesh's flattened devices,
so a group's members differ exactly along the mesh axes it spans.

The time is an estimate, not a measurement: a ring over each spanned axis with both directions
of each ICI link (scaling book, "sharded matmuls"): all-gather and reduce-scatter
V (n-1)/n / (2 W k), all-reduce twice that, all-to-all a quarter of an all-gather, a
collective-permute V / W; W is one link's one-way bandwidth (chips.py), k the axes spanned,
latency ignored.
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from ..base.chips import Chip
from .fusions import NOT_KERNELS
from .module import ArrayShape, HloModule, Instruction, parse_hlo

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_STARTS = {f"{k}-start": k for k in KINDS}
_DONES = {f"{k}-done" for k in KINDS} | {"async-done"}


@dataclasses.dataclass(kw_only=True)
class Collective:
    name: str  # the HLO instruction (the start of an async pair)
    kind: str  # one of KINDS
    opcode: str
    shape: str  # its result per device, e.g. bf16[2048,4096]
    bytes: int  # per device: the larger of operands and results (logical)
    groups: int  # replica groups (or source-target pairs)
    group_size: int
    axes: list[str] | None  # mesh axes its groups span; None where the groups could not be read
    time_s: float | None  # ICI estimate (module docstring), per run
    asynchronous: bool
    overlaps: bool  # kernels run between start and done
    overlapped_kernels: int
    done: str | None = None
    fusion: str | None = None  # the fusion it sits in, when fused
    source: str | None = None
    op_name: str | None = None
    repeat: int = 1  # runs per step (inside a while loop of known trip count)


@dataclasses.dataclass(kw_only=True)
class CollectiveAnalysis:
    chip: str | None  # whose ICI figures the time uses
    mesh: dict | None
    collectives: list[Collective]
    by_kind: dict[str, dict]  # kind -> count, bytes, time_s (repeats counted)
    by_axis: dict[str, dict]  # "data", "model", "data+model", "?" -> count, bytes, time_s
    total_bytes: int
    total_time_s: float | None
    exposed_time_s: float | None  # of collectives nothing overlaps


def _logical(shapes) -> int:
    return sum(s.logical_bytes for s in shapes if s.dims or s.dtype not in ("u32", "s32"))


def _arrays(shapes: tuple[ArrayShape, ...]) -> list[ArrayShape]:
    """Drop the rank-0 u32/s32 context values async starts carry."""
    return [s for s in shapes if s.dims or s.dtype not in ("u32", "s32")]


def _groups(instr: Instruction, devices: int) -> list[list[int]] | None:
    text = instr.attrs
    pairs = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", text)
    if pairs:
        return [[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)\}", pairs[1])]
    m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        shape = [int(x) for x in m[1].split(",")]
        iota_dims = [int(x) for x in m[2].split(",")]
        ids = np.arange(math.prod(iota_dims)).reshape(iota_dims)
        if m[3]:
            ids = ids.transpose([int(x) for x in m[3].split(",")])
        return ids.reshape(shape[0], -1).tolist()
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if m:
        dims = [(n, int(v)) for n, v in re.findall(r"'([^']+)'=(\d+)", m[1])]
        over = re.findall(r"'([^']+)'", m[2])
        if ":" in m[2] or any(o not in dict(dims) for o in over):
            return None  # sub-axes: not read
        ids = np.arange(math.prod(v for _, v in dims)).reshape([v for _, v in dims])
        order = [i for i, (n, _) in enumerate(dims) if n not in over] + [i for i, (n, _) in enumerate(dims) if n in over]
        size = math.prod(v for n, v in dims if n in over)
        return ids.transpose(order).reshape(-1, size).tolist()
    m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", text)
    if m:
        groups = [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", m[1])]
        return groups if groups and groups[0] else [list(range(devices))]
    return [list(range(devices))] if devices else None


def _axes(groups: list[list[int]] | None, kind: str, mesh: dict | None) -> list[str] | None:
    if groups is None or not mesh:
        return None
    names, shape = list(mesh), list(mesh.values())
    total = math.prod(shape)
    spanned = set()
    for group in (groups if kind == "collective-permute" else groups[:1]):
        if any(d >= total for d in group):
            return None
        coords = [np.unravel_index(d, shape) for d in group]
        spanned |= {names[a] for a in range(len(shape)) if len({c[a] for c in coords}) > 1}
    return [n for n in names if n in spanned]


def _time(kind: str, nbytes: int, n: int, axes: list[str] | None, chip: Chip | None) -> float | None:
    link = chip.ici_bytes_per_s if chip is not None else None
    if not link or n <= 1:
        return 0.0 if link else None
    k = max(len(axes or ()), 1)
    share = nbytes * (n - 1) / n
    if kind == "collective-permute":
        return nbytes / link
    gather = share / (2 * link * k)
    return {"all-reduce": 2 * gather, "all-to-all": gather / 4}.get(kind, gather)


def _fused_kind(module: HloModule, instr: Instruction, inner: Instruction) -> str:
    """XLA:TPU's all-reduce-scatter fusion: an all-reduce whose result is sliced to this device's part."""
    if inner.opcode != "all-reduce":
        return _STARTS.get(inner.opcode, inner.opcode)
    for called in instr.calls:
        comp = module.computations.get(called)
        root = next((i for i in comp.instructions if i.is_root), None) if comp else None
        if root is not None and root.opcode == "dynamic-slice" and inner.name in root.operands:
            return "reduce-scatter"
    return "all-reduce"


def _collectives_in(module: HloModule, names: list[str], seen: set) -> list[Instruction]:
    found = []
    for name in names:
        comp = module.computations.get(name)
        if comp is None or name in seen:
            continue
        seen.add(name)
        for i in comp.instructions:
            if i.opcode in KINDS or i.opcode in _STARTS:
                found.append(i)
            found += _collectives_in(module, i.calls, seen)
    return found


def _done_of(comp_instrs: list[Instruction], start: int) -> int | None:
    name = comp_instrs[start].name
    for j in range(start + 1, len(comp_instrs)):
        if comp_instrs[j].opcode in _DONES and name in comp_instrs[j].operands:
            return j
    return None


def _walk(module: HloModule, comp_name: str, chip, mesh, devices, repeat: int, out: list) -> None:
    comp = module.computations[comp_name]
    instrs = comp.instructions
    shapes = {i.name: i.shapes for i in instrs}
    for idx, instr in enumerate(instrs):
        op = instr.opcode
        if op == "while":
            trips = ((instr.backend_config or {}).get("known_trip_count") or {}).get("n")
            body = (instr.attr("body") or "").lstrip("%")
            if body in module.computations:
                _walk(module, body, chip, mesh, devices, repeat * int(trips or 1), out)
            continue
        if op in KINDS or op in _STARTS:
            inner, fusion = instr, None
            kind = _STARTS.get(op, op)
        elif op in ("fusion", "async-start", "call") and instr.calls:
            inside = _collectives_in(module, instr.calls, set())
            if not inside:
                continue
            for inner in inside:
                _record(module, instr, inner, _fused_kind(module, instr, inner), idx, instrs, shapes, chip, mesh,
                        devices, repeat, out, fusion=instr.name if op != "async-start" else None)
            continue
        else:
            continue
        _record(module, instr, inner, kind, idx, instrs, shapes, chip, mesh, devices, repeat, out, fusion=fusion)


def _record(module, outer, inner, kind, idx, instrs, shapes, chip, mesh, devices, repeat, out, fusion) -> None:
    asynchronous = outer.opcode.endswith("-start")
    done_idx = _done_of(instrs, idx) if asynchronous else None
    between = instrs[idx + 1:done_idx] if done_idx is not None else []
    kernels = [i for i in between if i.opcode not in NOT_KERNELS and i.opcode not in KINDS and i.opcode not in _STARTS]
    inner_shapes = {i.name: i.shapes for i in module.computations[_computation_of(module, inner)].instructions} \
        if inner is not outer else shapes
    operand_arrays = [s for o in inner.operands for s in _arrays(inner_shapes.get(o, ()))]
    own = _arrays(inner.shapes)
    results = own[len(operand_arrays):] if inner.opcode.endswith("-start") and len(own) > len(operand_arrays) else own
    nbytes = max(_logical(operand_arrays), _logical(results))
    groups = _groups(inner, devices)
    size = len(groups[0]) if groups else devices
    if kind == "collective-permute":
        size = devices
    axes = _axes(groups, kind, mesh)
    time_s = _time(kind, nbytes, 2 if kind == "collective-permute" else size, axes, chip)
    out.append(Collective(
        name=inner.name if fusion else outer.name, kind=kind, opcode=inner.opcode,
        shape=", ".join(str(s) for s in results) or (str(outer.shapes[0]) if outer.shapes else ""),
        bytes=nbytes, groups=len(groups) if groups else 0, group_size=size if kind != "collective-permute" else 2,
        axes=axes, time_s=time_s, asynchronous=asynchronous, overlaps=bool(kernels), overlapped_kernels=len(kernels),
        done=instrs[done_idx].name if done_idx is not None else None, fusion=fusion,
        source=module.source(inner) or module.source(outer), op_name=inner.op_name or outer.op_name, repeat=repeat))


def _computation_of(module: HloModule, instr: Instruction) -> str:
    for name, comp in module.computations.items():
        if any(i is instr for i in comp.instructions):
            return name
    return module.entry


def _totals(collectives: list[Collective], key) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for c in collectives:
        row = table.setdefault(key(c), {"count": 0, "bytes": 0, "time_s": 0.0 if c.time_s is not None else None})
        row["count"] += c.repeat
        row["bytes"] += c.bytes * c.repeat
        if row["time_s"] is not None and c.time_s is not None:
            row["time_s"] += c.time_s * c.repeat
    return table


def analyse_collectives(hlo_text: str, chip: Chip | None, mesh: dict | None, devices: int) -> CollectiveAnalysis:
    module = parse_hlo(hlo_text)
    found: list[Collective] = []
    _walk(module, module.entry, chip if chip is not None and chip.ici_bytes_per_s else None, mesh, devices, 1, found)
    timed = [c for c in found if c.time_s is not None]
    total_time = sum(c.time_s * c.repeat for c in timed if c.time_s is not None) if timed else None
    exposed = sum(c.time_s * c.repeat for c in timed if c.time_s is not None and not c.overlaps) if timed else None
    return CollectiveAnalysis(
        chip=chip.name if chip is not None and chip.ici_bytes_per_s else None, mesh=mesh, collectives=found,
        by_kind=_totals(found, lambda c: c.kind), by_axis=_totals(found, lambda c: "+".join(c.axes) if c.axes else ("-" if c.axes == [] else "?")),
        total_bytes=sum(c.bytes * c.repeat for c in found), total_time_s=total_time, exposed_time_s=exposed)
