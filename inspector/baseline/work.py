"""The figures of a baseline computed: per target, in a child process of its own (jax and the
user's code run there; libtpu aborting one target's compile is that target's error, the others
still computed), each chip's Report boiled down to the figures of ``record.FIGURES``."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from typing import Callable

from ..base.errors import InspectorError, UsageError
from ..base.findings import TIME_CODES
from ..request import Cache
from ..request import Request as ReportRequest
from ..results.view_table import Needs, get_view
from .record import kernel_keys, target_label, time_figure
from ..families import family_of


def template(sets: list[str] | tuple[str, ...] = (), *, time: bool = False, time_budget: float | None = None,
             cache: Cache | bool | str = Cache.ON, debug: bool = False) -> ReportRequest:
    """The Request every target of a baseline is computed by (its spec and chip put in per target):
    the fusions view's figures (kernels, totals, each Pallas kernel's VMEM), libtpu's time with
    ``time`` (within ``time_budget`` seconds), the --set values every target takes."""
    return ReportRequest("", needs=get_view("fusions").needs | Needs(time=time), sets=tuple(str(s) for s in sets),
                         time_budget=time_budget or None, cache=Cache(cache), memo=False, debug=debug)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """What to compute: the targets (file.py:function), the chips, and the template Request each
    target's Report is made by (``template``: its sets, time, budget, cache)."""

    specs: list[str]
    chips: list[str]
    template: ReportRequest = dataclasses.field(default_factory=template)

    @property
    def sets(self) -> list[str]:
        return list(self.template.sets)

    @property
    def time(self) -> bool:
        return self.template.needs.time

    @property
    def time_budget(self) -> float | None:
        return self.template.time_budget


@dataclasses.dataclass(kw_only=True)
class Computed:
    """One target's entry of the baseline, and the compiles it took (how many the cache answered)."""

    label: str
    entry: dict
    compiles: int = 0
    from_cache: int = 0
    refused: int = 0  # compiles libtpu refused: never cached, so compiled again every run
    usage: str | None = None  # a usage error (no such function, a bad --set): refused as check refuses it, never recorded
    compiled: list[str] = dataclasses.field(default_factory=list)  # "target on chip" the compiler ran for (no cache entry)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:400]


class _Sources:
    """A kernel's source line as a baseline keys it: the same in every checkout of the same code.
    A file of an imported module is named by the module (``inspector/kernels/matmul.py:53``, wherever
    the package lies: site-packages, an editable checkout, another clone); any other file (the
    target's own, loaded under a name of our own) as the compile names it, relative to the working
    folder when under it."""

    def __init__(self) -> None:
        self._modules: dict[str, str] | None = None

    def _by_file(self) -> dict[str, str]:
        if self._modules is None:
            self._modules = {}
            for name, module in list(sys.modules.items()):
                file = getattr(module, "__file__", None)
                if not isinstance(file, str) or not file.endswith(".py") or name == "__main__" \
                        or name.startswith("_inspected_"):  # the target's file: compilation/user_files.py
                    continue
                tail = "/__init__.py" if os.path.basename(file) == "__init__.py" else ".py"
                self._modules.setdefault(os.path.abspath(file), name.replace(".", "/") + tail)
        return self._modules

    def __call__(self, source: str | None) -> str | None:
        if not source:
            return source
        file, sep, line = source.rpartition(":")
        if not sep or not line.isdigit():
            return source
        found = self._by_file().get(os.path.abspath(file))
        return f"{found}:{line}" if found else source


def chip_entry(report, time: bool) -> dict:
    """The figures of one Report (one target on one chip): the program's and each kernel's."""
    from ..pallas.analysis import compiler_scoped_vmem
    from ..pallas.vmem import estimate_fits

    chip = report.chip
    stages = report.stages
    stable = _Sources()
    err = stages.compile_error
    pallas = report.pallas or []
    budgets = {p.call.source: [b for b in p.budgets if b.chip == chip.name] for p in pallas
               if not (p.call.interpret and family_of(chip).info.can.kernels)}
    every = [b for found in budgets.values() for b in found]
    peak = max(every, key=lambda b: b.total_bytes, default=None)
    program: dict = {"compiled": err is None, "error_kind": None, "vmem_estimate": peak.total_bytes if peak else None,
                     "vmem_fits": estimate_fits(every) if every else None,
                     "findings": sorted({f.code for f in report.findings})}
    # the compiler's figure per pallas_call, from its family: what XLA:GPU asked for where it refused
    by_call = report.compiler_vmem
    if err is not None:
        program["error_kind"] = _error_kind(report)
        if err.mosaic is not None:  # the failing kernel and its line: what the gate's row names
            program["error_kernel"], program["error_source"] = err.mosaic.kernel, stable(err.mosaic.source)
        asked = err.vmem.used_bytes if err.vmem else max(by_call.values(), default=None)
        program["compiler_vmem"] = asked
        program["compiler_fits"] = False if asked is not None else None
    elif stages.hlo:
        used = compiler_scoped_vmem(stages.hlo) or list(by_call.values())
        program["compiler_vmem"] = max(used) if used and max(used) > 0 else None
        program["compiler_fits"] = True if pallas else None
    if report.memory is not None:
        program["hbm_device"], program["hbm_fits"] = report.memory.required_bytes, report.memory.fits
    kernels: dict = {}
    if report.fusions is not None:
        totals = report.fusions.totals
        program["hbm_bytes"], program["flops"] = totals.get("hbm_bytes"), totals.get("flops")
        if time:
            program["time"] = time_figure(totals.get("estimated_seconds"), totals.get("estimate_kind"),
                                          totals.get("high_seconds"))
        bundles = {b.kernel: b for b in report.time.bundles} if report.time is not None else {}
        found = report.fusions.kernels
        launches = _launches(report)
        sources = [stable(k.source) for k in found]
        for key, k, source in zip(kernel_keys([(k.kind, k.name, s) for k, s in zip(found, sources)]), found, sources):
            figures: dict = {"name": k.name, "kind": k.kind, "source": source, "hbm_bytes": k.hbm_bytes,
                             "flops": k.flops}
            if k.source in budgets and budgets[k.source]:
                figures["vmem_estimate"] = max(b.total_bytes for b in budgets[k.source])
            if k.compiler_scoped_vmem_bytes:
                figures["compiler_vmem"] = k.compiler_scoped_vmem_bytes
            launch = launches.get(k.name)
            if launch is not None:  # a GPU kernel: its launch's shared memory, ptxas's registers and spills
                for figure, value in (("compiler_vmem", launch.shared_memory_bytes), ("registers", launch.registers),
                                      ("spill_bytes", launch.spill_bytes)):
                    if value is not None and (value or figure != "compiler_vmem"):
                        figures[figure] = value
            if time:
                figures["time"] = time_figure(k.estimated_seconds, k.estimate_kind, k.high_seconds)
                b = bundles.get(k.name)
                if b is not None:
                    figures["bundles"] = b.bundles_per_step if b.bundles_per_step is not None else b.bundles
                    figures["spills"] = b.spill_stores + b.spill_fills
            kernels[key] = figures
    return {"program": program, "kernels": kernels}


def _error_kind(report) -> str:
    """The refusal's finding code: the family's own where it says the compile error in its words
    (XLA:GPU's shared-memory refusal: compile-shared-memory-oom), else the compile error's."""
    err = report.stages.compile_error
    own = err.finding(report.chip.name, view="overview").code
    codes = [f.code for f in report.findings if f.severity == "error" and f.code.startswith("compile-")]
    return own if own in {f.code for f in report.findings} or not codes else codes[0]


def _launches(report) -> dict:
    """HLO kernel name -> its GPU launch (grid, shared memory, registers, spills); {} off a GPU."""
    gpu = report.gpu_kernels
    return family_of(report.chip).launches_by_kernel(report.fusions.kernels, gpu, report.stages.hlo) if gpu else {}


def compute_target(spec: str, request: Request) -> Computed:
    """In the child (or here, in tests): the target's entry over every chip of the request."""
    import inspector.base.environment as environment

    environment.prepare(debug=request.template.debug)
    from ..base.chips import get_chip
    from ..compilation.target import load_target
    from ..request import report_for

    label = target_label(spec, request.sets)
    out = Computed(label=label, entry={"spec": spec, "sets": sorted(request.sets)})
    with contextlib.redirect_stdout(sys.stderr):  # what the user's code prints never mixes with ours
        try:
            target = load_target(spec, sets=list(request.sets))
        except UsageError as err:  # as check refuses it: never stored as the target's figures
            out.usage = _one_line(err)
            return out
        except InspectorError as err:
            out.entry["error"] = _one_line(err)
            return out
        chips: dict = {}
        for name in request.chips:
            chip = get_chip(name)
            try:
                report = report_for(dataclasses.replace(request.template, spec=target, chip=chip.name))
            except UsageError as err:
                out.usage = _one_line(err)
                return out
            except InspectorError as err:
                chips[name] = {"error": _one_line(err)}
                continue
            except Exception as err:  # the user's code raised (a bug of theirs): this chip's error
                chips[name] = {"error": f"{type(err).__name__}: {_one_line(err)}"}
                continue
            out.compiles += 1
            if report.stages.compile_cached:
                out.from_cache += 1
            elif report.stages.compile_error is not None:
                out.refused += 1
            else:
                out.compiled.append(f"{label} on {name}")
            chips[name] = chip_entry(report, request.time)
        out.entry["chips"] = chips
    return out


def compute(request: Request, *, isolate: bool = True, progress: Callable[[int, str], None] | None = None) -> list[Computed]:
    """Every target of the request, each in a child process of its own (``isolate``). A usage error
    of a target (no such function, a --set it does not take) is raised, as ``check`` raises it."""
    found = []
    for i, spec in enumerate(request.specs):
        if progress is not None:
            progress(i, spec)
        if not isolate:
            found.append(compute_target(spec, request))
        else:
            from ..base.child_process import ChildFailed, run_isolated

            try:
                found.append(run_isolated(compute_target, spec, request))
            except ChildFailed as err:  # libtpu ended the process: this target's error
                found.append(Computed(label=target_label(spec, request.sets),
                                      entry={"spec": spec, "sets": sorted(request.sets), "error": _one_line(err)}))
        if found[-1].usage is not None:  # what check refuses is refused here too: nothing is recorded or compared
            raise UsageError(found[-1].usage)
    return found


TIMED = ("time", "bundles", "spills")  # the figures libtpu's simulation gives (--time; T in the terminal UI)


def _untimed(figures: dict) -> dict:
    """A program's or kernel's figures as a run without libtpu's time gives them."""
    kept = {k: v for k, v in figures.items() if k not in TIMED}
    if isinstance(kept.get("findings"), list):
        kept["findings"] = [code for code in kept["findings"] if code not in TIME_CODES]
    return kept


def against_report(baseline, report, spec: str, sets: list[str], tolerances: dict | None = None):
    """One Report (the terminal UI's: one target on one chip) against the baseline's entry for the
    same target and chip: a Comparison, or a sentence saying why there is none. Without libtpu's
    time in the report, the timed figures are left out (and a note says how to add them)."""
    from .compare import DEFAULT_TOLERANCES, compare
    from .record import Baseline, new_baseline
    from .targets import norm_spec

    label = target_label(norm_spec(spec), sets)
    chip = report.chip.name
    entry = baseline.targets.get(label)
    where = baseline.path or "the baseline"
    if entry is None:
        held = ", ".join(list(baseline.targets)[:5]) or "none"
        return f"{where} has no entry for {label} (it holds {held}{', ...' if len(baseline.targets) > 5 else ''})"
    if "error" in entry:
        return f"{where}: {label} raised when it was saved ({entry['error']})"
    found = entry.get("chips", {}).get(chip)
    if found is None:
        return f"{where} has no figures for {label} on {chip} (it holds {', '.join(entry.get('chips', {})) or 'no chip'})"
    timed = report.time is not None
    if not timed and "error" not in found:  # compare what the report has: no timed figure, no finding of the time's
        found = {"program": _untimed(found.get("program", {})),
                 "kernels": {key: _untimed(kernel) for key, kernel in found.get("kernels", {}).items()}}
    one = {"spec": entry.get("spec"), "sets": entry.get("sets", [])}
    before = Baseline({**baseline.data, "chips": [chip], "targets": {label: {**one, "chips": {chip: found}}}}, baseline.path)
    now = new_baseline([chip], timed, {label: {**one, "chips": {chip: chip_entry(report, timed)}}})
    result = compare(before, now, tolerances or DEFAULT_TOLERANCES, covered=[], chips=[chip])
    if baseline.time and not timed:
        result.notes.append("the baseline has libtpu's time too: T estimates it here, and compares it")
    return result
