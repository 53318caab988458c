"""A compile failure is a finding: XLA:TPU's VMEM out-of-memory text parsed into data.

Two shapes of the message are seen with libtpu 0.0.42.1 (examples in tests/data/):
- scoped limit: "Scoped allocation with size 20.00M and limit 16.00M exceeded scoped vmem limit
  by 4.00M", naming the custom call it was allocating for;
- capacity: "Used 96.00M of 64.00M vmem. Exceeded vmem capacity by 32.00M." followed by the
  largest allocations, each with size, operator, shape, and a tag that names the operand, the
  window shape and the buffering levels.
"""
from __future__ import annotations

import dataclasses
import re

from ..base.findings import Finding
from ..hlo.memory import hbm_finding
from ..base.mosaic_failure import MosaicFailure, vmem_note
from ..base.units import fmt_bytes

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = r"([\d.]+)\s*([KMGT]?)i?B?"


def parse_size(text: str) -> int:
    """XLA's human-readable sizes (``20.00M``, ``512B``, ``1.5G``) use powers of 1024."""
    m = re.fullmatch(r"\s*" + _SIZE + r"\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return round(float(m[1]) * _UNITS[m[2]])


@dataclasses.dataclass(kw_only=True)
class VmemAllocation:
    size_bytes: int
    operator: str | None = None  # the op_name of the operator that owns it
    shape: str | None = None
    role: str | None = None  # "input", "output", "scratch" or what the tag says
    operand_index: int | None = None
    window_shape: str | None = None
    full_shape: str | None = None
    buffering: int | None = None
    tag: str | None = None


@dataclasses.dataclass(kw_only=True)
class VmemOom:
    """The compiler's own figures for a kernel that does not fit VMEM."""

    used_bytes: int
    limit_bytes: int
    exceeded_by_bytes: int
    scope: str  # "scoped" (the per-kernel scoped limit) or "capacity" (physical VMEM)
    kernel: str | None = None  # the HLO instruction it was allocating for
    op_name: str | None = None
    allocations: list[VmemAllocation] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HbmOom:
    """The compiler's figures for a program that does not fit HBM (per device)."""

    required_bytes: int
    available_bytes: int


@dataclasses.dataclass(kw_only=True)
class CompileError:
    """Why the compile failed: the compiler's message, and its VMEM figures when that was the cause."""

    message: str
    status: str | None = None  # e.g. RESOURCE_EXHAUSTED
    code: str | None = None  # e.g. E1001
    vmem: VmemOom | None = None
    hbm: HbmOom | None = None
    interpreter_limit: str | None = None  # the CPU lowering went through the TPU interpreter, which cannot run this kernel
    mosaic: MosaicFailure | None = None  # a Pallas TPU kernel failed: where, the rule and the fix (inspector.mosaic)

    def finding(self, chip: str, view: str, buffers: dict | None = None) -> Finding:
        """The compile failure as a finding, with the compiler's VMEM or HBM figures as its data
        (for HBM, the largest buffers live at the peak when the buffer assignment was dumped).
        A Mosaic failure names its kernel, source line, rule and fix, and points at the Mosaic view."""
        if self.interpreter_limit:  # not the kernel's fault: the real compile (a TPU target) still holds
            return Finding("info", "interpret-unsupported", f"{chip}: {self.headline}", view=view,
                           data={"reason": self.interpreter_limit, "detail": self.message[:2000]})
        if self.hbm:
            return hbm_finding(chip, self.hbm.required_bytes, self.hbm.available_bytes, buffers, compiler=True)
        if self.vmem and self.mosaic:  # the compiler's figures, with the kernel's line, rule, fix and our estimate
            data = dict(dataclasses.asdict(self.vmem), chip=chip)
            where = f" ({self.mosaic.kernel or 'kernel'} at {self.mosaic.source})" if self.mosaic.source else ""
            found = self.mosaic.finding(chip, view, data=data,
                                        message=f"{chip}: {self.headline}{where}{vmem_note(self.mosaic.details)}")
            found.kernel = self.vmem.kernel or found.kernel
            return found
        if self.mosaic:
            return self.mosaic.finding(chip)
        return Finding("error", "compile-vmem-oom" if self.vmem else "compile-error", f"{chip}: {self.headline}",
                       kernel=self.vmem.kernel if self.vmem else None, view=view,
                       data=dict(dataclasses.asdict(self.vmem), chip=chip) if self.vmem else {"chip": chip})

    @property
    def headline(self) -> str:
        if self.interpreter_limit:
            return (f"cannot run in interpret mode: {self.interpreter_limit}; the CPU lowers Pallas TPU kernels through "
                    "the interpreter, so the CPU's StableHLO and HLO are missing, the jaxpr and Pallas views still "
                    "hold (--target tpu-v5e compiles the real kernel)")
        if self.hbm:
            h = self.hbm
            return (f"HBM out of memory: needs {fmt_bytes(h.required_bytes)} per device of {fmt_bytes(h.available_bytes)} "
                    f"available, over by {fmt_bytes(h.required_bytes - h.available_bytes)}")
        if self.vmem:
            v = self.vmem
            return (f"VMEM out of memory ({v.scope}): needs {fmt_bytes(v.used_bytes)} of {fmt_bytes(v.limit_bytes)}, "
                    f"over by {fmt_bytes(v.exceeded_by_bytes)}" + (f" in {v.kernel}" if v.kernel else ""))
        if self.mosaic:
            return self.mosaic.headline
        first = next((line.strip() for line in self.message.splitlines() if line.strip()), "compile failed")
        return first if len(first) <= 400 else first[:397] + "..."


_SCOPED = re.compile(r"Scoped allocation with size " + _SIZE + r" and limit " + _SIZE + r" exceeded scoped vmem limit by " + _SIZE)
_CAPACITY = re.compile(r"Used " + _SIZE + r" of " + _SIZE + r" vmem\. Exceeded vmem capacity by " + _SIZE)
_HBM = re.compile(r"Ran out of memory on HBM, the total memory required for [\w ]+? \(" + _SIZE
                  + r"\) exceeds available HBM \(" + _SIZE + r"\)")
_HBM_USED = re.compile(r"Used " + _SIZE + r" of " + _SIZE + r" hbm")
_FOR = re.compile(r"allocating on stack for %([\w.\-]+) = ")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_STATUS = re.compile(r"^\s*([A-Z_]{4,}):\s*(?:(E\d{3,5}):)?")
_ALLOC_START = re.compile(r"^\s*\d+\.\s+Size:\s*(\S+)", re.M)
_TAG = re.compile(r"(input|output) window allocation for operator (?:input|output) (\d+)\. The window shape is (\S+), while the full shape is (\S+?)\.")
_BUFFERS = re.compile(r"has (\d+) buffering levels?")


def _size(m: re.Match, group: int) -> int:
    return parse_size(m[group] + m[group + 1])


def _allocations(text: str) -> list[VmemAllocation]:
    starts = list(_ALLOC_START.finditer(text))
    found = []
    for m, nxt in zip(starts, starts[1:] + [None]):
        block = text[m.start(): nxt.start() if nxt else len(text)]
        field = lambda key: (re.search(rf"^\s*{key}:\s*(.*)$", block, re.M) or [None, None])[1]  # noqa: B023 (used in this iteration)
        alloc = VmemAllocation(size_bytes=parse_size(m[1]), shape=field("Shape"), tag=field("Tag"))
        op = _OP_NAME.search(field("Operator") or "")
        alloc.operator = op[1] if op else field("Operator")
        if alloc.tag:
            t = _TAG.search(alloc.tag)
            if t:
                alloc.role, alloc.operand_index, alloc.window_shape, alloc.full_shape = t[1], int(t[2]), t[3], t[4]
            elif "scratch" in alloc.tag.lower():
                alloc.role = "scratch"
            b = _BUFFERS.search(alloc.tag)
            alloc.buffering = int(b[1]) if b else None
        found.append(alloc)
    return found


def parse_vmem_oom(text: str) -> VmemOom | None:
    m = _SCOPED.search(text)
    if m:
        oom = VmemOom(used_bytes=_size(m, 1), limit_bytes=_size(m, 3), exceeded_by_bytes=_size(m, 5), scope="scoped")
    else:
        m = _CAPACITY.search(text)
        if not m:
            return None
        oom = VmemOom(used_bytes=_size(m, 1), limit_bytes=_size(m, 3), exceeded_by_bytes=_size(m, 5), scope="capacity")
    target = _FOR.search(text)
    oom.kernel = target[1] if target else None
    op = _OP_NAME.search(text)
    oom.op_name = op[1] if op else None
    oom.allocations = _allocations(text)
    return oom


def parse_compile_error(text: str) -> CompileError:
    # libtpu appends the serialized status proto; the readable text is before it.
    message = text.split(" [type.googleapis.com/", 1)[0].rstrip()
    status = _STATUS.match(message)
    return CompileError(
        message=message,
        status=status[1] if status else None,
        code=status[2] if status and status[2] else (re.search(r"\b(E\d{4})\b", message) or [None, None])[1],
        vmem=parse_vmem_oom(message),
        hbm=parse_hbm_oom(message),
    )


def parse_hbm_oom(text: str) -> HbmOom | None:
    m = _HBM.search(text) or _HBM_USED.search(text)
    return HbmOom(required_bytes=_size(m, 1), available_bytes=_size(m, 3)) if m else None
