"""`inspector fix`: each change the Pallas analysis and the chip's family propose (pallas/fixes.py,
families/*/), built at trace time (jax_internals/variants.py), compiled deviceless per chip with
the compiler's verdict (libtpu's VMEM and time estimate, XLA:GPU's shared memory), and run in
interpret mode against the unfixed kernel; ranked by gain. Beside ``checking`` and
``comparison``: it drives the capture and the analyses of every layer below."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..base.chips import Chip, get_chip
from ..base.fix_model import Change, Fix, FixResult, Refusal, Trial
from ..compilation import fix_store
from ..run.fix_numerics import Numerics, judge
from ..pallas.fixes import buffered_changes, order_changes, param_changes
from ..compilation.target import Target
from ..results.report import make_report
from ..results.view_table import Needs
from ..families import backend_for, family_of

KIND_ORDER = {"estimate": 0, "range": 1, "floor": 2}  # a floor is never ranked as an estimate
MOST_LIMIT_TRIES = 4  # vmem_limit_bytes raised by a quarter each time the compiler still refuses
TRIAL_SCHEMA = 2  # what a kept trial holds (2: the variant's error findings): older entries are misses


NOT_TRIED = ("the grid's axis order where the body reads pl.program_id (a reorder would edit the body)",
             "deeper buffering (pl.Buffered(3)) where DMAs wait")
NOT_TRIED_GPU = ("more num_stages, and a grid order, on a GPU (a time floor, all a GPU gets here, cannot tell a deeper pipeline or another order better)",)


def _trial(target: Target, chip: Chip, *, time: bool, use_cache: bool | str) -> Trial:
    """The program compiled for ``chip`` (and timed): from the cache when the same lowered program
    was tried with the same asks (``fix_store``: refusals too)."""
    k = _trial_key(target, chip, time) if use_cache else None
    if use_cache is True and k is not None and (hit := fix_store.load(k)) is not None:
        try:
            return Trial(**hit)
        except TypeError:  # not what this version writes: a miss
            pass
    trial, keep = _compiled(target, chip, time=time, use_cache=use_cache)
    if k is not None and keep:
        fix_store.store(k, dataclasses.asdict(trial))
    return trial


def _trial_key(target: Target, chip: Chip, time: bool) -> str | None:
    from ..compilation.stages import lowered_program
    from ..libtpu import Budget

    _, lowered, text = lowered_program(target, backend_for(chip))  # the compile's own lowering, memoised
    return None if lowered is None else fix_store.key("trial", TRIAL_SCHEMA, time, Budget().as_dict(), module_text=text,
                                                      chip=chip.name)


def _compiled(target: Target, chip: Chip, *, time: bool, use_cache: bool | str) -> tuple[Trial, bool]:
    """The trial, and whether to keep it (not where a busy machine stopped libtpu's estimate)."""
    from ..libtpu import Budget
    from ..libtpu.estimate import STOPPED

    # make_report, not request.report_for: a Request may ask for fixes, which run from here
    report = make_report(target, chip, Needs(compile=True, fusions=True, pallas=True, time=time), use_cache=use_cache,  # type: ignore[arg-type]  # REFRESH too
                         time_budget=Budget())
    error = report.stages.compile_error
    limits = [b.limit_bytes for k in report.pallas or [] for b in k.budgets if b.chip == chip.name]
    trial = Trial(chip=chip.name, compiles=error is None, vmem_limit_bytes=max(limits) if limits else None,
                  errors=[f"{f.code}: {f.message}" for f in report.findings if f.severity == "error"])
    if error is not None:
        trial.compile_error = error.headline
        kernel = (error.mosaic.kernel if error.mosaic else None) or (error.vmem.kernel if error.vmem else None)
        trial.kernel = next((k.call.name for k in report.pallas or [] if kernel and k.call.name in kernel),
                            report.pallas[0].call.name if report.pallas and len(report.pallas) == 1 else None)
        if error.vmem is not None:
            trial.vmem_bytes, trial.vmem_limit_bytes = error.vmem.used_bytes, error.vmem.limit_bytes
        else:  # XLA:GPU's refusal: what it asked for is each kernel's compiler figure (families/gpu/verdict.py)
            trial.vmem_bytes = max(report.compiler_vmem.values(), default=None)
        return trial, True
    used = [v for v in report.compiler_vmem.values() if v and v > 0]
    trial.vmem_bytes = max(used) if used else None
    totals = report.time.totals if report.time is not None else {}
    trial.seconds, trial.estimate_kind = totals.get("estimated_seconds"), totals.get("estimate_kind")
    trial.high_seconds = totals.get("high_seconds")
    return trial, not any(job.status in STOPPED for job in (report.time.jobs if report.time is not None else []))


def variant(target: Target, change: Change) -> Target:
    """The target with the change: its params, or its function rebuilt at trace time."""
    if change.kind == "params":
        assert isinstance(change.value, dict)
        return dataclasses.replace(target, params={**target.params, **change.value})
    from ..jax_internals.variants import changed_function

    return dataclasses.replace(target, fn=changed_function(target.fn, tuple(target.params), [change]))


def load_variant(load: Callable[[], Target], change: Change | None) -> Target:
    """``load()`` with the change (picklable with ``functools.partial``: --measure's child loads it)."""
    target = load()
    return target if change is None else variant(target, change)


def _limit_trials(target: Target, change: Change, chip: Chip, **how) -> tuple[Change, Trial]:
    """vmem_limit_bytes from the compiler's own figure, raised by a quarter (whole MiB) while it
    still refuses for VMEM and the chip holds it: the smallest tried that compiles."""
    trial = _trial(variant(target, change), chip, **how)
    for _ in range(MOST_LIMIT_TRIES - 1):
        if trial.compiles or trial.vmem_bytes is None:
            break
        assert isinstance(change.value, int)
        mib = 2 ** 20
        value = max(change.value + mib, -(-max(trial.vmem_bytes, change.value * 5 // 4) // mib) * mib)
        if chip.vmem_bytes is not None and value > chip.vmem_bytes:
            break
        change = dataclasses.replace(change, value=value)
        trial = _trial(variant(target, change), chip, **how)
    return change, trial


def _tried(target: Target, change: Change, chips: list[Chip], checker: Numerics | None, how: dict) -> Fix:
    """The change compiled (and timed) on each chip, its numerics judged: one variant built, traced
    and lowered once for all of it (a vmem_limit is raised while the compiler still refuses)."""
    trials = []
    changed = variant(target, change)
    for chip in chips:
        if change.kind == "vmem_limit":
            change, trial = _limit_trials(target, change, chip, **how)
            changed = variant(target, change)
        else:
            trial = _trial(changed, chip, **how)
        trials.append(trial)
    fix = Fix(change=change, trials=trials)
    verdict = judge(change.kind, changed, any(t.compiles for t in trials), checker)
    if verdict is not None:
        fix.numerics, fix.numerics_detail = verdict
    return fix


def _gain(before: Trial, after: Trial) -> float | None:
    """Time before / after, where both are figures of one kind (a floor against a floor)."""
    if not (after.compiles and before.compiles and before.seconds and after.seconds):
        return None
    if before.estimate_kind != after.estimate_kind:
        return None
    return before.seconds / after.seconds


def _rank_key(fix: Fix, chip: str) -> tuple:
    trial = next((t for t in fix.trials if t.chip == chip), None)
    if trial is None or not trial.compiles:
        return (3, 0, 0.0, False)
    kind = KIND_ORDER.get(trial.estimate_kind or "", 3)
    seconds = trial.measured_seconds if trial.measured_seconds is not None else trial.seconds
    return (0 if chip in fix.recommended else 1, kind if trial.measured_seconds is None else -1,
            seconds if seconds is not None else float("inf"), fix.change.last_resort)


def _codes(trial: Trial) -> set[str]:
    return {e.partition(":")[0] for e in trial.errors}


def new_errors(trial: Trial, base: Trial) -> list[str]:
    """The variant's error findings the unfixed program has no finding of that code for (the grid
    walk's unwritten rows of a block size that does not divide): the change made them."""
    return [e for e in trial.errors if e.partition(":")[0] not in _codes(base)]


def _recommend(fix: Fix, before: dict[str, Trial]) -> None:
    """Recommended on a chip where it compiles, with no error finding the unfixed program lacks,
    its numerics hold, and it either makes a program the compiler refused compile, clears an error
    finding of the program as it is (a block size that leaves rows unwritten), or takes less time
    (estimates of one kind, or measured). A gain is kept either way: the row shows it."""
    if fix.numerics in ("differ", "failed"):
        return
    for trial in fix.trials:
        base = before[trial.chip]
        if not trial.compiles:
            continue
        if new_errors(trial, base):
            fix.wrong[trial.chip] = new_errors(trial, base)[0]
        elif base.compiles and (cleared := sorted(_codes(base) - _codes(trial))):
            fix.clears[trial.chip] = ", ".join(cleared)
        gain = _gain(base, trial)
        if gain is not None:
            fix.gains[trial.chip] = gain
        if trial.measured_seconds is not None and base.measured_seconds:
            fix.gains[trial.chip] = base.measured_seconds / trial.measured_seconds
        if trial.chip not in fix.wrong and (not base.compiles or trial.chip in fix.clears
                                            or fix.gains.get(trial.chip, 0.0) > 1.0):
            fix.recommended.append(trial.chip)


def _pipelined(chips: list[Chip]) -> list[Chip]:
    """The chips whose family pipelines as Mosaic does: Buffered(1) and a grid order are tried there."""
    return [c for c in chips if family_of(c).info.can.pipeline_fixes]


def _proposals(target: Target, chips: list[Chip], before: dict[str, Trial], use_cache) -> tuple[list[tuple[Change, list[Chip]]], list[Refusal]]:
    """Each change with the chips to try it on, and the changes refused before any compile."""
    from ..compilation.stages import capture
    from ..pallas.discovery import read_program

    calls, _ = read_program(capture(target, backend_for(chips[0]), compile=False, use_cache=use_cache).program)
    pipelined = _pipelined(chips)
    tried: list[tuple[Change, list[Chip]]] = [(c, pipelined) for c in buffered_changes(calls)] if pipelined else []
    refused: list[Refusal] = []
    for chip in chips:
        trial = before[chip.name]
        needed = trial.vmem_bytes if trial.compiles is False else None  # what the compiler said it needs
        changes, no = family_of(chip).fixes(calls, chip, needed_bytes=needed, kernel=trial.kernel)
        tried += [(c, [chip]) for c in changes]
        refused += no
    if pipelined:
        orders, no = order_changes(calls)
        tried += [(c, pipelined) for c in orders]
        refused += no
    tried += [(c, chips) for c in param_changes(target.params, target.param_choices)]
    return tried, refused


def _interpreted_as(chips: list[Chip]) -> tuple[Chip, str, Chip | None]:
    """The chip interpret mode simulates for the numerics, how a verdict says it, and the chip
    whose lowering keys a kept verdict: the first chip interpret mode answers for; else the default
    TPU's interpreter, which runs a Pallas-Triton kernel on the CPU as it runs any kernel (the
    kernel asks no chip's lookups), keyed on the first chip's own lowering."""
    from ..run.run import simulated_chip

    chip = next((c for c in chips if family_of(c).info.can.simulate), None)
    if chip is not None:
        return chip, f"{chip.name}, interpret mode", None
    return simulated_chip(None), "Pallas interpret mode on the CPU", chips[0]


def set_names(sets) -> tuple[str, ...]:
    """The params a caller set (NAME=VALUE, as --set gives them): a fix of one is the caller's to
    make, said as a change of it and never patched."""
    return tuple(str(s).partition("=")[0].strip() for s in sets)


def fixes_on(target: Target, chip: Chip, *, sets, use_cache: bool | str, pick: str) -> FixResult:
    """The fixes beside one report's findings (show --fixes, the UI's F): ``run_fix`` on its TPU
    chip; ``pick`` says how the caller names another chip."""
    from ..base.errors import UsageError

    if not family_of(chip).info.can.fix:
        raise UsageError(f"fixes are compiled for the chip: {chip.name} has no compiler here ({pick})")
    return run_fix(target, [chip], use_cache=use_cache, fixed=set_names(sets))


def run_fix(target: Target, chips: list[Chip], *, numerics: bool = True, time: bool = True,
            use_cache: bool | str = True, measure: Callable[[Change | None, Chip], float] | None = None,
            fixed: tuple[str, ...] = ()) -> FixResult:
    """Every proposed change tried on ``chips``. ``measure(change, chip)``: the program's device
    time with the change (None: unfixed) on the attached TPU, for the top fixes (--measure).
    ``fixed``: the params the command line set (--set): a change to one is said as a change of
    the command, never written into the source."""
    from ..base.progress import tell
    from ..libtpu.runner import kept_sessions

    how: dict = {"time": time, "use_cache": use_cache}
    with kept_sessions():  # libtpu's dump children start once for every estimate of the run, not per variant
        tell("compiling the unfixed program")
        before = {chip.name: _trial(target, chip, **how) for chip in chips}
        proposed, refused = _proposals(target, chips, before, use_cache)
        checker = Numerics(target, *_interpreted_as(chips), use_cache=use_cache) if numerics else None
        fixes = []
        for i, (change, on) in enumerate(proposed):  # minutes in all: the terminal UI says which one runs
            tell(f"trying fix {i + 1} of {len(proposed)}: {change.label}")
            fixes.append(_tried(target, change, on, checker, how))
    for fix in fixes:
        _recommend(fix, before)
    if measure is not None:
        _measure_top(fixes, before, chips[0], measure)
    fixes.sort(key=lambda f: [_rank_key(f, c.name) for c in chips])
    infos = {family_of(c).info for c in chips}
    pipelined = _pipelined(chips)
    result = FixResult(target=target.spec, chips=[c.name for c in chips], before=list(before.values()), fixes=fixes,
                       refused=refused, best={}, not_tried=[*(NOT_TRIED if pipelined else ()),
                                                            *(NOT_TRIED_GPU if len(pipelined) < len(chips) else ())],
                       memory=" / ".join(sorted({i.memory or "memory" for i in infos})),
                       compiler=" / ".join(sorted({i.compiler for i in infos})),
                       timed_by=" / ".join(sorted({i.compiler if i.can.time == "simulated" else "floor" for i in infos})))
    choose(result, target.params, fixed)
    return result


UNPATCHED = ("order",)  # a grid reorder edits grid= and every index_map: --patch does not write it


def on_command_line(change: Change, fixed: tuple[str, ...]) -> bool:
    """Whether the change sets a param the command line set (--set): the command decides it."""
    return change.kind == "params" and isinstance(change.value, dict) and any(k in fixed for k in change.value)


def choose(result: FixResult, params: dict, fixed: tuple[str, ...]) -> None:
    """The best fix per chip, the best the source can express (--patch), and, where the best
    changes a --set, the command line that makes it; whether every chip is served."""
    for chip in result.chips:
        ranked = sorted((i for i, f in enumerate(result.fixes) if chip in f.recommended),
                        key=lambda i: _rank_key(result.fixes[i], chip))
        if not ranked:
            continue
        result.best[chip] = ranked[0]
        in_source = [i for i in ranked if not on_command_line(result.fixes[i].change, fixed)
                     and result.fixes[i].change.kind not in UNPATCHED]
        if in_source:
            result.best_in_source[chip] = in_source[0]
            result.in_source[chip] = in_source
        change = result.fixes[ranked[0]].change
        if on_command_line(change, fixed):
            assert isinstance(change.value, dict)
            result.command_line[chip] = " ".join(f"change --set {k}={params.get(k)} to --set {k}={v}"
                                                 for k, v in change.value.items())
    before = {t.chip: t for t in result.before}
    result.ok = all((before[c].compiles and not before[c].errors) or c in result.best for c in result.chips)
    result.answers = _answers(result, before)


REFUSAL_CODES = ("compile-vmem-oom", "vmem-over-limit", "vmem-may-exceed", "compile-shared-memory-oom")  # answered by a fix that compiles
PADDING_CODES = ("mxu-padding",)  # answered by a block size


def _answers(result: FixResult, before: dict[str, Trial]) -> dict[str, list[int]]:
    """Which fixes answer which findings: a refused program's VMEM findings, the best fix and the
    best the source can express; MXU padding, the best block size."""
    answers: dict[str, list[int]] = {}
    for chip in result.chips:
        if not before[chip].compiles and chip in result.best:
            top, source = [result.best[chip]], result.best_in_source.get(chip)
            if source is not None and source != top[0]:
                top.append(source)
            for code in REFUSAL_CODES:
                answers[f"{code}@{chip}"] = top
        sizes = sorted((i for i, f in enumerate(result.fixes) if f.change.kind == "params" and chip in f.recommended),
                       key=lambda i: _rank_key(result.fixes[i], chip))
        for code in PADDING_CODES:
            if sizes:
                answers[f"{code}@{chip}"] = sizes[:1]
    return answers


MEASURED_TOP = 3  # --measure: the fixes measured on the chip, best estimated first


def _measure_top(fixes: list[Fix], before: dict[str, Trial], chip: Chip, measure: Callable) -> None:
    """The unfixed program and the top recommended fixes on ``chip``, measured; ranked again by that."""
    top = sorted((f for f in fixes if chip.name in f.recommended), key=lambda f: _rank_key(f, chip.name))[:MEASURED_TOP]
    if before[chip.name].compiles:
        before[chip.name].measured_seconds = measure(None, chip)
    for fix in top:
        trial = next(t for t in fix.trials if t.chip == chip.name)
        trial.measured_seconds = measure(fix.change, chip)
        fix.recommended.remove(chip.name)
        fix.gains.pop(chip.name, None)
        _recommend_on(fix, trial, before[chip.name])


def _recommend_on(fix: Fix, trial: Trial, base: Trial) -> None:
    gain = (base.measured_seconds / trial.measured_seconds if base.measured_seconds and trial.measured_seconds
            else _gain(base, trial))
    if gain is not None:
        fix.gains[trial.chip] = gain
    if trial.compiles and trial.chip not in fix.wrong and (not base.compiles or trial.chip in fix.clears
                                                           or (gain or 0.0) > 1.0):
        fix.recommended.append(trial.chip)


def holding_patch(result: FixResult, others: list[tuple[str, Target]], *, given: str,
                  use_cache: bool | str) -> tuple[Change | None, str]:
    """The best fix the source can express on the first chip that also holds at each of ``others``
    (the other input sets the file names, as (what they are, the target at them)): a patch edits a
    kernel every caller shares. A vmem_limit is raised there too while the compiler refuses; any
    other change must compile there with no error finding the unfixed program lacks. Each is a
    compile (no time): (the change, what the patch holds for), or (None, why none holds). ``given``
    names the input set the fixes were tried at ("--args")."""
    chip = get_chip(result.chips[0])
    failed = []
    for index in result.in_source.get(chip.name, []):
        change, why, held = result.fixes[index].change, None, [given]
        for said, other in others:
            base = _trial(other, chip, time=False, use_cache=use_cache)
            if change.kind == "vmem_limit":
                change, trial = _limit_trials(other, change, chip, time=False, use_cache=use_cache)
            else:
                trial = _trial(variant(other, change), chip, time=False, use_cache=use_cache)
            if trial.compiles and new_errors(trial, base):
                why = f"at {said}: {new_errors(trial, base)[0]}"
            elif not trial.compiles and base.compiles is not False:
                why = f"at {said} it does not compile: {trial.compile_error}"
            held.append(said if trial.compiles else f"{said} (refused there with or without it)")
            if why:
                break
        if why is None:
            return change, "holds at " + " and ".join(held)
        failed.append(f"{result.fixes[index].change.label}: {why}")
    return None, "no fix the source can express holds at every input set the file names (" + "; ".join(failed) + ")"
