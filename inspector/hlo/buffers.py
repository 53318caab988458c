"""The compiler's buffer assignment, read from its dump files (XLA_FLAGS --xla_dump_to with the buffer assignment, libtpu 0.0.42.1 and the CPU compiler alike): what is live
in HBM at the peak, each buffer with its shape and source line.

A compile asked with ``xla_dump_to`` / ``xla_dump_hlo_as_text`` (compile options, so no
environment change and the compile cache stays on) writes, for the optimized module:
``*after_optimizations-live-range.txt`` (the schedule, each value's live range and the
compiler's own "Live ranges at N (peak)" list), ``*after_optimizations-buffer-assignment.txt``
(allocations: parameter / output / temp, and each value's memory space ``@color``; 0 is HBM) and
``*after_optimizations.txt`` (the module with its source-line table). libtpu writes them even
when the compile fails for HBM, which is how an out-of-memory compile still names its largest
buffers. The result is plain data (JSON-ready): it is cached beside the compile result.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Any

from .module import parse_hlo

HBM_COLOR = 0
_VALUE = re.compile(r"^\s*value: <\d+ (\S+) @(\d+)> \(size=(\d+),offset=(\d+)\): (.*)$")
_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*)$")
_PEAK = re.compile(r"^\s*Live ranges at (\d+) \(peak\):")
_LIVE = re.compile(r"^\s*(\S+): (\d+) bytes \(cumulative")
_SEQUENCE = re.compile(r"^\s*(\d+):(\S+)\s*$")
TOP = 12


def _key(value: str) -> str:
    return value[:-2] if value.endswith("{}") else value


def _kind(rest: str) -> str:
    if "parameter" in rest:
        return "argument"
    if "output shape" in rest or "maybe-live-out" in rest:
        return "output"
    if "constant" in rest:
        return "constant"
    if "thread-local" in rest:
        return "thread-local"
    return "temporary"


def _values(text: str) -> dict[str, dict]:
    """Every value of the buffer assignment: its memory space, shape and allocation kind."""
    found, kind = {}, "temporary"
    for line in text.splitlines():
        m = _ALLOCATION.match(line)
        if m:
            kind = _kind(m[3])
            continue
        v = _VALUE.match(line)
        if v:
            found[_key(v[1])] = {"color": int(v[2]), "bytes": int(v[3]), "shape": v[5].strip(), "kind": kind}
    return found


def _instruction(value: str) -> str:
    return value.split("{", 1)[0]


def read_dump(directory: str) -> dict | None:
    """The HBM picture at the peak from a dump folder, or None when the files are not there."""
    ranges = sorted(glob.glob(os.path.join(directory, "*after_optimizations-live-range.txt")))
    if not ranges:
        return None
    stem = ranges[-1].removesuffix("-live-range.txt")
    try:
        live_text = open(ranges[-1], encoding="utf-8", errors="replace").read()
        assignment = open(stem + "-buffer-assignment.txt", encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    try:
        module = parse_hlo(open(stem + ".txt", encoding="utf-8", errors="replace").read())
        instructions = {i.name: i for c in module.computations.values() for i in c.instructions}
    except (OSError, ValueError):
        module, instructions = None, {}
    return summarise(live_text, assignment, module, instructions)


def summarise(live_text: str, assignment: str, module=None, instructions: dict | None = None) -> dict:
    values = _values(assignment)
    instructions = instructions or {}
    sequence, peak_time, live = {}, None, []
    in_peak = False
    for line in live_text.splitlines():
        if (m := _PEAK.match(line)):
            peak_time, in_peak = int(m[1]), True
            continue
        if in_peak:
            m = _LIVE.match(line)
            if m:
                live.append((_key(m[1]), int(m[2])))
                continue
            in_peak = False
        if peak_time is None and (m := _SEQUENCE.match(line)):
            sequence[int(m[1])] = m[2]
    buffers: list[dict[str, Any]] = []
    for name, size in live:
        info = values.get(name, {})
        if info.get("color", HBM_COLOR) != HBM_COLOR:
            continue
        instr = instructions.get(_instruction(name))
        buffers.append({
            "value": name, "bytes": size, "shape": _plain_shape(info.get("shape", "")), "kind": info.get("kind"),
            "source": module.source(instr) if module is not None and instr is not None else None,
            "op_name": instr.op_name if instr is not None else None,
        })
    buffers.sort(key=lambda b: -b["bytes"])
    by_kind: dict[str, int] = {}
    for b in buffers:
        by_kind[b["kind"] or "temporary"] = by_kind.get(b["kind"] or "temporary", 0) + b["bytes"]
    return {
        "peak_bytes": sum(b["bytes"] for b in buffers),
        "peak_time": peak_time,
        "peak_at": sequence.get(peak_time) if peak_time is not None else None,
        "schedule_length": len(sequence),
        "live_buffers": len(buffers),
        "live_by_kind": by_kind,
        "largest": buffers[:TOP],
    }


def _plain_shape(text: str) -> str:
    """f32[1024,4096]{1,0:T(8,128)} -> f32[1024,4096] (the layout stays in the HLO view)."""
    return re.sub(r"\{[^{}]*\}", "", text).strip()
