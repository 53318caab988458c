"""The records of what a compiled program launches: a kernel, the tensors it reads and writes,
and the buffers one kernel hands another. They sit below every module that reads them (the
analysis in fusions.py, the grouping in kernel_groups.py and graph_groups.py, the sums in
totals.py), so none of those needs another to name them."""
from __future__ import annotations

import dataclasses

HBM = 0  # layout memory space of device memory; S(1) is VMEM on TPU


@dataclasses.dataclass(frozen=True, kw_only=True)
class TensorRef:
    producer: str  # the kernel or parameter that made it (pass-through ops such as bitcast skipped)
    shape: str
    bytes: int  # bytes moved: less than the buffer when only a slice of it is read or written
    memory_space: int
    buffer_bytes: int | None = None  # the whole buffer, when only part of it moves


# Not frozen: the analyses fill a kernel in while they make it (fusions.py: the BlockSpec walk's
# traffic; report.py: made_by, before the Report exists). Once in a Report it is never edited: the
# time and the measurement come as new kernels in a new Report (report.with_time, with_measurement).
@dataclasses.dataclass(kw_only=True)
class Kernel:
    """One launch of the compiled program (a fusion, a custom call, a copy, a collective): what
    it reads and writes in HBM, what it computes, and its roofline time on the chosen chip."""

    name: str
    kind: str  # fusion:loop | fusion:input | fusion:output | fusion:custom | custom-call:pallas | copy | collective | ...
    opcode: str
    ops: dict[str, int]  # ops inside, by opcode (nested fusions and reducers included)
    op_name: str | None
    source: str | None  # file:line of the kernel's own metadata
    sources: list[str]  # every file:line the fused ops come from
    inputs: list[TensorRef]
    outputs: list[TensorRef]
    bytes_read: int
    bytes_written: int
    hbm_bytes_read: int
    hbm_bytes_written: int
    flops: float
    transcendentals: float
    intensity: float | None  # flops per HBM byte
    roofline_s: float | None
    bound: str | None  # "memory" | "compute" (the MXU) | "VPU" | "EUP" (Pallas kernels) | None when the chip has no figures
    compiler_cycles: int | None = None  # XLA:TPU's own estimate (backend_config estimated_cycles)
    compiler_gave_up: bool = False  # its estimate is the cost model's "no estimate" value (SENTINEL_CYCLES)
    compiler_scoped_vmem_bytes: int | None = None  # used_scoped_memory_configs
    reduce_window_flops: float = 0.0  # part of flops; XLA:TPU counts these differently
    repeat: int = 1  # times it runs (a while body with a known trip count)
    trips_unknown: bool = False  # inside a while loop whose trip count is known only when it runs: counted once
    scope: str | None = None  # op_name scope, e.g. jit(train_step)/layer3
    note: str | None = None
    made_by: str | None = None  # the compiler pass that created it (with pass dumps: show --passes)
    # libtpu's estimate of one run (with --time; inspector.libtpu): cycles, seconds, and where from
    # (libtpu, libtpu-extrapolated, or a floor where libtpu gave none: roofline, bundles)
    estimated_cycles: float | None = None
    estimated_seconds: float | None = None
    estimate_source: str | None = None
    estimate_kind: str | None = None  # estimate | floor (the time is at least this) | range (up to high_seconds)
    high_seconds: float | None = None
    # device time of one launch on the attached TPU (with --measure; inspector.measure), as estimated_seconds
    measured_seconds: float | None = None
    cost_estimate_bytes: int | None = None  # a Pallas kernel's pl.CostEstimate bytes_accessed: what XLA counts for it
    group: str | None = None  # the label of its KernelGroup (FusionAnalysis.groups): layer3 forward, gpt2.py:34-35 block #7 backward

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_bytes_read + self.hbm_bytes_written


@dataclasses.dataclass(frozen=True, kw_only=True)
class Intermediate:
    """A buffer one kernel writes and another reads back."""

    producer: str
    shape: str
    bytes: int
    memory_space: int  # 0 HBM; 1 VMEM on TPU
    source: str | None
    consumers: list[str]
