"""What a diff finds: plain dataclasses, JSON-serialisable, read by the views."""
from __future__ import annotations

import dataclasses

from ..base.display import html
from ..base.findings import Finding


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadBlock:
    block: list[int]
    bad: int  # elements outside tolerance
    nan: int  # of which NaN in the kernel's output (never written, or a NaN computed)
    max_abs: float
    grid_points: list[list[int]]  # the grid steps that wrote this block (first few)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ErrorMap:
    basis: str  # "blockspec" (the kernel's output blocks) or "coarse" (an even grid)
    kernel: str | None
    block_shape: list[int]
    blocks: list[int]  # number of blocks per dim
    bad_blocks: list[BadBlock]  # worst first, at most 32
    bad_block_count: int
    rows: list[str]  # a character map of the last two block dims: '.' ok, 'x' wrong, 'N' NaN


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerance:
    """The tolerance one output was compared at, and why (run/tolerance.py has the formula)."""

    atol: float
    rtol: float
    source: str  # "given" (--atol/--rtol, INSPECT), "dtype" (the dtype's default), "derived" (dtype and K), or "given and ..."
    terms: int  # K: the most terms summed on the way to this output in the reference (1: none)
    reason: str  # one line: the formula with its figures, or "float32's default"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeafDiff:
    output: str
    shape: list[int]
    dtype: str
    atol: float
    rtol: float
    max_abs: float
    max_rel: float
    max_ulp: float | None  # at the element with the largest absolute error
    bad: int
    bad_fraction: float
    nan_kernel: int
    nan_reference: int
    inf_kernel: int
    inf_reference: int
    worst_index: list[int]
    worst_kernel: float
    worst_reference: float
    error_map: ErrorMap | None
    tolerance: Tolerance | None = None  # how atol and rtol were chosen

    @property
    def ok(self) -> bool:
        return self.bad == 0 and self.nan_kernel <= self.nan_reference


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing:
    kernel_s: float | None
    reference_s: float | None
    runs: int
    note: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiffResult:
    target: str
    reference: str
    seed: int
    mode: str  # "accelerator (gpu)", "TPU interpret mode on the CPU as tpu-v5p (2 TensorCores, ...)" or "XLA on the CPU"
    inputs: list[str]
    outputs: list[LeafDiff]
    gradients: list[LeafDiff] | None
    timing: Timing | None
    findings: list[Finding]
    ok: bool
    chip: str | None = None  # the TPU interpret mode simulated, when it ran
    interpreter_output: str = ""  # what the interpreter printed (race dumps...), kept out of the terminal

    def _repr_html_(self) -> str:  # Jupyter: the diff view (rich loads only here)
        return html(self)
