"""A GPU row XLA ships no target config for (b200): spec only (budgets in shared memory, Triton's
and Mosaic GPU's block rules, the roofline), compiled nowhere. The rows with one are the GPU
family's (``inspector/families/gpu/``: deviceless XLA:GPU compiles)."""
from __future__ import annotations

from ..base.chips import CHIPS, Chip
from ..base.families import Capabilities, CheckVerdict, FamilyInfo
from ..compilation.compile_paths import SpecOnlyPath
from ..pallas.tiling import tiling_findings
from ..pallas.budgets import budget
from ..libtpu.estimate import estimate_times


class GpuSpecFamily:
    info = FamilyInfo("gpu", "none (spec only)", "shared memory", Capabilities(
        compile=False, kernels=False, time=None, kernel_dumps=None, fix=False, run=False, simulate=False, baseline=False,
        check=True, sweep=True), interconnect="NVLink")

    def compile_path(self, chip: Chip) -> SpecOnlyPath:
        return SpecOnlyPath(chip)

    def explain_failure(self, captured, chip: Chip):
        return captured

    def budget_chips(self, target: Chip) -> list[Chip]:
        """The TPU generations, as for a local target (a spec-only GPU compiles nothing of its own)."""
        return [c for c in CHIPS if c.kind == "tpu"]

    def memory_budget(self, call, chip: Chip):
        return budget(call, chip)

    def layout_findings(self, call, chip: Chip):
        return tiling_findings(call, chip)

    def compiler_verdict(self, stages, calls: list[str], kernels: list) -> dict[str, int]:
        return {}

    def check_verdict(self, findings, stages, chip: Chip, reports: list, params: dict | None = None):
        return CheckVerdict(findings, None)  # compiled nowhere: the estimate alone

    def defer_to_compiler(self, kernels: list, findings, chip: Chip, stages, params: dict | None = None):
        return kernels, findings

    def estimate_time(self, target, chip: Chip, **kwargs):
        return estimate_times(target, chip, **kwargs)  # the roofline only: no topology to simulate on

    def attached(self) -> Chip | None:
        return None

    def measure(self, target, *, chip_name: str, seed: int = 0, runs: int | None = None):
        raise NotImplementedError("a spec-only GPU is not measured")

    def fixes(self, calls: list, chip: Chip, *, needed_bytes: int | None, kernel: str | None) -> tuple[list, list]:
        return [], []

    def kernel_launches(self, stages, chip: Chip) -> list:
        return []  # no launch per kernel in this family's compile

    def launches_by_kernel(self, kernels: list, launches: list, hlo: str | None) -> dict:
        return {}
