"""Read a profiler trace (an XSpace, as ``jax.profiler.trace`` writes it) into each op's device time.

The TPU's plane (``/device:TPU:0``) has a line ``XLA Modules`` (one event per run of a compiled
program) and a line ``XLA Ops`` (one event per HLO op launched). An op is counted in the run whose
span holds its start; what it took per run is its launches' durations summed and divided by the
runs. The format is jaxlib's (``jax.profiler.ProfileData``): a trace this cannot read is said in
one line, never guessed at.
"""
from __future__ import annotations

import bisect
import glob
import os
import re
import statistics

from .model import KernelMeasure

DEVICE_PLANE = "/device:TPU:0"
MODULES_LINE, OPS_LINE = "XLA Modules", "XLA Ops"
_OP_NAME = re.compile(r"^%?([A-Za-z_][\w.\-]*)")


class UnreadableTrace(Exception):
    """The trace lacks what a measurement needs (no device plane, no module runs)."""


def newest_trace(folder: str) -> str:
    """The .xplane.pb file jax.profiler.trace wrote under ``folder`` (the newest, if several)."""
    found = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    if not found:
        raise UnreadableTrace(f"the profiler wrote no trace under {folder}")
    return max(found, key=os.path.getmtime)


def op_name(event_name: str) -> str:
    """``%fusion.3 = f32[8]{0} fusion(...)`` or ``fusion.3`` -> ``fusion.3``."""
    m = _OP_NAME.match(event_name.strip())
    return m[1] if m else event_name.strip()


def read_profile(data, runs: int, plane: str = DEVICE_PLANE) -> tuple[list[float], list[KernelMeasure]]:
    """(each run's device time in seconds, each op's KernelMeasure) from a ``ProfileData``; the
    program is the module with the most device time, its last ``runs`` runs are the ones timed."""
    device = next((p for p in data.planes if p.name == plane), None)
    if device is None:
        names = ", ".join(sorted(p.name for p in data.planes)) or "none"
        raise UnreadableTrace(f"the trace has no plane {plane} (planes: {names})")
    lines = {line.name: line for line in device.lines}
    if MODULES_LINE not in lines or OPS_LINE not in lines:
        raise UnreadableTrace(f"{plane} has no lines {MODULES_LINE!r} and {OPS_LINE!r} (lines: {', '.join(sorted(lines))})")
    by_module: dict[str, list[tuple[float, float]]] = {}
    for e in lines[MODULES_LINE].events:
        by_module.setdefault(e.name, []).append((float(e.start_ns), float(e.duration_ns)))
    if not by_module:
        raise UnreadableTrace(f"{plane} shows no program run")
    spans = max(by_module.values(), key=lambda s: sum(d for _, d in s))
    spans = sorted(spans)[-runs:]
    starts = [s for s, _ in spans]
    per_op: dict[str, list[float]] = {}
    for e in lines[OPS_LINE].events:
        start = float(e.start_ns)
        i = bisect.bisect_right(starts, start) - 1
        if i < 0 or start > spans[i][0] + spans[i][1]:
            continue  # another program's op (a transfer, another module)
        per_op.setdefault(op_name(e.name), []).append(float(e.duration_ns))
    n = len(spans)
    kernels = [KernelMeasure(name=name, seconds=sum(d) / n * 1e-9, launches=len(d) / n, min_seconds=min(d) * 1e-9,
                             max_seconds=max(d) * 1e-9) for name, d in per_op.items()]
    return [d * 1e-9 for _, d in spans], kernels


def summary(run_seconds: list[float]) -> tuple[float, float, float]:
    """(median, fastest, slowest) of the runs."""
    return statistics.median(run_seconds), min(run_seconds), max(run_seconds)
