"""The TPU family: libtpu compiles deviceless, Mosaic's kernels in VMEM, libtpu's simulated time,
the attached TPU measured. Each method is a call into today's modules (``compilation/``'s
``LibtpuPath``, ``pallas/``'s VMEM rules and fixes, ``mosaic/``, ``libtpu/``, ``measure/``)."""
from __future__ import annotations

from ...base.chips import CHIPS, Chip
from ...base.families import Capabilities, FamilyInfo
from ...compilation.backends import attached_chip
from ...compilation.compile_paths import LibtpuPath
from ...libtpu.estimate import estimate_times
from ...measure.on_chip import measure_target
from ...mosaic.explain import explain_capture
from ..gpu.foreign import GPU_STATUS, explain_gpu_kernels
from ...pallas.analysis import compiler_scoped_vmem, compiler_vmem_by_call, defer_to_compiler, refused_by_compiler
from ...pallas.fixes import semantics_changes, vmem_limit_change
from ...pallas.tiling import tiling_findings
from ...pallas.budgets import budget
from .verdict import check_verdict


class TpuFamily:
    info = FamilyInfo("tpu", "libtpu", "VMEM", Capabilities(
        compile=True, kernels=True, time="simulated", kernel_dumps="Mosaic passes", fix=True, run=True, simulate=True,
        baseline=True, check=True, sweep=True, measure=True), interconnect="ICI")

    def compile_path(self, chip: Chip) -> LibtpuPath:
        return LibtpuPath(chip)

    def explain_failure(self, captured, chip: Chip):
        """A Pallas GPU kernel's lowering failure said as that (jax's words name neither); else a
        failed Mosaic kernel explained."""
        captured = explain_gpu_kernels(captured, chip)
        if captured.stages.compile_error is not None and captured.stages.compile_error.status == GPU_STATUS:
            return captured
        return explain_capture(captured, chip)

    def budget_chips(self, target: Chip) -> list[Chip]:
        """Every TPU generation: a kernel's VMEM is shown on each."""
        return [c for c in CHIPS if c.kind == self.info.name]

    def memory_budget(self, call, chip: Chip):
        return budget(call, chip)

    def layout_findings(self, call, chip: Chip):
        return tiling_findings(call, chip)

    def compiler_verdict(self, stages, calls: list[str], kernels: list) -> dict[str, int]:
        return compiler_vmem_by_call(calls, kernels, stages.compile_error)

    def check_verdict(self, findings, stages, chip: Chip, reports: list, params: dict | None = None):
        return check_verdict(findings, stages, reports)

    def defer_to_compiler(self, kernels: list, findings, chip: Chip, stages, params: dict | None = None):
        """Compiled: libtpu's verdict stands; out of VMEM: the estimate's undecided findings are decided."""
        if stages.hlo and stages.compile_error is None:
            return kernels, defer_to_compiler(findings, chip.name, lambda: max(compiler_scoped_vmem(stages.hlo), default=0))
        if stages.compile_error is not None and stages.compile_error.vmem is not None:
            return kernels, refused_by_compiler(findings, chip.name)
        return kernels, findings

    def estimate_time(self, target, chip: Chip, **kwargs):
        return estimate_times(target, chip, **kwargs)

    def attached(self) -> Chip | None:
        return attached_chip()

    def measure(self, target, *, chip_name: str, seed: int = 0, runs: int | None = None):
        return measure_target(target, chip_name=chip_name, seed=seed, runs=runs)

    def fixes(self, calls: list, chip: Chip, *, needed_bytes: int | None, kernel: str | None) -> tuple[list, list]:
        """A vmem_limit_bytes where the compile ran out of VMEM, parallel axes over the TensorCores."""
        limits, refused = vmem_limit_change(calls, chip, needed_bytes, kernel) if needed_bytes is not None else ([], [])
        parallel, not_parallel = semantics_changes(calls, chip)
        return limits + parallel, refused + not_parallel

    def kernel_launches(self, stages, chip: Chip) -> list:
        return []  # no launch per kernel in this family's compile

    def launches_by_kernel(self, kernels: list, launches: list, hlo: str | None) -> dict:
        return {}
