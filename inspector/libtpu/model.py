"""What libtpu's dumps say about a compiled TPU program, as plain data (JSON-serialisable).

``TimeEstimate``: each kernel's estimated cycles and seconds and where the figure comes from;
``KernelBundles``: each kernel's VLIW bundles, unit by unit and source line by source line.
"""
from __future__ import annotations

import dataclasses

from ..base.findings import Finding

# Where a kernel's time comes from, best first.
LIBTPU = "libtpu"  # libtpu's static simulation of the compiled program (its static LLO profile)
PALLAS_KINDS = ("custom-call:pallas", "custom-call:mosaic")  # the kernels with a grid and bundles of their own
EXTRAPOLATED = "libtpu-extrapolated"  # that simulation on smaller grids of the same kernel, fitted a + b * steps
ROOFLINE = "roofline"  # max(flops / peak, HBM bytes / bandwidth): libtpu gave nothing for it
BUNDLES = "bundles"  # the bundles the compiled kernel issues on its cheapest path, one a cycle (bundle_walk.py)
SOURCES = (LIBTPU, EXTRAPOLATED, BUNDLES, ROOFLINE)

# What a figure is: the time itself as estimated, a floor the time cannot be below (what the
# kernel must move or issue: the chip may take many times it), or a range where how often guarded
# code runs is decided by values known only when the kernel runs.
ESTIMATE, FLOOR, RANGE = "estimate", "floor", "range"
KINDS = (ESTIMATE, FLOOR, RANGE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepFit:
    """cycles = intercept + per_step * steps (+ per_row * runs of the innermost axis, where the cut
    grids shortened it), through the simulated cycles at reduced grids."""

    intercept: float
    per_step: float
    per_row: float = 0.0
    points: list[tuple[int, int]]  # (grid steps, simulated cycles) measured
    grids: list[list[int]]  # the reduced grids those were measured on


@dataclasses.dataclass(kw_only=True)
class KernelTime:
    """One kernel of the compiled program (an HLO op: a fusion, a Pallas/Mosaic custom call...)."""

    name: str  # the HLO op, as hlo.kernel.Kernel.name
    kind: str  # as hlo.kernel.Kernel.kind
    estimated_cycles: float | None  # per run of the kernel; None: no estimate at all
    estimated_seconds: float | None
    estimate_source: str | None  # one of SOURCES
    estimate_kind: str | None = None  # one of KINDS; None: no figure
    high_seconds: float | None = None  # a range's upper end (estimated_seconds is its lower end)
    repeat: int = 1  # runs per program (a while body with a known trip count)
    overlaps: bool = False  # an asynchronous op (copy-start, slice-start): its DMA runs beside the other kernels
    grid: list[int] | None = None  # a Pallas kernel's grid
    steps: int | None = None  # its grid steps
    cycles_per_step: float | None = None
    fit: StepFit | None = None  # how an extrapolated figure was made
    roofline_seconds: float | None = None
    note: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobCost:
    """One compile that wrote libtpu's dumps: what it was for, how it ended, what it cost."""

    label: str  # whole | probe-1 | probe-2 (cut grids) | bundles (no simulation) | replay-OP (an XLA op alone)
    status: str  # ok | compile-error | aborted | time-limit | memory-limit | no-answer
    wall_seconds: float
    peak_rss_bytes: int | None
    bundles: int = 0  # what the plan expected it to simulate (the budget it held)
    steps: dict[str, int] = dataclasses.field(default_factory=dict)  # grid steps per Pallas kernel in this compile
    detail: str | None = None  # the one line libtpu or XLA gave when it failed


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnitUse:
    """One functional unit over a kernel's bundles (the grid step's for a Pallas kernel)."""

    used: int  # slots used, summed over the bundles
    capacity: int  # slots per bundle
    share: float  # used / (capacity x bundles)
    busy: int  # bundles that use it at all


@dataclasses.dataclass(frozen=True, kw_only=True)
class LineBundles:
    """One source line of a Pallas kernel's body over the bundles of a grid step."""

    source: str  # file:line, or "(no source line)" for what the compiler added (pipeline, DMAs, address math)
    bundles: int  # bundles holding at least one of its instructions
    share: float  # its part of the step's instructions (each bundle split among its instructions): sums to 1
    spills: int  # spill stores and fills of values this line computed
    mxu_ops: int  # MXU instructions (vmatmul / vmatpush) from this line


@dataclasses.dataclass(kw_only=True)
class BundleRow:
    """One VLIW bundle of the listing."""

    index: int
    depth: int  # loop nesting: 1 inside a Pallas kernel's grid loop
    ops: str  # its instructions' opcodes, e.g. "vld vld vmatmul.bf16.gmra.mxu0"
    sources: list[str]  # the source lines of its instructions
    spill_stores: int = 0
    spill_fills: int = 0


@dataclasses.dataclass(kw_only=True)
class KernelBundles:
    """One kernel's final VLIW program: the bundle counts, what each unit does, what bounds it."""

    kernel: str
    kind: str
    bundles: int  # all of the kernel's bundles
    bundles_per_step: int | None  # inside the grid loop (a Pallas kernel with a grid of several steps)
    cycles_per_step: float | None
    units: dict[str, UnitUse]  # over the step's bundles (the whole kernel's when it has no grid loop)
    bound: str | None  # MXU | VALU | XLU | EUP | VPOP | loads | stores | scalar | DMA waits
    spill_stores: int  # per grid step (the whole kernel's when it has no grid loop)
    spill_fills: int
    spilled_lines: list[str]  # the source lines whose values spill, most spilled first
    lines: list[LineBundles]
    listing: list[BundleRow] = dataclasses.field(default_factory=list)
    listing_truncated: bool = False


@dataclasses.dataclass(kw_only=True)
class TimeEstimate:
    """Every kernel's estimated time on one chip, the program's total, and how it was obtained."""

    chip: str
    clock_hz: float | None
    kernels: list[KernelTime]
    totals: dict  # estimated_cycles, estimated_seconds, roofline_seconds, estimate_kind, high_seconds, floor_share
    method: str  # one of SOURCES: the least exact a Pallas kernel got (all kernels' where there are none)
    budget: dict[str, float | bool]  # seconds, memory_bytes, whole
    jobs: list[JobCost]
    findings: list[Finding] = dataclasses.field(default_factory=list)
    bundles: list[KernelBundles] = dataclasses.field(default_factory=list)
    cached: bool = False

    def kernel(self, name: str) -> KernelTime | None:
        return next((k for k in self.kernels if k.name == name), None)

    def slowest(self, n: int = 5) -> list[KernelTime]:
        timed = [k for k in self.kernels if k.estimated_seconds is not None]
        return sorted(timed, key=lambda k: -(k.estimated_seconds or 0.0) * k.repeat)[:n]  # never None: timed
