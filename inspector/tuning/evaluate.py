"""One candidate on one chip, where jax runs (a worker process, a Ray task, or the caller's own
process for the Python API): trace and lower it, prune it when the VMEM estimate says its blocks
and scratch alone pass the limit, else compile it and ask its family for its time (libtpu's
simulation on a TPU; on a GPU, the floor of what XLA:GPU compiled). Whatever happens
to it is a row: a failure of the candidate never stops the sweep. The capture and the analyses
(numpy, jax) are imported by the functions that run them: the sweep's own process imports this
module (through the pool and Ray) and never runs them."""
from __future__ import annotations

import dataclasses
import time

import inspector.compilation.compile_cache as compile_cache
import inspector.tuning.fingerprint as fingerprint
import inspector.tuning.store as store

from ..families import backend_for, family_of
from ..base.chips import get_chip
from ..base.errors import InspectorError, TargetFailure
from ..jax_internals import tracing
from ..base.units import fmt_estimate
from ..libtpu import Budget
from ..libtpu.model import ESTIMATE, RANGE
from ..libtpu.estimate import STOPPED
from ..base.specs import hlo_type, parse_specs
from ..compilation.target import load_target
from .candidates import TunePlan
from .model import FAILED, PRUNED, RANKED, REFUSED, TIMED_BY, UNTIMED, TuneRow, sound_row

PALLAS_KINDS = ("custom-call:pallas", "custom-call:mosaic")


# ----------------------------------------------------------------------------- the plan


def plan_target(spec: str, args: list[str], grid_names: list[str]) -> TunePlan:
    """Load the target once (per shape given) and say what can be swept."""
    import inspect as pyinspect

    target = load_target(spec, args=args[0] if args else None)
    sig = _signature(target.fn)
    takes = None
    defaults: dict = {}
    if sig is not None:
        params = sig.parameters.values()
        takes = None if any(p.kind is p.VAR_KEYWORD for p in params) else [p.name for p in params]
        defaults = {p.name: p.default for p in params if p.default is not pyinspect.Parameter.empty}
    defaults.update({name: values[0] for name, values in target.param_choices.items() if values})
    shapes: list[tuple[str, str | None]]
    if args:
        shapes = [(" ".join(str(s) for s in parse_specs(text)), text) for text in args]
    elif target.options.get("shapes") is not None:
        listed = target.options["shapes"]
        if not isinstance(listed, (list, tuple)) or not all(isinstance(t, str) for t in listed) or not listed:
            raise InspectorError(f"{spec}: INSPECT shapes must be a list of shape-spec strings, e.g. "
                                 "[\"bf16[1024,1024] bf16[1024,1024]\", \"bf16[4096,4096] bf16[4096,4096]\"]")
        shapes = [(" ".join(str(s) for s in parse_specs(text)), text) for text in listed]
    else:
        import jax

        leaves = jax.tree.leaves((tuple(target.args), dict(target.kwargs)))
        label = " ".join(hlo_type(str(x.dtype), tuple(x.shape)) for x in leaves)
        shapes = [(label, None)]
    choices = {name: list(values) for name, values in target.param_choices.items()}
    return TunePlan(spec=spec, choices=choices, defaults=defaults, takes=takes, shapes=shapes, closure=fingerprint.closure())


def _signature(fn):
    import inspect as pyinspect

    try:
        return pyinspect.signature(fn)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- one candidate


def evaluate_task(task: dict) -> dict:
    """A worker's unit of work (plain data in, plain data out): the row of one candidate."""
    chip = get_chip(task["chip"])
    start = time.perf_counter()
    base = dict(shape=task["shape"], chip=chip.name, params=task["swept"], default=task["default"])
    try:
        target = load_target(task["spec"], args=task["args"], sets=[], params=task["params"])
    except InspectorError as err:
        return dataclasses.asdict(TuneRow(**base, status=FAILED, reason=_one_line(str(err)), code="target",
                                          wall_seconds=time.perf_counter() - start))
    row = evaluate_target(target, chip, base, budget=task["budget"], cache=task["cache"])
    return dataclasses.asdict(row)


def evaluate_target(target, chip, base: dict, *, budget: dict, cache) -> TuneRow:
    """The row of ``target`` (one candidate's parameters baked in) on ``chip``."""
    from ..compilation.stages import captures_forgotten_after, lowered_program

    start = time.perf_counter()
    # the lowered module's locations leave the inspector's frames out (capture() asks the same):
    # else a worker's first candidate would carry them and key its row apart from the rest
    tracing.exclude_own_frames()

    def done(**fields) -> TuneRow:
        return TuneRow(**base, **fields, wall_seconds=round(time.perf_counter() - start, 3))

    with captures_forgotten_after():  # a sweep lowers hundreds of candidates: each one's go when it is done
        try:
            captured, lowered, module_text = lowered_program(target, backend_for(chip))
        except TargetFailure as err:
            return done(status=FAILED, reason=_one_line(str(err)), code="raised")
        if lowered is None:  # Mosaic (or the lowering) refused the kernel
            refused = family_of(chip).explain_failure(captured, chip).stages.compile_error
            assert refused is not None  # a lowering that failed says why
            return done(status=REFUSED, reason=_one_line(refused.headline), code=refused.finding(chip.name, "pallas").code)
        key = store.row_key(module_text, chip.name, budget)
        if cache is True and (hit := store.load(key, store.ROW)) is not None:
            cached = sound_row({**hit, **base}) if isinstance(hit, dict) else None
            if cached is not None:  # else another structure or a wrong type: computed afresh, below
                return dataclasses.replace(cached, cached=True, wall_seconds=None)
        stopped: list[str] = []
        row = _compile_and_time(target, chip, captured, base, budget, cache, done, stopped)
        if cache and not stopped:  # a figure a busy machine cut short is not the program's: never kept
            stored = {k: v for k, v in dataclasses.asdict(row).items() if k not in base}
            store.store(key, store.ROW, stored)
        return row


def _compile_and_time(target, chip, captured, base, budget, cache, done, stopped: list[str]) -> TuneRow:
    from ..pallas.analysis import analyse_pallas, compiler_scoped_vmem
    from ..results.report import build_report, uncounted_loops
    from ..compilation.stages import capture

    family = family_of(chip)
    reports, _ = analyse_pallas(captured.program, [chip], [chip])
    budgets = [b for r in reports for b in r.budgets if b.chip == chip.name]
    estimate = max((b.total_bytes for b in budgets), default=None)
    limit = max((b.limit_bytes for b in budgets), default=None)
    over = [b for b in budgets if b.verdict == "over"]
    # pruned where a compile and libtpu's simulation would take a minute to say so; XLA:GPU's
    # deviceless compile takes seconds, and its refusal gives the compiler's own figure
    if over and family.info.can.time == "simulated":
        b = max(over, key=lambda b: b.certain_bytes)
        return done(status=PRUNED, code="vmem-over-limit", vmem_estimate_bytes=estimate, vmem_limit_bytes=limit,
                    reason=f"{b.kernel}: needs at least {_mib(b.certain_bytes)} of VMEM, over the {b.limit_source} "
                           f"{_mib(b.limit_bytes)} (the estimate; not compiled)")
    use_compile_cache = compile_cache.REFRESH if cache == compile_cache.REFRESH else bool(cache) and compile_cache.enabled()
    compiled = capture(target, backend_for(chip), jaxpr_text=False, use_cache=use_compile_cache)  # type: ignore[arg-type]  # REFRESH is capture's own value
    stages = family.explain_failure(compiled, chip).stages
    calls = [r.call.name for r in reports]
    if stages.compile_error is not None:
        err = stages.compile_error
        # the compiler's own figure: libtpu's VMEM used, or what XLA:GPU asked for in its refusal
        asked = err.vmem.used_bytes if err.vmem else max(family.compiler_verdict(stages, calls, []).values(), default=None)
        # the family's own words where it has them (XLA:GPU's refusal with the kernel and what to change)
        said = next((f for f in family.defer_to_compiler(reports, [], chip, stages)[1]
                     if f.severity == "error" and f.code.startswith("compile-")), None)
        code = said.code if said is not None else err.finding(chip.name, "pallas").code
        return done(status=REFUSED, reason=_one_line(said.message if said is not None else err.headline), code=code,
                    vmem_estimate_bytes=estimate, vmem_limit_bytes=limit, vmem_bytes=asked)
    report = build_report(target, chip, compiled, fusions=True, pallas=True)
    kernels = report.fusions.kernels if report.fusions is not None else None
    times = family.estimate_time(target, chip, budget=Budget(**budget), kernels=kernels, use_cache=cache is True,
                                 hlo=stages.hlo, compile_seconds=stages.timings.get("compiler_s"))
    stopped.extend(job.label for job in times.jobs if job.status in STOPPED)
    # libtpu's scoped VMEM per Mosaic kernel, else the family's figure per call (XLA:GPU's launch shared memory)
    used = ([u for u in compiler_scoped_vmem(stages.hlo or "") if u > 0]
            or [u for u in report.compiler_vmem.values() if u and u > 0])
    seconds = times.totals.get("estimated_seconds")
    bound, spills = _bound_and_spills(times)
    notes = [_one_line(f"{f.code}: {f.message}") for f in times.findings
             if f.code not in ("register-spills", "mxu-underused")]
    loops = uncounted_loops(report, times)
    if loops:  # a figure that counts a run-time loop once: ranking by it picks at random
        return done(status=UNTIMED, code="no-estimate", notes=notes, vmem_bytes=max(used, default=None),
                    vmem_estimate_bytes=estimate, vmem_limit_bytes=limit,
                    reason=f"{loops[0].kernel}: its body loops a number of times known only when it runs, which "
                           "neither libtpu's simulation nor the roofline counts; not ranked (tune --measure ranks by the chip)")
    kind = times.totals.get("estimate_kind")
    if seconds is None or kind != TIMED_BY.get(family.info.can.time or "", ESTIMATE):
        # a floor is a lower bound and a range two: ranked among estimates either would win unfairly
        # (on a GPU every candidate's figure is a floor: floors are ranked among floors)
        return done(status=UNTIMED, code="no-estimate", notes=notes, vmem_bytes=max(used, default=None),
                    vmem_estimate_bytes=estimate, vmem_limit_bytes=limit,
                    hbm_bytes=int(report.fusions.totals["hbm_bytes"]) if report.fusions else None,
                    reason=_why_untimed(times, chip, seconds, kind))
    return done(status=RANKED, estimated_seconds=seconds, estimated_cycles=times.totals.get("estimated_cycles"),
                estimate_source=times.method, estimate_kind=kind, vmem_bytes=max(used, default=None), vmem_estimate_bytes=estimate,
                vmem_limit_bytes=limit, hbm_bytes=int(report.fusions.totals["hbm_bytes"]) if report.fusions else None,
                bound=bound, spills=spills, notes=notes)


def _why_untimed(times, chip, seconds: float | None, kind) -> str:
    """Why a candidate has no estimate to rank by: what its figure is, and what made it so."""
    shown = f" ({fmt_estimate(seconds, kind, times.totals.get('high_seconds'))})" if seconds else ""
    if family_of(chip).info.can.time != "simulated":  # a GPU's floor: none where no kernel has bytes or flops
        return f"no time floor for it on {chip.name}{shown}: nothing its kernels move or compute is known; not ranked"
    codes = {f.code: f for f in times.findings}
    if "libtpu-guard-unknown" in codes and kind == RANGE:
        return f"its time is a range{shown}: run-time values decide how often its guarded code runs; not ranked"
    if "libtpu-no-time" in codes:
        return f"libtpu's simulation gave it 0 cycles (it does not time this kernel on this chip): a floor{shown}; not ranked"
    if (found := codes.get("libtpu-refused") or codes.get("libtpu-aborted")) is not None:
        return (f"libtpu's simulation aborted on {chip.name} ({(found.data or {}).get('reason') or 'SIGABRT'}): "
                f"a floor{shown}; not ranked")
    return f"libtpu gave no time for it within the budget: a floor{shown}; not ranked: raise --time-budget"


def _bound_and_spills(times) -> tuple[str | None, int | None]:
    """The unit bounding the slowest Pallas kernel (the slowest kernel when there is none): libtpu's
    bundles', else the floor's (a GPU's), and the spill stores and fills per grid step over the Pallas kernels."""
    bundles = {b.kernel: b for b in times.bundles}
    timed = [k for k in times.kernels if k.estimated_seconds is not None]
    pallas = [k for k in timed if k.kind in PALLAS_KINDS]
    slowest = max(pallas or timed, key=lambda k: k.estimated_seconds * k.repeat, default=None)
    bound = bundles[slowest.name].bound if slowest is not None and slowest.name in bundles else None
    if bound is None and slowest is not None and (slowest.note or "").startswith("bound: "):  # a GPU floor's unit
        bound = slowest.note.split(";")[0].removeprefix("bound: ")
    spilled = [bundles[k.name] for k in pallas if k.name in bundles]
    spills = sum(b.spill_stores + b.spill_fills for b in spilled) if spilled else None
    return bound, spills


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _one_line(text: str, limit: int = 300) -> str:
    line = next((l.strip() for l in str(text).splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."
