"""`inspector check`: will each pallas_call fit and is it free of silent-corruption bugs, per
chip. The estimate is static (BlockSpecs, scratch); unless told not to, the real compiler
(libtpu, no TPU needed) gives its verdict beside it, a failed kernel explained by
``inspector.mosaic``. Beside ``report`` and ``comparison``: it drives the compiles and the
analyses of every layer below, as they do."""
from __future__ import annotations

import dataclasses
import signal
from typing import Callable

from ..base.chips import Chip, get_chip
from ..base.display import html
from ..base.families import CheckVerdict
from ..base.findings import Finding, by_severity
from ..hlo.memory import analyse_memory
from ..pallas.analysis import PallasReport, analyse_pallas, defer_to_compiler, refused_by_compiler
from ..pallas.vmem import deciding_budget, estimate_fits, estimate_range
from ..base.errors import TargetFailure
from ..compilation.stages import Capture, Stages, capture, compile_is_cached
from ..compilation.target import Target
from ..families import backend_for, family_of


@dataclasses.dataclass(kw_only=True)
class ChipCheck:
    """The verdict on one chip: the static estimate and, when compiled, libtpu's."""

    chip: str
    fits: bool | None  # the estimate's verdict, every kernel; None: undecided (vmem.estimate_fits)
    vmem_bytes: int | None  # estimated peak of the kernel the verdict rests on (vmem.deciding_budget), unsure terms at their most
    vmem_certain_bytes: int | None = None  # of it, what that kernel surely holds (vmem.estimate_range): the verdict's low bound
    vmem_limit_bytes: int | None
    compiler_fits: bool | None  # None: not compiled (--estimate-only, or not a TPU); False also when it failed otherwise
    compiler_vmem_bytes: int | None = None  # the compiler's own figure (scoped VMEM used, or needed when it failed)
    compiler_message: str | None = None
    hbm_bytes: int | None = None  # per device: arguments + outputs + temporaries - aliased (the compile)
    hbm_limit_bytes: int | None = None  # usable per device
    hbm_fits: bool | None = None  # None: not compiled
    mesh: dict | None = None  # the mesh the program was sharded over
    compiler_aborted: bool = False  # libtpu ended the compile's process: no verdict (a compile-aborted finding)
    ctas_per_sm: int | None = None  # a GPU: the fewest CTAs per SM of its Pallas kernels (families/gpu/kernels/occupancy.py)
    occupancy_limit: str | None = None  # what binds that kernel's CTAs per SM
    registers: int | None = None  # XLA:GPU: the most registers per thread of the Pallas kernels (ptxas)
    spill_bytes: int | None = None  # and the most bytes one of them spills per thread


@dataclasses.dataclass(repr=False, kw_only=True)
class CheckResult:
    """`inspector check` on one target: a row per chip (``targets``, as the --target flag names
    them), every pallas_call's analysis, and the findings (chip-independent ones once)."""

    ok: bool  # no error, and every verdict decided
    target: str
    targets: list[ChipCheck]
    kernels: list[PallasReport]
    findings: list[Finding]
    sweep: list | None = None  # SweepRow per combination of INSPECT params, with --sweep
    failed: bool = False  # an error finding, or a chip where something does not fit
    undecided: list[str] = dataclasses.field(default_factory=list)  # chips whose VMEM fit nothing decided

    def __repr__(self) -> str:
        return (f"<CheckResult {self.target} on {', '.join(t.chip for t in self.targets)}: {len(self.kernels)} pallas_call, "
                f"{len(self.findings)} findings, {self.status}>")

    @property
    def status(self) -> str:
        return "ok" if self.ok else "FAILED" if self.failed else "UNDECIDED"

    def _repr_html_(self) -> str:  # Jupyter: the check table, findings and budgets (rich loads only here)
        return html(self)


def _fill(row: ChipCheck, verdict: CheckVerdict) -> list[Finding]:
    """The row with its family's verdict on the compile (Family.check_verdict); the findings with it."""
    row.compiler_fits, row.compiler_vmem_bytes, row.compiler_message = verdict.fits, verdict.memory_bytes, verdict.message
    row.ctas_per_sm, row.occupancy_limit = verdict.ctas_per_sm, verdict.occupancy_limit
    row.registers, row.spill_bytes = verdict.registers, verdict.spill_bytes
    return verdict.findings


class CompilerAborted(Exception):
    """The compiler ended the process compiling for one chip (libtpu aborts on a failed internal
    check): ``exit`` is the process's status (-6: SIGABRT), ``log`` what it wrote to stderr."""

    def __init__(self, chip: str, exit: int, log: str):
        super().__init__(f"{chip}: the compiler ended its process (exit {exit})")
        self.chip, self.exit, self.log = chip, exit, log

    def finding(self) -> Finding:
        try:
            how = f"killed by {signal.Signals(-self.exit).name}" if self.exit < 0 else f"exit code {self.exit}"
        except ValueError:
            how = f"exit {self.exit}"
        lines = [line for line in self.log.splitlines() if line.strip()]
        return Finding("error", "compile-aborted",
                       f"{self.chip}: libtpu ended the compile's process ({how}) without a verdict; the other chips' "
                       f"verdicts stand (libtpu's log, {len(lines)} line{'s' if len(lines) != 1 else ''}, shows "
                       "with --debug)",
                       view="overview", data={"chip": self.chip, "exit": self.exit, "log_lines": len(lines),
                                              "log_tail": "\n".join(lines[-20:])})


def _own_words(err: Exception) -> str:
    """The code's error without the inspector's "(raised while tracing ...)" tail."""
    return str(err).split(" (raised while")[0]


def _first_line(err: Exception, most: int = 240) -> str:
    text = _own_words(err).splitlines()[0]
    return text if len(text) <= most else text[:most - 3] + "..."


def _about_sparse_cores(err: Exception) -> bool:
    """The error is jax's (or the kernel's own) refusal to build a SparseCore kernel: "does not have
    SparseCores" from plsc's meshes, "SparseCore is not available on this TPU version" from
    MaxText's check of pltpu.get_tpu_info()."""
    text = _own_words(err).lower().replace(" ", "").replace("-", "")
    return "sparsecore" in text


def _capture_for(target: Target, chip: Chip, compile: bool, compile_apart: Callable[[Chip], Stages] | None, *,
                 use_cache: bool, memo: bool) -> tuple[Capture, CompilerAborted | None]:
    """The program traced for one chip, compiled where ``compile`` (elsewhere through
    ``compile_apart`` unless the disk cache holds it), and the abort of a compile made elsewhere."""
    # a chip its family cannot compile for (a spec-only GPU) is traced on the CPU
    backend = backend_for(chip if family_of(chip).info.can.compile else get_chip("cpu"))
    if compile and compile_apart is not None and not compile_is_cached(target, backend, use_cache=use_cache,
                                                                       buffers=True, memo=memo):
        captured = capture(target, backend, compile=False, use_cache=use_cache, memo=memo)
        try:  # the child explained its own compile's failure (the program here is only the lowering's)
            return family_of(backend.chip).explain_failure(Capture(compile_apart(chip), captured.program), backend.chip), None
        except CompilerAborted as err:
            return family_of(backend.chip).explain_failure(captured, backend.chip), err
    captured = capture(target, backend, compile=compile, use_cache=use_cache, memo=memo, buffers=compile)
    return family_of(backend.chip).explain_failure(captured, backend.chip), None


def run_check(target: Target, chips: list[Chip], *, estimate_only: bool = False, use_cache: bool = True,
              memo: bool = True, compile_apart: Callable[[Chip], Stages] | None = None) -> CheckResult:
    """``compile_apart``: compiles for one TPU chip elsewhere (a process of its own) and returns
    its Stages, or raises CompilerAborted: that chip's finding, the other chips still checked. A
    compile the disk cache holds runs no compiler, so it is taken here."""
    findings: list[Finding] = []
    rows: list[ChipCheck] = []
    kernels: list[PallasReport] = []
    analysed = False  # a chip has been analysed: chip-independent findings are taken from the first only
    raised: list[TargetFailure] = []  # the code raised tracing for these chips
    for chip in chips:
        if not family_of(chip).info.can.check:
            raise ValueError("check needs TPU or GPU targets")
        compile = family_of(chip).info.can.compile and not estimate_only  # one trace serves the estimate and the compile
        try:
            captured, aborted = _capture_for(target, chip, compile, compile_apart, use_cache=use_cache, memo=memo)
        except TargetFailure as err:  # a SparseCore mesh on a chip without one: that chip's verdict, not the run's
            if chip.vmem_bytes is None or chip.sparse_core_vmem_bytes is not None or not _about_sparse_cores(err):
                if len(chips) == 1:
                    raise
                # the code raised for this chip only, maybe (a kernel sized from the chip's cores):
                # that chip's finding, the others still checked
                raised.append(err)
                findings.append(Finding("error", "raised-for-chip", f"{target.spec} on {chip.name}: the code raised while "
                                        f"tracing for this chip ({_first_line(err)}); the other "
                                        "chips are checked", view="overview", data={"chip": chip.name}))
                rows.append(ChipCheck(chip=chip.name, fits=None, vmem_bytes=None, vmem_limit_bytes=None,
                                      compiler_fits=None, compiler_message="raised while tracing"))
                continue
            findings.append(Finding("error", "no-sparse-core", f"{target.spec} on {chip.name}: the program builds a SparseCore "
                                    f"mesh (plsc.VectorSubcoreMesh / ScalarSubcoreMesh) and {chip.name} has no SparseCore "
                                    "(v5p, v6e and TPU7x have): " + _own_words(err),
                                    view="pallas", data={"chip": chip.name}))
            rows.append(ChipCheck(chip=chip.name, fits=None, vmem_bytes=None, vmem_limit_bytes=None,
                                  compiler_fits=False if compile else None, compiler_message="no SparseCore on this chip"))
            continue
        stages = captured.stages
        reports, unread = analyse_pallas(captured.program, [chip], [chip])
        if not analysed:  # chip-independent findings once, whichever chips read any kernel
            analysed = True
            kernels = reports
            findings += unread + [f for r in reports for f in r.findings if not f.per_chip]
        findings += [f for r in reports for f in r.findings if f.per_chip]
        # a pallas_call(interpret=True) runs as plain HLO on a TPU too: no VMEM budget to fit
        budgets = [b for r in reports for b in r.budgets if b.chip == chip.name and not (r.call.interpret and family_of(chip).info.can.kernels)]
        peak = deciding_budget(budgets)
        row = ChipCheck(chip=chip.name, fits=estimate_fits(budgets), vmem_bytes=peak.total_bytes if peak else None,
                        vmem_certain_bytes=estimate_range(peak)[0] if peak else None,
                        vmem_limit_bytes=peak.limit_bytes if peak else None, compiler_fits=None)
        if aborted is not None:
            row.compiler_aborted, row.compiler_message = True, str(aborted)
            findings.append(aborted.finding())
        elif compile:
            findings = _fill(row, family_of(chip).check_verdict(findings, stages, chip, reports, target.params))
            if row.compiler_fits:
                findings = defer_to_compiler(findings, chip.name, row.compiler_vmem_bytes)
            elif stages.compile_error is not None and stages.compile_error.vmem is not None:
                findings = refused_by_compiler(findings, chip.name)
            memory, over = analyse_memory(stages, chip)  # HBM per device: the whole program, sharded or not
            findings += over
            if memory is not None:
                row.hbm_bytes, row.hbm_limit_bytes, row.hbm_fits = memory.required_bytes, memory.hbm_capacity_bytes, memory.fits
            row.mesh = stages.mesh
        rows.append(row)
    if raised and len(raised) == len(chips):  # it raises whatever the chip: the code's error, said once
        raise raised[0]
    # one it could not read is no absence, nor is one no chip could trace
    if not kernels and analysed and not any(f.code == "analysis-failed" for f in findings):
        checked = "HBM fit only" if any(r.hbm_fits is not None for r in rows) else "nothing to check"
        findings.append(Finding("info", "no-pallas-call", f"{target.spec} has no pallas_call: {checked}"))
    failed = (any(f.severity == "error" for f in findings)
              or any((r.fits is False and not r.compiler_fits) or r.compiler_fits is False or r.hbm_fits is False
                     for r in rows))
    undecided = [r.chip for r in rows if r.fits is None and r.compiler_fits is None and r.compiler_message is None]
    return CheckResult(ok=not failed and not undecided, target=target.spec, targets=rows, kernels=kernels,
                       findings=by_severity(findings), failed=failed, undecided=undecided)

