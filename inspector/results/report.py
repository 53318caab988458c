"""The Report: plain, JSON-serialisable data that every view renders. No UI types here."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base import json_text
from ..base.atomic import write_atomic
from ..base.chips import SIMULATED_CHIP, Chip, get_chip
from ..base.display import html, print_view
from ..base.errors import UsageError
from ..base.findings import Finding, by_severity
from ..hlo.collectives import CollectiveAnalysis, analyse_collectives
from ..hlo.fusions import FusionAnalysis, PallasFigures, analyse_fusions
from ..hlo.graph import build_dot, render_svg
from ..hlo.passes import PassLog
from ..libtpu import Budget, TimeEstimate
from ..libtpu.kernel_times import as_floor, totals as time_totals
from ..measure import Measurement
from ..hlo.memory import MemoryReport, analyse_memory
from ..mosaic.passes import MosaicPasses, capture_mosaic_passes
from ..pallas.analysis import PallasReport, analyse_pallas
from ..base.families import FamilyInfo
from ..families import backend_for, family_of
from ..compilation.pass_dumps import capture_with_passes
from ..base.specs import hlo_type
from ..compilation.stage_records import STAGES, Capture, Stages
from ..compilation.stages import capture
from ..compilation.target import Target
from ..base.user_code import short_path
from ..base.units import fmt_bytes, fmt_time
from .view_table import SHOW_VIEWS, SORT_ORDERS, Needs

if TYPE_CHECKING:  # fixing builds on the Report's path: the field's type only
    from ..base.fix_model import FixResult


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputInfo:
    name: str
    type: str  # HLO spelling, e.g. bf16[4,2048,128]
    shape: list[int]
    dtype: str
    bytes: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetInfo:
    spec: str
    function: str
    file: str | None
    line: int | None
    params: dict
    param_choices: dict
    reference: str | None


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class Report:
    """Everything the inspector found about one target on one chip: the stages, the kernels of
    the optimized HLO, every pallas_call and the findings. Every view renders this and nothing
    else; a number shown in the TUI, in `show`, in JSON and in the SVG comes from one field."""

    target: TargetInfo
    inputs: list[InputInfo]
    chip: Chip
    stages: Stages
    findings: list[Finding]
    fusions: FusionAnalysis | None = None  # kernels with HBM traffic and roofline (when compiled)
    pallas: list[PallasReport] | None = None  # every pallas_call: BlockSpecs, grid walk, budgets
    memory: MemoryReport | None = None  # HBM per device against the chip's capacity (when compiled)
    collectives: CollectiveAnalysis | None = None  # the collectives of the compiled program, in schedule order
    passes: PassLog | None = None  # what each compiler pass did (compiled with pass dumps)
    mosaic_passes: MosaicPasses | None = None  # what each Mosaic pass did to each Pallas kernel (TPU, with its dumps)
    time: TimeEstimate | None = None  # libtpu's estimated time and VLIW bundles per kernel (--time)
    measured: Measurement | None = None  # device time per kernel on the attached TPU (--measure)
    chip_reason: str | None = None  # why this chip when --target named none (compilation/default_target.py)
    fixes: FixResult | None = None  # `inspector fix`'s changes, shown beside the findings they answer (show --fixes, the TUI's F)

    @property
    def family(self) -> FamilyInfo:
        """The chip's family: its compiler, its on-chip memory and what it can do (the views' words)."""
        return family_of(self.chip).info

    @property
    def compiler_vmem(self) -> dict[str, int]:
        """Per pallas_call, the compiler's own VMEM (shared memory on a GPU) figure on this chip (none on a local target)."""
        return family_of(self.chip).compiler_verdict(self.stages, [k.call.name for k in self.pallas or []],
                                                     self.fusions.kernels if self.fusions else [])

    @property
    def gpu_kernels(self) -> list:
        """Each kernel of a deviceless XLA:GPU compile: its launch, shared memory, registers, spills and occupancy."""
        return family_of(self.chip).kernel_launches(self.stages, self.chip)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def __repr__(self) -> str:  # the dataclass's would print every stage text
        kernels = (f", {len(self.fusions.kernels)} kernels, HBM {fmt_bytes(self.fusions.totals['hbm_bytes'])}"
                   if self.fusions else "")
        pallas = f", {len(self.pallas)} pallas_call" if self.pallas else ""
        return (f"<Report {self.target.spec} on {self.chip.name}{kernels}{pallas}, "
                f"{len(self.findings)} findings, {'ok' if self.ok else 'errors'}>")

    def _repr_html_(self) -> str:
        """Jupyter's rich display: the overview with findings, the fusions table, the Pallas
        budgets and the kernel graph (rendered by inspector.views.html; rich loads only here)."""
        return html(self)

    def show(self, view: str = "overview", *, sort: str = "order", top: int = 40) -> None:
        """Print one view as ``inspector show --view VIEW`` does (the only Report method that prints)."""
        if view not in SHOW_VIEWS:
            raise UsageError(f"no view {view!r}: use one of {', '.join(SHOW_VIEWS)}")
        if sort not in SORT_ORDERS:
            raise UsageError(f"sort={sort!r}: use {', '.join(SORT_ORDERS[:-1])} or {SORT_ORDERS[-1]}")
        print_view(self, view, sort=sort, top=top)

    def graph_title(self) -> str:
        a = self.fusions
        if a is None:
            return f"{self.target.spec} on {self.chip.name}"
        return (f"{self.target.spec} on {self.chip.name}: {len(a.kernels)} kernels, HBM {fmt_bytes(a.totals['hbm_bytes'])}"
                + (f", roofline {fmt_time(a.totals['roofline_s'])} on {a.chip}" if a.totals.get("roofline_s") else ""))

    def kernel_graph(self, *, max_nodes: int = 200, expand: tuple[str, ...] = (), color: str = "roofline"):
        """(graphviz.Digraph, GraphSummary) of the kernels; UsageError when there are none."""
        if self.fusions is None:
            reason = self.stages.compile_error.headline if self.stages.compile_error else "not compiled"
            raise UsageError(f"no kernel graph: {reason}")
        return build_dot(self.fusions, self.graph_title(), max_nodes=max_nodes, expand=tuple(expand), color=color)

    def svg(self, *, max_nodes: int = 200, expand: tuple[str, ...] = ()) -> str:
        """The kernel graph as SVG text (needs Graphviz's ``dot``; UsageError says how to get it)."""
        graph, summary = self.kernel_graph(max_nodes=max_nodes, expand=expand)
        return render_svg(graph, summary.nodes).decode()

    def export_svg(self, path, *, max_nodes: int = 200, expand: tuple[str, ...] = ()):
        """Write the kernel graph as SVG, whole or not at all (as ``inspector export --svg``); returns the path."""
        return write_atomic(path, self.svg(max_nodes=max_nodes, expand=expand))

    def to_json(self, texts: tuple[str, ...] = ("jaxpr", "stablehlo", "hlo", "mosaic"), indent: int | None = 2) -> str:
        """The Report as JSON text (``inspector export --json`` writes the same, every stage text included)."""
        return json_text.dumps(self.to_dict(texts=texts), indent=indent)

    def to_dict(self, texts: tuple[str, ...] = ()) -> dict[str, Any]:
        """JSON-ready dict. Stage texts are large, so only those named in ``texts`` are included."""
        stages = dataclasses.asdict(self.stages)
        for name in (*STAGES, "mosaic", "kernel_dumps"):
            if name not in texts:
                stages.pop(name, None)
        stages["op_counts"] = self.stages.op_counts
        if "jaxpr" not in texts:
            stages.pop("jaxpr_eqns", None)
        return {
            "ok": self.ok,
            "target": dataclasses.asdict(self.target),
            "inputs": [dataclasses.asdict(i) for i in self.inputs],
            "chip": {"name": self.chip.name, "kind": self.chip.kind, "description": self.chip.description,
                     **({"chosen": self.chip_reason} if self.chip_reason else {})},
            "stages": stages,
            "findings": [dataclasses.asdict(f) for f in self.findings],
            **(_fusions_json(self.fusions) if self.fusions else {}),
            **({"pallas": [dataclasses.asdict(p) for p in self.pallas]} if self.pallas is not None else {}),
            **({"gpu_kernels": [dataclasses.asdict(k) for k in self.gpu_kernels]} if self.chip.target_config else {}),
            **({"memory": dataclasses.asdict(self.memory)} if self.memory is not None else {}),
            **(_collectives_json(self.collectives) if self.collectives is not None else {}),
            **(_passes_json(self.passes) if self.passes is not None else {}),
            **(self.mosaic_passes.to_json() if self.mosaic_passes is not None else {}),
            **(_time_json(self.time) if self.time is not None else {}),
            **({"measured": dataclasses.asdict(self.measured)} if self.measured is not None else {}),
            **({"fixes": dataclasses.asdict(self.fixes)} if self.fixes is not None else {}),
        }


def with_measurement(report: Report, measured: Measurement) -> Report:
    """The report with each kernel's device time on the chip (matched by HLO op name: the chip's
    compile and the deviceless one are the same program), the program's in the totals; the ops
    measured that the Report has no kernel for are listed in ``measured.unmatched``."""
    findings, fusions = report.findings, report.fusions
    if fusions is not None:  # a new analysis of new kernels: the Report's own are never edited
        names = {k.name for k in fusions.kernels}
        def per_launch(name: str) -> float | None:
            found = measured.kernel(name)
            return found.seconds / found.launches if found is not None and found.launches else None
        kernels = [dataclasses.replace(k, measured_seconds=per_launch(k.name)) for k in fusions.kernels]
        fusions = dataclasses.replace(fusions, kernels=kernels, totals={**fusions.totals, "measured_seconds": measured.seconds})
        measured = dataclasses.replace(measured, unmatched=sorted(k.name for k in measured.kernels if k.name not in names))
        if measured.unmatched and len(measured.unmatched) > len(measured.kernels) / 2:
            findings = by_severity(findings + [Finding(
                "info", "measured-unmatched",
                f"{len(measured.unmatched)} of the {len(measured.kernels)} ops run on {measured.chip} have no kernel of "
                "this name in the deviceless compile (the chip's compile differs): their times are in the program's "
                "total only", view="fusions", data={"ops": measured.unmatched[:20]})])
    return dataclasses.replace(report, measured=measured, fusions=fusions, findings=findings)


def _time_json(estimate: TimeEstimate) -> dict:
    """``bundles[]`` (each kernel's VLIW bundles) and ``time_estimate`` (how the figures were
    made: method, budget, the compiles it took); the per-kernel figures are in ``kernels[]``."""
    data = dataclasses.asdict(estimate)
    return {"bundles": data.pop("bundles"), "time_estimate": {k: data[k] for k in ("chip", "clock_hz", "method", "budget",
                                                                                    "jobs", "totals", "cached")}}


def with_time(report: Report, estimate: TimeEstimate) -> Report:
    """The report with libtpu's estimate: each kernel's cycles, seconds, their source and kind
    (a kernel whose loops run a number of times known only when it runs: a floor), the program's
    totals, the estimate's findings."""
    loops = uncounted_loops(report, estimate)
    if loops:
        floors = {f.kernel for f in loops}
        kernels = [as_floor(t) if t.name in floors else t for t in estimate.kernels]
        estimate = dataclasses.replace(estimate, kernels=kernels, totals=time_totals(kernels, get_chip(estimate.chip)))
    fusions = report.fusions
    if fusions is not None:  # a new analysis of new kernels: the Report's own are never edited
        def timed(kernel):
            t = estimate.kernel(kernel.name)
            return kernel if t is None else dataclasses.replace(
                kernel, estimated_cycles=t.estimated_cycles, estimated_seconds=t.estimated_seconds,
                estimate_source=t.estimate_source, estimate_kind=t.estimate_kind, high_seconds=t.high_seconds)
        totals = dict(fusions.totals)
        for name in ("estimated_seconds", "estimate_kind", "high_seconds", "floor_share"):
            totals[name] = estimate.totals.get(name)
        fusions = dataclasses.replace(fusions, kernels=[timed(k) for k in fusions.kernels], totals=totals)  # type: ignore[arg-type]  # the same keys
    findings = report.findings + estimate.findings + loops
    return dataclasses.replace(report, time=estimate, fusions=fusions, findings=by_severity(findings))


def uncounted_loops(report: Report, estimate: TimeEstimate) -> list[Finding]:
    """A Pallas kernel whose body loops a number of times known only at run time (paged attention
    over a sequence's pages): neither libtpu's static simulation nor the roofline can count the
    trips, so the figure is a floor, which may be far below the chip's (paged attention on the v5e:
    25 us simulated, 540-1,700 us measured). Kernels are paired with their pallas_call by source line."""
    loops = {p.call.source: p.call.unknown_loops for p in report.pallas or [] if p.call.unknown_loops}
    sources = {k.name: k.source for k in report.fusions.kernels} if report.fusions is not None else {}
    found = []
    for t in estimate.kernels:
        source = sources.get(t.name)
        if source not in loops or t.estimated_seconds is None:
            continue
        found.append(Finding(
            "warning", "libtpu-loop-unknown",
            f"{t.name}: its body runs {loops[source]} while loop(s) whose trip count is known only when the "
            f"kernel runs; neither libtpu's static simulation nor the roofline can count the trips, so its "
            f"{t.estimated_seconds * 1e6:,.1f} us is a floor, which may be far below the chip's time (measure on a TPU: --measure)",
            kernel=t.name, view="fusions",
            data={"chip": estimate.chip, "loops": loops[source]}))
    return found


def _passes_json(log: PassLog) -> dict:
    """``passes[]`` (one entry per dump, in order), ``pass_diff`` (--pass), and ``origins``: each
    instruction of the final HLO -> the index in ``passes`` of the step that created it."""
    data = dataclasses.asdict(log)
    return {"passes": data.pop("steps"), "pass_diff": data.pop("diff"), "origins": data.pop("origins"),
            "pass_log": data}


def _inputs(target: Target) -> list[InputInfo]:
    import jax

    found = []
    named = dict(zip(target.arg_names, target.args), **target.kwargs)
    for top, tree in named.items():
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
                name = top + jax.tree_util.keystr(path)
                shape = [int(d) for d in leaf.shape]
                nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
                found.append(InputInfo(name=name, type=hlo_type(str(leaf.dtype), tuple(shape)), shape=shape,
                                       dtype=str(leaf.dtype), bytes=nbytes))
    return found


def _stage_findings(stages: Stages) -> list[Finding]:
    found = []
    if stages.compile_error is not None:
        err = stages.compile_error
        found.append(err.finding(stages.backend, view="memory" if err.hbm else "overview", buffers=stages.buffers))
    if stages.pallas_interpreted:
        found.append(Finding("info", "pallas-interpreted",
                             "Pallas kernels are interpreted on the CPU backend: the HLO shows the interpreter, "
                             "not Mosaic. Use --target tpu-v5e (or another TPU) for the real kernel", view="hlo"))
    if stages.simulated_chip and stages.simulated_chip != SIMULATED_CHIP:
        found.append(Finding("info", "simulated-chip", f"the program asks for SparseCores, which {SIMULATED_CHIP} has not: "
                             f"on the CPU its chip lookups (get_tpu_info) answered for {stages.simulated_chip}",
                             view="pallas", data={"chip": stages.simulated_chip}))
    return found


def _fusions_json(analysis: FusionAnalysis) -> dict:
    data = dataclasses.asdict(analysis)
    return {"kernels": data.pop("kernels"), "totals": data.pop("totals"), "xla_cost": data.pop("xla_cost"),
            "fusion_analysis": data}


def _collectives_json(analysis: CollectiveAnalysis) -> dict:
    data = dataclasses.asdict(analysis)
    return {"collectives": data.pop("collectives"), "collective_totals": data}


def budget_chips(target_chip: Chip) -> tuple[list[Chip], list[Chip]]:
    """(chips to budget, chips whose rules become findings): every TPU generation is budgeted;
    layout and budget findings are for the target chip, none for the local backend."""
    family = family_of(target_chip)
    return family.budget_chips(target_chip), [target_chip] if family.info.memory is not None else []


def build_report(target: Target, chip: Chip, captured: Capture, *, fusions: bool = False, pallas: bool = False,
                 roofline_chip: Chip | None = None, collectives: bool = False, passes: PassLog | None = None) -> Report:
    """Gather the analyses into a Report; ``fusions`` adds the kernel analysis of the optimized HLO
    (its roofline on ``roofline_chip``, else on the target chip); ``pallas`` the BlockSpec walk,
    layout rules and VMEM budgets of every pallas_call (it also feeds the fusions' Pallas traffic);
    ``passes`` (from a compile with pass dumps) names the pass that created each kernel."""
    info = TargetInfo(spec=target.spec, function=target.name, file=short_path(target.file) if target.file else None,
                      line=target.line, params=dict(target.params), param_choices=dict(target.param_choices),
                      reference=target.reference_name)
    stages = family_of(chip).explain_failure(captured, chip).stages  # a failed kernel explained (idempotent: make_report did)
    findings = _stage_findings(stages)
    kernels = None
    if pallas or fusions:
        kernels, unread = analyse_pallas(captured.program, *budget_chips(chip))
        findings += unread + [f for k in kernels for f in k.findings]
        # compiled: the compiler's verdict stands (its advice names the target's block params)
        kernels, findings = family_of(chip).defer_to_compiler(kernels, findings, chip, stages, target.params)
    # Kernels lower in program order, each as a custom call named as Mosaic was told (stages.mosaic)
    names = ([m.name for m in stages.mosaic] if len(stages.mosaic) == len(kernels or [])
             else [k.call.name for k in kernels or []])
    # the roofline, a lower bound, takes the least of what branches decide: flops and DMAs, but never
    # fewer bytes than the kernel's outputs (an emit_pipeline over HBM refs whose copies all sit
    # under branches printed a 6.4 us roofline for a kernel that writes 268 MB)
    estimated = lambda k: (k.call.cost_estimate or {}).get("bytes_accessed")  # what XLA counts for the kernel
    traffic = [PallasFigures(name, cost_estimate_bytes=estimated(k)) if k.walk.skipped
               else PallasFigures(name, k.walk.hbm_bytes_read, k.walk.hbm_bytes_written, k.flops, k.transcendentals,
                                  k.flops_range[0] if k.flops_range else k.flops,
                                  max(k.walk.least_hbm_bytes, sum(o.array_bytes for o in k.call.operands if o.must_write)),
                                  int8_matmuls=k.call.int8_matmuls, mxu_passes=k.call.mxu_passes,
                                  work=k.call.grid_work, cost_estimate_bytes=estimated(k))
               for name, k in zip(names, kernels or [])]
    analysis = None
    if fusions and stages.hlo:
        try:
            analysis = analyse_fusions(stages.hlo, roofline_chip or chip, stages.cost, traffic or None)
        except Exception as err:  # an HLO this parser cannot follow: a finding, the other views still show
            findings.append(Finding("warning", "analysis-failed", f"could not analyse the fusions of the optimized HLO: "
                                    f"{type(err).__name__}: {err}; the other views still hold", view="fusions",
                                    data={"what": "fusions", "why": str(err)}))
    memory, memory_findings = analyse_memory(stages, chip)
    findings += memory_findings
    comms = None
    if collectives and stages.hlo:
        try:
            comms = analyse_collectives(stages.hlo, chip, stages.mesh, stages.devices)
        except Exception as err:  # an HLO this parser cannot follow: a finding, the other views still show
            findings.append(Finding("warning", "analysis-failed", f"could not list the collectives of the optimized HLO: "
                                    f"{type(err).__name__}: {err}; the other views still hold", view="collectives",
                                    data={"what": "collectives", "why": str(err)}))
    if analysis is not None and passes is not None:
        for k in analysis.kernels:
            k.made_by = passes.made_by(k.name)
    return Report(target=info, inputs=_inputs(target), chip=chip, stages=stages, findings=by_severity(findings),
                  fusions=analysis, pallas=kernels if pallas else None, memory=memory, collectives=comms, passes=passes)


def make_report(target: Target, chip: Chip, needs: Needs, *, roofline_chip: Chip | None = None, use_cache: bool = True,
                memo: bool = True, pass_select: str | None = None, time_budget: Budget | None = None) -> Report:
    """Capture ``target``'s stages on ``chip`` and gather the Report: the one path the CLI's verbs
    and the Python API take, so both give the same figures for the same target. ``needs`` says what
    is computed (the view table's ``Needs``: the compile, the kernel analyses, the compiler's buffer
    assignment, XLA's or Mosaic's pass dumps, libtpu's time estimate); ``pass_select`` picks the
    pass whose diff to keep; the time estimate stays within ``time_budget`` (the roofline alone off
    TPU); ``roofline_chip``: the chip whose roofline the kernels get (else ``chip``'s)."""
    log = None
    if needs.passes:
        captured, log = capture_with_passes(target, backend_for(chip), jaxpr_text=needs.jaxpr_text, select=pass_select)
    else:
        # a GPU's Pallas view shows XLA:GPU's verdict per kernel: compiled (a second or the cache)
        compile = needs.compile or (needs.pallas and bool(chip.target_config))
        captured = capture(target, backend_for(chip), compile=compile, jaxpr_text=needs.jaxpr_text, use_cache=use_cache,
                           memo=memo, buffers=needs.buffers)
    family_of(chip).explain_failure(captured, chip)  # the capture keeps what a failed kernel left; its family explains it
    if log is not None and pass_select is not None and not log.steps:
        raise UsageError(f"--pass {pass_select}: the compile wrote no pass dumps"
                         + (f" ({captured.stages.compile_error.headline})" if captured.stages.compile_error else ""))
    report = build_report(target, chip, captured, fusions=needs.fusions, pallas=needs.pallas, roofline_chip=roofline_chip,
                          collectives=needs.collectives, passes=log)
    if needs.mosaic_passes and family_of(chip).info.can.kernel_dumps and (captured.stages.mosaic or captured.stages.compile_error is not None):
        mosaic = capture_mosaic_passes(target, chip, select=None if needs.passes else pass_select)
        seen = {(f.code, f.message) for f in report.findings}  # a compile error the ordinary compile found too
        report = dataclasses.replace(report, mosaic_passes=mosaic, findings=by_severity(
            report.findings + [f for f in mosaic.findings if (f.code, f.message) not in seen]))
    elif needs.mosaic_passes and pass_select is not None and not needs.passes:  # a Mosaic pass asked for where Mosaic never ran
        why = ("Mosaic runs only when lowering for a TPU: add --target tpu-v5e" if not family_of(chip).info.can.kernel_dumps else
               "its pallas_calls are given interpret=True, so Mosaic never runs" if report.pallas else
               "the function has no Pallas kernel, so Mosaic never runs (--view passes diffs XLA's passes)")
        raise UsageError(f"--pass {pass_select} does not apply: {why}")
    if needs.time and report.fusions is not None:
        report = with_time(report, family_of(chip).estimate_time(target, chip, budget=time_budget, kernels=report.fusions.kernels,
                                                  use_cache=use_cache is True, hlo=report.stages.hlo,
                                                  compile_seconds=report.stages.timings.get("compiler_s")))
    return report
