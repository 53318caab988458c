"""A kernel's time from its cycles, its floor where it has none, and the program's totals."""
from __future__ import annotations

import dataclasses

from ..base.chips import Chip
from ..hlo.totals import is_async, overlapped
from .bundle_walk import Walk
from .model import BUNDLES, ESTIMATE, FLOOR, RANGE, ROOFLINE, KernelTime


def timed(kernel, chip: Chip, cycles: float | None, source: str | None, walk: Walk | None = None) -> KernelTime:
    """The kernel at ``cycles`` (from ``source``), an estimate; with none, its floor."""
    if cycles is None:
        return floor(kernel, chip, walk)
    seconds = cycles / chip.clock_hz if chip.clock_hz else None
    return KernelTime(name=kernel.name, kind=kernel.kind, estimated_cycles=cycles, estimated_seconds=seconds,
                      estimate_source=source if seconds is not None or cycles else None,
                      estimate_kind=ESTIMATE if seconds is not None else None, repeat=kernel.repeat,
                      roofline_seconds=kernel.roofline_s, overlaps=is_async(getattr(kernel, "opcode", "")))


def floor(kernel, chip: Chip, walk: Walk | None = None) -> KernelTime:
    """What the kernel cannot take less than: the larger of its roofline and the bundles it issues
    on its cheapest path, one a cycle (``walk``); None for both where neither is known."""
    roofline = kernel.roofline_s
    issued = walk.least / chip.clock_hz if walk is not None and chip.clock_hz and walk.least else None
    seconds, source = max(((s, src) for s, src in ((roofline, ROOFLINE), (issued, BUNDLES)) if s is not None),
                          default=(None, None), key=lambda pair: pair[0])
    return KernelTime(name=kernel.name, kind=kernel.kind, estimated_cycles=seconds * chip.clock_hz if seconds is not None and chip.clock_hz else None,
                      estimated_seconds=seconds, estimate_source=source, estimate_kind=FLOOR if seconds is not None else None,
                      repeat=kernel.repeat, roofline_seconds=roofline, overlaps=is_async(getattr(kernel, "opcode", "")))


def timed_roofline(t: KernelTime, chip: Chip) -> KernelTime:
    """libtpu's figure below the roofline replaced by it. Still an estimate: libtpu simulated the
    kernel and puts it at its bound or under (README's matmul on v6e: 27.9 us against 28.1), and
    the roofline itself can stand above the chip (a quantized matmul's walked bytes: 1.22x); the
    libtpu-below-roofline warning says which figure it is. A floor is a kernel libtpu gave none."""
    assert t.roofline_seconds is not None  # only called where the roofline is known
    return dataclasses.replace(t, estimated_seconds=t.roofline_seconds, estimate_source=ROOFLINE, estimate_kind=ESTIMATE,
                               high_seconds=None,
                               estimated_cycles=t.roofline_seconds * chip.clock_hz if chip.clock_hz else None)


def as_range(t: KernelTime, low_cycles: float, high_cycles: float, chip: Chip) -> KernelTime:
    if not chip.clock_hz:
        return t
    return dataclasses.replace(t, estimated_cycles=low_cycles, estimated_seconds=low_cycles / chip.clock_hz,
                               high_seconds=high_cycles / chip.clock_hz, estimate_kind=RANGE)


def as_floor(t: KernelTime) -> KernelTime:
    """The figure kept, called what it is: a floor (a loop the simulation counted once)."""
    return dataclasses.replace(t, estimate_kind=FLOOR, high_seconds=None) if t.estimated_seconds is not None else t


def totals(times: list[KernelTime], chip: Chip) -> dict:
    """The program's sums: the estimate (a floor when any kernel's figure is one, a range when any
    is a range), the share of it that floors make, the roofline."""
    timed = [t for t in times if t.estimated_seconds is not None]
    # asynchronous ops (their DMAs) run beside the other kernels: the longer of the two sums
    seconds = overlapped([(t.estimated_seconds * t.repeat, t.overlaps) for t in timed
                          if t.estimated_seconds is not None]) if timed else None
    cycles = overlapped([(t.estimated_cycles * t.repeat, t.overlaps) for t in timed
                         if t.estimated_cycles is not None]) if timed else None
    roofline = [(t.roofline_seconds * t.repeat, t.overlaps) for t in times if t.roofline_seconds is not None]
    floors = sum((t.estimated_seconds or 0.0) * t.repeat for t in timed if t.estimate_kind == FLOOR and not t.overlaps)
    kinds = {t.estimate_kind for t in timed}
    kind = FLOOR if FLOOR in kinds or len(timed) < len(times) else RANGE if RANGE in kinds else ESTIMATE if timed else None
    high = (overlapped([((t.high_seconds if t.estimate_kind == RANGE and t.high_seconds is not None else t.estimated_seconds or 0.0)
                         * t.repeat, t.overlaps) for t in timed]) if kind == RANGE else None)
    return {"estimated_seconds": seconds, "estimated_cycles": cycles,
            "roofline_seconds": overlapped(roofline) if roofline else None,
            "estimate_kind": kind, "high_seconds": high,
            "floor_share": floors / seconds if seconds else (0.0 if timed else None),
            "untimed_kernels": len(times) - len(timed)}  # a count: 155, not 155.0, in JSON
