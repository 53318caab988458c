"""The NVIDIA GPU family (docs/backends.md): deviceless XLA:GPU compiles for the chips whose target
config ships in ``specs/``, and the readers of what those compiles leave. ``jax/``: the target
configs (the cuda topology, private jax API, is ``jax_internals/cuda_topology.py``); ``compile/``: the compile and its shared-memory refusal;
``kernels/``: the thunk sequence, ptxas and occupancy; ``time.py``: each kernel's floor; ``fixes``: what
`inspector fix` tries; ``measure.py``: the attached GPU and each kernel's measured time. The
``Family`` object joins them on the backend seam."""
from __future__ import annotations

from ...base.chips import Chip
from ...base.families import Capabilities, FamilyInfo
from ..gpu_spec import GpuSpecFamily
from .compile.path import GpuCompilePath
from .fixes import triton_changes
from .foreign import explain_mosaic_gpu_kernels, explain_tpu_kernels
from .kernels.occupancy import with_occupancy
from .time import estimate, match_launches
from .verdict import check_verdict, compiler_shared_memory, gpu_kernels, settle_report


class GpuFamily(GpuSpecFamily):
    """A GPU row with XLA's target config: compiled deviceless by XLA:GPU, the compiler's shared
    memory and launch per kernel read from its thunks (ptxas for registers); budgets, block rules
    and the roofline as for a spec-only row."""

    info = FamilyInfo("gpu", "XLA:GPU", "shared memory", Capabilities(
        compile=True, kernels=True, time="floor", kernel_dumps="thunks and ptxas", fix=True, run=True, simulate=False,
        baseline=True, check=True, sweep=True, pipeline_fixes=False, measure=True), interconnect="NVLink")

    def compile_path(self, chip: Chip) -> GpuCompilePath:  # type: ignore[override]
        return GpuCompilePath(chip)

    def budget_chips(self, target: Chip) -> list[Chip]:
        """The target alone: a Pallas-Triton kernel lives in its shared memory, and no TPU's VMEM says
        anything of it (a Pallas TPU kernel gets no budget here: its error says it is a TPU's, foreign.py)."""
        return [target]

    def explain_failure(self, captured, chip: Chip):
        """A Pallas TPU kernel's lowering failure said as that (jax's words blame the install); a
        Mosaic GPU kernel on a GPU before Hopper, an error."""
        return explain_mosaic_gpu_kernels(explain_tpu_kernels(captured, chip), chip)

    def attached(self) -> Chip | None:
        from .measure import attached_gpu

        return attached_gpu()

    def measure(self, target, *, chip_name: str, seed: int = 0, runs: int | None = None):
        """In the process that opens the GPU (families/measuring.py): each kernel's device time (CUPTI)."""
        from .measure import measure_target

        return measure_target(target, chip_name=chip_name, seed=seed, runs=runs)

    def fixes(self, calls: list, chip: Chip, *, needed_bytes: int | None, kernel: str | None) -> tuple[list, list]:
        """Fewer num_stages where XLA:GPU refused a kernel for shared memory, the other num_warps."""
        return triton_changes(calls, chip, needed_bytes=needed_bytes, kernel=kernel)

    def compiler_verdict(self, stages, calls: list[str], kernels: list) -> dict[str, int]:
        return compiler_shared_memory(stages, calls) if stages.platform == "cuda" else {}

    def check_verdict(self, findings, stages, chip: Chip, reports: list, params: dict | None = None):
        """XLA:GPU's shared-memory verdict, and the Pallas kernels' occupancy, registers and spills."""
        return check_verdict(findings, stages, chip, reports, params)

    def defer_to_compiler(self, kernels: list, findings, chip: Chip, stages, params: dict | None = None):
        """XLA:GPU's shared-memory verdict stands, in each kernel's findings too."""
        if stages.platform != "cuda":
            return kernels, findings
        return settle_report(kernels, findings, stages, chip.name, params)

    def estimate_time(self, target, chip: Chip, **kwargs):
        """Each kernel's floor from its bytes, flops and launch (time.py): the compile's kernels,
        as the Report captured them (this process's memo, else the compile cache). ``kwargs``: as
        libtpu's estimate_times takes them (budget, kernels, hlo, use_cache)."""
        from ...compilation.backends import Backend
        from ...compilation.stages import capture  # (jax: only when a time is asked for)

        kernels, hlo, budget = kwargs.get("kernels"), kwargs.get("hlo"), kwargs.get("budget")
        stages = capture(target, Backend(chip, self.compile_path(chip)), jaxpr_text=False, use_cache=kwargs.get("use_cache", True)).stages
        if stages.hlo is None or stages.platform != "cuda":  # nothing compiled: the roofline's floors
            return super().estimate_time(target, chip, **kwargs)
        if kernels is None:
            from ...hlo.fusions import analyse_fusions
            kernels = analyse_fusions(stages.hlo, chip, stages.cost).kernels
        return estimate(chip, kernels, self.kernel_launches(stages, chip), hlo or stages.hlo, budget)

    def kernel_launches(self, stages, chip: Chip) -> list:
        """Each kernel of the deviceless XLA:GPU compile: its launch, shared memory, registers, spills
        and occupancy (from its thunks and ptxas)."""
        return with_occupancy(gpu_kernels(stages), chip) if chip.target_config else []

    def launches_by_kernel(self, kernels: list, launches: list, hlo: str | None) -> dict:
        return match_launches(kernels, launches, hlo)
