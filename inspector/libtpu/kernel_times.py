"""A kernel's time from its cycles (or its roofline where it has none), and the program's totals."""
from __future__ import annotations

import dataclasses

from ..base.chips import Chip
from .model import ROOFLINE, KernelTime


def timed(kernel, chip: Chip, cycles: float | None, source: str | None) -> KernelTime:
    roofline = kernel.roofline_s
    if cycles is None and roofline is not None:
        cycles, source = (roofline * chip.clock_hz if chip.clock_hz else None), ROOFLINE
    seconds = (cycles / chip.clock_hz if chip.clock_hz and cycles is not None
               else roofline if source == ROOFLINE else None)
    return KernelTime(name=kernel.name, kind=kernel.kind, estimated_cycles=cycles, estimated_seconds=seconds,
                      estimate_source=source if seconds is not None or cycles else None, repeat=kernel.repeat,
                      roofline_seconds=roofline)


def timed_roofline(t: KernelTime, chip: Chip) -> KernelTime:
    assert t.roofline_seconds is not None  # only called where the roofline is known
    return dataclasses.replace(t, estimated_seconds=t.roofline_seconds, estimate_source=ROOFLINE,
                               estimated_cycles=t.roofline_seconds * chip.clock_hz if chip.clock_hz else None)


def totals(times: list[KernelTime], chip: Chip) -> dict[str, float | int | None]:
    timed = [t for t in times if t.estimated_seconds is not None]
    seconds = sum(t.estimated_seconds * t.repeat for t in timed if t.estimated_seconds is not None) if timed else None
    cycles = sum(t.estimated_cycles * t.repeat for t in timed if t.estimated_cycles is not None) if timed else None
    roofline = [t.roofline_seconds * t.repeat for t in times if t.roofline_seconds is not None]
    return {"estimated_seconds": seconds, "estimated_cycles": cycles,
            "roofline_seconds": sum(roofline) if roofline else None,
            "untimed_kernels": len(times) - len(timed)}  # a count: 155, not 155.0, in JSON
