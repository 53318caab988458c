"""The local family: jax's own backend of this machine (``cpu``, a local ``gpu``). Pallas TPU
kernels run interpreted on the CPU; time is the roofline only; nothing is fixed or simulated."""
from __future__ import annotations

from ...base.chips import CHIPS, Chip
from ...base.families import Capabilities, CheckVerdict, FamilyInfo
from ...compilation.backends import local_chip
from ...compilation.compile_paths import LocalPath
from ...libtpu.estimate import estimate_times


class LocalFamily:
    info = FamilyInfo("local", "XLA", None, Capabilities(
        compile=False, kernels=False, time=None, kernel_dumps=None, fix=False, run=True, simulate=False, baseline=False,
        check=False, sweep=False))

    def compile_path(self, chip: Chip) -> LocalPath:
        return LocalPath(chip)

    def explain_failure(self, captured, chip: Chip):
        return captured  # no kernel compiler's failure to explain

    def budget_chips(self, target: Chip) -> list[Chip]:
        """Every TPU generation: the interpreted kernels' VMEM is shown on each."""
        return [c for c in CHIPS if c.kind == "tpu"]

    def memory_budget(self, call, chip: Chip):
        return None

    def layout_findings(self, call, chip: Chip):
        return []

    def compiler_verdict(self, stages, calls: list[str], kernels: list) -> dict[str, int]:
        return {}

    def check_verdict(self, findings, stages, chip: Chip, reports: list, params: dict | None = None):
        return CheckVerdict(findings, None)  # nothing compiled for a chip to check

    def defer_to_compiler(self, kernels: list, findings, chip: Chip, stages, params: dict | None = None):
        return kernels, findings

    def estimate_time(self, target, chip: Chip, **kwargs):
        return estimate_times(target, chip, **kwargs)  # the roofline only: no topology to simulate on

    def attached(self) -> Chip | None:
        return local_chip()

    def measure(self, target, *, chip_name: str, seed: int = 0, runs: int | None = None):
        raise NotImplementedError("the local backend is timed by diff, not measured")

    def fixes(self, calls: list, chip: Chip, *, needed_bytes: int | None, kernel: str | None) -> tuple[list, list]:
        return [], []

    def kernel_launches(self, stages, chip: Chip) -> list:
        return []  # no launch per kernel in this family's compile

    def launches_by_kernel(self, kernels: list, launches: list, hlo: str | None) -> dict:
        return {}
