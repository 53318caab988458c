"""The backend seam's records: what an accelerator family can do and how it is asked.

A family (TPU, the spec-only GPU rows, the local backend) is one implementation of ``Family`` in
``inspector/families/``; the layers above it ask ``family_of(chip)``, never the chip's kind
(docs/backends.md). The records here are plain data, so every layer may hold them; the protocols
say what the families layer provides and what ``compilation/``'s ``Backend`` is handed.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from .chips import Chip
    from .findings import Finding


class Capabilities(NamedTuple):
    """What the verbs, their rules and the views ask of a family."""

    compile: bool  # compiles deviceless here (TPU: libtpu); False: spec only (budgets and roofline)
    kernels: bool  # a pallas_call compiles to a kernel (an interpret=True call is then no kernel)
    # "simulated" (libtpu's static profile); "floor" (the inspector's own lower bound from the compile's
    # kernels and launches: tune ranks by it); None: the roofline only
    time: str | None
    kernel_dumps: str | None  # what its kernel compiler leaves to read ("Mosaic passes"); None
    fix: bool  # fix, show --fixes, the UI's F
    run: bool  # diff runs its programs here (jax's backend, or interpret mode simulating the chip)
    simulate: bool  # interpret mode answers this family's chip lookups (diff, the UI's runs)
    baseline: bool  # baseline save/diff and check --baseline (its figures need a compile)
    check: bool  # check's findings per chip (False on the local backend: check a chip instead)
    sweep: bool  # --sweep budgets its candidates on the family's chips
    # fix tries Mosaic's pipelining changes on this family's chips (pl.Buffered(1), a grid reorder)
    pipeline_fixes: bool = True
    measure: bool = False  # --measure: an attached chip of this family runs the program (``Family.measure``)


class FamilyInfo(NamedTuple):
    """A family's name and words, for the views (``Report.family``)."""

    name: str  # the chip rows' kind: "tpu", "gpu", "local"
    compiler: str  # "libtpu", "XLA:CPU"
    memory: str | None  # the on-chip memory its kernels are budgeted in: "VMEM", "shared memory"
    can: Capabilities
    interconnect: str | None = None  # the links between its chips: "ICI", "NVLink"; None: none here

    @property
    def time_estimate(self) -> str:
        """What ``--time`` gives on this family, in the messages' words."""
        return {"simulated": f"{self.compiler}'s estimate", "floor": "each kernel's time floor"}.get(
            self.can.time or "", "the roofline only")

    @property
    def time_method(self) -> str:
        """What makes that estimate, in the UI's words (its palette and help)."""
        return {"simulated": f"{self.compiler}'s static simulation of each kernel",
                "floor": "each kernel's floor from its bytes, flops and occupancy"}.get(self.can.time or "", "the roofline only")


class CheckVerdict(NamedTuple):
    """The compiler's verdict on one chip, for ``inspector check``'s row of it (``Family.check_verdict``)."""

    findings: list[Finding]  # the findings given, with the verdict's (and the estimate's it settles)
    fits: bool | None  # None: no verdict (an HBM refusal, kernels the compiler never saw)
    memory_bytes: int | None = None  # the compiler's own on-chip figure: used, or needed where it refused
    message: str | None = None  # the compile's error, one line
    ctas_per_sm: int | None = None  # a GPU: the fewest CTAs per SM of the Pallas kernels
    occupancy_limit: str | None = None  # what binds that kernel's CTAs per SM
    registers: int | None = None  # the most registers per thread of the Pallas kernels (ptxas)
    spill_bytes: int | None = None  # and the most bytes one of them spills per thread


class CompilePath(Protocol):
    """How ``compilation/``'s ``Backend`` compiles for a chip of a family, and the hooks the capture
    calls while lowering and compiling."""

    platform: str  # jax's platform of the compile ("tpu", "cpu", "gpu")
    interprets_pallas: bool  # Pallas TPU kernels lower through the interpreter (the CPU)
    keeps_kernel_dumps: bool  # the compile's own dumps are kept with it (XLA:GPU's thunks and PTX)
    pallas_backend: str | None  # the Pallas backend a kernel written for this path names (None: Pallas's default)

    def available(self) -> str | None:
        """Why this chip cannot compile here (one line that says what to do); None: it can."""

    def mesh(self) -> Any:
        """The deviceless topology's one-chip mesh (None: jax's local devices)."""

    def devices(self) -> tuple:
        """The devices a program spans (a slice's whole topology, else jax's local devices)."""

    def device_count(self) -> int:
        """The devices of the target (a TPU chip row's ``devices``, else jax's local devices)."""

    def lowering_capture(self) -> contextlib.AbstractContextManager[list]:
        """Held while lowering: what the kernel compiler leaves then (TPU: Mosaic's MLIR)."""

    def failed_kernel(self, stages: Any, lowering_err: Exception | None = None) -> Any:
        """What explaining a failed kernel needs (``FailedKernel``), None where nothing is explained."""

    def would_abort(self, stages: Any, closed_jaxpr: Any) -> Any:
        """The error a compile would abort the process with, found without compiling, or None."""

    def compile_options(self) -> dict:
        """Compile options that change only machine code the inspector never runs."""


class Family(Protocol):
    """One accelerator family: each method a call into its own modules."""

    info: FamilyInfo

    def compile_path(self, chip: Chip) -> CompilePath: ...

    def explain_failure(self, captured: Any, chip: Chip) -> Any:
        """``captured`` with its failed kernel explained (idempotent)."""

    def budget_chips(self, target: Chip) -> list[Chip]:
        """The chips a Pallas call's on-chip memory is budgeted on beside the target."""

    def memory_budget(self, call: Any, chip: Chip) -> Any:
        """A pallas_call's on-chip memory budget on ``chip`` (``VmemBudget``), or None."""

    def layout_findings(self, call: Any, chip: Chip) -> list[Finding]: ...

    def compiler_verdict(self, stages: Any, calls: list[str], kernels: list) -> dict[str, int]:
        """Per pallas_call, the compiler's own on-chip bytes ({} where the compiler gives none)."""

    def check_verdict(self, findings: list[Finding], stages: Any, chip: Chip, reports: list,
                      params: dict | None = None) -> CheckVerdict:
        """``inspector check``'s verdict on ``chip`` from its compile (``stages``), with ``findings``
        (``reports``: the PallasReports; ``params``: the target's, which a refusal's advice may name)."""

    def defer_to_compiler(self, kernels: list, findings: list[Finding], chip: Chip, stages: Any,
                          params: dict | None = None) -> tuple[list, list[Finding]]:
        """The Pallas kernels and ``findings`` with the estimate's budget findings yielding to the
        compiler's verdict (a kernel's own findings too, where the family settles them); ``params``:
        the target's static params, which a refusal's advice may name."""

    def estimate_time(self, target: Any, chip: Chip, **kwargs: Any) -> Any:
        """The program's time on ``chip`` (``TimeEstimate``): simulated, or the roofline only."""

    def attached(self) -> Chip | None:
        """The chip of this family attached to this machine, read without opening it."""

    def measure(self, target: Any, *, chip_name: str, seed: int = 0, runs: int | None = None) -> Any:
        """The target's time on the attached device (``Measurement``), in the process that opens it
        (``families.measuring``); where ``info.can.measure``."""

    def fixes(self, calls: list, chip: Chip, *, needed_bytes: int | None, kernel: str | None) -> tuple[list, list]:
        """The changes the family's compiler may take (and the refused ones) for ``calls`` on ``chip``."""

    def kernel_launches(self, stages: Any, chip: Chip) -> list:
        """Each kernel as the compile launched it on ``chip`` (grid, on-chip memory, registers,
        occupancy), where the family's compile says so; [] elsewhere."""

    def launches_by_kernel(self, kernels: list, launches: list, hlo: str | None) -> dict:
        """HLO kernel name -> its launch (of ``kernel_launches``); {} where there is none."""
