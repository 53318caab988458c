"""HBM per device: XLA's memory analysis of the compile against the chip's capacity, and the
compiler's buffer assignment at the peak (hlo.buffers). On a sharded program every figure is per
device, as XLA reports it (``compiled.memory_analysis()`` is per device).

What a program needs is what the compiler allocates: arguments + outputs + temporaries - the
outputs that alias an argument. That is the figure libtpu compares with the HBM it has ("the
total memory required ... exceeds available HBM (15.75G)" is exactly that sum, measured on v5e);
generated code is shown but not counted.
"""
from __future__ import annotations

import dataclasses

from ..base.chips import Chip
from ..base.findings import Finding
from ..base.units import fmt_bytes


@dataclasses.dataclass(kw_only=True)
class MemoryReport:
    chip: str
    devices: int  # devices the program spans; every figure below is per device
    mesh: dict | None
    argument_bytes: int | None
    output_bytes: int | None
    temp_bytes: int | None
    alias_bytes: int | None
    code_bytes: int | None
    required_bytes: int | None  # argument + output + temp - alias
    hbm_capacity_bytes: int | None  # what a program may use per device (chips.py hbm_device_bytes)
    fits: bool | None  # None: no capacity to compare with (cpu) or nothing compiled
    compiler_refused: bool = False  # the compile failed for HBM (RESOURCE_EXHAUSTED)
    peak_bytes: int | None = None  # live in HBM at the peak of the schedule (buffer assignment)
    peak_at: str | None = None  # the instruction scheduled at the peak
    live_by_kind: dict = dataclasses.field(default_factory=dict)
    largest: list[dict] = dataclasses.field(default_factory=list)  # live at the peak: value, bytes, shape, kind, source, op_name
    note: str | None = None


def capacity(chip: Chip) -> int | None:
    """What a program may use per device: the measured refusal point where the row has one (TPU),
    else the HBM of a spec-only GPU row (local rows have neither)."""
    return chip.hbm_device_bytes or chip.hbm_bytes


def _contributors(buffers: dict | None, n: int = 3) -> str:
    largest = (buffers or {}).get("largest") or []
    if not largest:
        return ""
    parts = [f"{b['shape']} {fmt_bytes(b['bytes'])} ({b['source'] or b['op_name'] or b['value']})" for b in largest[:n]]
    return "; largest live at the peak: " + ", ".join(parts)


def hbm_finding(chip: str, required: int, limit: int, buffers: dict | None, compiler: bool) -> Finding:
    how = "the compiler refused it (RESOURCE_EXHAUSTED)" if compiler else "XLA's memory analysis"
    return Finding("error", "hbm-over-capacity",
                   f"{chip}: needs {fmt_bytes(required)} of HBM per device, {fmt_bytes(limit)} usable: over by "
                   f"{fmt_bytes(required - limit)} ({how}){_contributors(buffers)}", view="memory",
                   data={"chip": chip, "bytes": required, "limit": limit,
                         "largest": list((buffers or {}).get("largest") or [])[:5]})


def analyse_memory(stages, chip: Chip) -> tuple[MemoryReport | None, list[Finding]]:
    """The per-device memory of the compile and, when it does not fit, a finding. A compile the
    compiler refused for HBM carries its own finding (compile_errors); it is not repeated here."""
    limit = capacity(chip)
    buffers = stages.buffers or {}
    err = stages.compile_error
    m = stages.memory
    if m is None and not (err is not None and err.hbm):
        return None, []
    report = MemoryReport(chip=chip.name, devices=stages.devices, mesh=stages.mesh, argument_bytes=None, output_bytes=None,
                          temp_bytes=None, alias_bytes=None, code_bytes=None, required_bytes=None, hbm_capacity_bytes=limit, fits=None,
                          peak_bytes=buffers.get("peak_bytes"), peak_at=buffers.get("peak_at"),
                          live_by_kind=dict(buffers.get("live_by_kind") or {}), largest=list(buffers.get("largest") or []))
    if m is not None:
        report.argument_bytes = m.get("argument_size_in_bytes")
        report.output_bytes = m.get("output_size_in_bytes")
        report.temp_bytes = m.get("temp_size_in_bytes")
        report.alias_bytes = m.get("alias_size_in_bytes")
        report.code_bytes = m.get("generated_code_size_in_bytes")
        parts = [report.argument_bytes, report.output_bytes, report.temp_bytes]
        if all(p is not None for p in parts):
            report.required_bytes = sum(parts) - (report.alias_bytes or 0)
    findings = []
    if err is not None and err.hbm:
        report.compiler_refused, report.fits = True, False
        report.required_bytes, report.hbm_capacity_bytes = err.hbm.required_bytes, err.hbm.available_bytes
        report.note = "the compiler refused the program: the figures are its own (" + err.headline + ")"
    elif report.required_bytes is not None and limit:
        report.fits = report.required_bytes <= limit
        if not report.fits:
            findings.append(hbm_finding(chip.name, report.required_bytes, limit, buffers, compiler=False))
    if not buffers and stages.hlo is not None:
        report.note = report.note or "no buffer assignment for this compile (--view memory asks the compiler for it)"
    return report, findings
