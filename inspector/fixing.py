"""`inspector fix`: each change the Pallas analysis proposes (pallas/fixes.py), built at trace
time (jax_internals/variants.py), compiled deviceless per chip with libtpu's verdict, VMEM and
time estimate, and run in TPU interpret mode against the unfixed kernel; ranked by gain. Beside
``checking`` and ``comparison``: it drives the capture and the analyses of every layer below."""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from .base.chips import Chip
from .base.fix_model import Change
from .base.display import html
from .pallas.fixes import Refusal, buffered_changes, param_changes, semantics_changes, vmem_limit_change
from .compilation.target import Target
from .request import Request, report_for
from .view_table import Needs

KIND_ORDER = {"estimate": 0, "range": 1, "floor": 2}  # a floor is never ranked as an estimate
MOST_LIMIT_TRIES = 4  # vmem_limit_bytes raised by a quarter each time the compiler still refuses


@dataclasses.dataclass(kw_only=True)
class Trial:
    """A program (unfixed, or with one change) compiled for one chip."""

    chip: str
    compiles: bool | None  # libtpu's verdict (None: no compile, e.g. the change does not apply)
    compile_error: str | None = None  # its headline when refused
    vmem_bytes: int | None = None  # the compiler's scoped VMEM figure (needed, when refused)
    vmem_limit_bytes: int | None = None  # the limit it was held to
    seconds: float | None = None  # libtpu's time for the whole program
    estimate_kind: str | None = None  # estimate | floor | range ("Time on kernels nobody calibrated")
    high_seconds: float | None = None  # the top of a range
    measured_seconds: float | None = None  # --measure: device time on the attached TPU
    kernel: str | None = None  # the pallas_call the compiler refused, where it says


@dataclasses.dataclass(kw_only=True)
class Fix:
    change: Change
    trials: list[Trial]  # one per chip the change applies to
    numerics: str = "not checked"  # match | differ | failed | not checked (interpret mode vs the unfixed kernel)
    numerics_detail: str = ""
    gains: dict[str, float] = dataclasses.field(default_factory=dict)  # per chip: time before / after (same kind)
    recommended: list[str] = dataclasses.field(default_factory=list)  # the chips it is recommended for


@dataclasses.dataclass(repr=False, kw_only=True)
class FixResult:
    target: str
    chips: list[str]
    before: list[Trial]  # the unfixed program per chip
    fixes: list[Fix]  # ranked: recommended first, by gain
    refused: list[Refusal]
    best: dict[str, int]  # chip -> index in ``fixes`` of the best fix there
    # chip -> index of the best fix the source can express (not a param the command line set):
    # what --patch writes; the same as ``best`` unless the best changes a --set
    best_in_source: dict[str, int] = dataclasses.field(default_factory=dict)
    # chip -> "change --set block_q=4096 to --set block_q=1024", where the best fix changes a param
    # the command line set (the user's command decides it: no patch of the source can)
    command_line: dict[str, str] = dataclasses.field(default_factory=dict)
    not_tried: list[str]  # changes this version does not try, said once
    ok: bool = False  # every chip compiles as it is, or has a recommended fix
    patch: str | None = None  # --patch: the best fix's unified diff
    patch_note: str = ""  # what the patch does, or why none was written

    def __repr__(self) -> str:
        return f"<FixResult {self.target}: {len(self.fixes)} fixes, {len(self.refused)} refused>"

    def _repr_html_(self) -> str:
        return html(self)


NOT_TRIED = ("the grid's axis order (the kernel body reads pl.program_id by position: a reorder edits the body)",
             "deeper buffering (pl.Buffered(3)) where DMAs wait")


def _trial(target: Target, chip: Chip, *, time: bool, use_cache: bool | str) -> Trial:
    report = report_for(Request(target, chip.name, needs=Needs(compile=True, fusions=True, pallas=True, time=time),
                                cache=use_cache))
    error = report.stages.compile_error
    limits = [b.limit_bytes for k in report.pallas or [] for b in k.budgets if b.chip == chip.name]
    trial = Trial(chip=chip.name, compiles=error is None, vmem_limit_bytes=max(limits) if limits else None)
    if error is not None:
        trial.compile_error = error.headline
        kernel = (error.mosaic.kernel if error.mosaic else None) or (error.vmem.kernel if error.vmem else None)
        trial.kernel = next((k.call.name for k in report.pallas or [] if kernel and k.call.name in kernel),
                            report.pallas[0].call.name if report.pallas and len(report.pallas) == 1 else None)
        if error.vmem is not None:
            trial.vmem_bytes, trial.vmem_limit_bytes = error.vmem.used_bytes, error.vmem.limit_bytes
        return trial
    used = [v for v in report.compiler_vmem.values() if v and v > 0]
    trial.vmem_bytes = max(used) if used else None
    totals = report.time.totals if report.time is not None else {}
    trial.seconds, trial.estimate_kind = totals.get("estimated_seconds"), totals.get("estimate_kind")
    trial.high_seconds = totals.get("high_seconds")
    return trial


def variant(target: Target, change: Change) -> Target:
    """The target with the change: its params, or its function rebuilt at trace time."""
    if change.kind == "params":
        assert isinstance(change.value, dict)
        return dataclasses.replace(target, params={**target.params, **change.value})
    from .jax_internals.variants import changed_function

    return dataclasses.replace(target, fn=changed_function(target.fn, tuple(target.params), [change]))


def load_variant(load: Callable[[], Target], change: Change | None) -> Target:
    """``load()`` with the change (picklable with ``functools.partial``: --measure's child loads it)."""
    target = load()
    return target if change is None else variant(target, change)


class _Numerics:
    """The unfixed kernel's outputs in TPU interpret mode, computed once; each variant's compared
    with them at the diff's tolerances (INSPECT's atol/rtol, else the dtype's)."""

    def __init__(self, target: Target, sim: Chip, seed: int = 0):
        from .compilation.target_inputs import make_inputs

        self.target, self.sim = target, sim
        self.args, self.kwargs = make_inputs(target, seed)
        self._unfixed: tuple | None = None

    def _run(self, target: Target):
        import jax

        from .run.interpreted import run

        kernel = jax.jit(functools.partial(target.fn, **target.params))
        outcome = run(kernel, self.args, self.kwargs, self.sim, cores=1, check=False)
        return outcome.output, outcome.error

    def verdict(self, target: Target) -> tuple[str, str]:
        from .run.trees import compare_trees

        if self._unfixed is None:
            self._unfixed = self._run(self.target)
        ref, ref_err = self._unfixed
        if ref_err is not None:
            return "not checked", f"the unfixed kernel does not run in interpret mode: {_line(ref_err)}"
        out, err = self._run(target)
        if err is not None:
            return "failed", f"raised in interpret mode: {_line(err)}"
        options = self.target.options
        leaves, findings = compare_trees(out, ref, [], options.get("atol"), options.get("rtol"))
        bad = [leaf for leaf in leaves if not leaf.ok]
        if bad or any(f.severity == "error" for f in findings):
            worst = bad[0] if bad else None
            return "differ", (f"{worst.output}: {worst.bad} elements off (max abs error {worst.max_abs:.3g}, atol "
                              f"{worst.atol:.3g}, rtol {worst.rtol:.3g})" if worst else findings[0].message)
        worst_abs = max((leaf.max_abs for leaf in leaves), default=0.0)
        return "match", f"max abs error {worst_abs:.3g} against the unfixed kernel ({self.sim.name}, interpret mode)"


def _line(err: BaseException) -> str:
    text = (str(err) or type(err).__name__).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


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
        return (3, 0, 0.0)
    kind = KIND_ORDER.get(trial.estimate_kind or "", 3)
    seconds = trial.measured_seconds if trial.measured_seconds is not None else trial.seconds
    return (0 if chip in fix.recommended else 1, kind if trial.measured_seconds is None else -1,
            seconds if seconds is not None else float("inf"))


def _recommend(fix: Fix, before: dict[str, Trial]) -> None:
    """Recommended on a chip where it compiles, its numerics hold, and it either makes a program
    the compiler refused compile or takes less time (estimates of one kind, or measured)."""
    if fix.numerics in ("differ", "failed"):
        return
    for trial in fix.trials:
        base = before[trial.chip]
        if not trial.compiles:
            continue
        gain = _gain(base, trial)
        if gain is not None:
            fix.gains[trial.chip] = gain
        if trial.measured_seconds is not None and base.measured_seconds:
            fix.gains[trial.chip] = base.measured_seconds / trial.measured_seconds
        if not base.compiles or fix.gains.get(trial.chip, 0.0) > 1.0:
            fix.recommended.append(trial.chip)


def _proposals(target: Target, chips: list[Chip], before: dict[str, Trial], use_cache) -> tuple[list[tuple[Change, list[Chip]]], list[Refusal]]:
    """Each change with the chips to try it on, and the changes refused before any compile."""
    from .compilation.backends import Backend
    from .compilation.stages import capture
    from .pallas.discovery import read_program

    calls, _ = read_program(capture(target, Backend(chips[0]), compile=False, use_cache=use_cache).program)
    tried: list[tuple[Change, list[Chip]]] = [(c, chips) for c in buffered_changes(calls)]
    refused: list[Refusal] = []
    for chip in chips:
        trial = before[chip.name]
        if trial.compiles is False and trial.vmem_bytes is not None:
            limits, no = vmem_limit_change(calls, chip, trial.vmem_bytes, trial.kernel)
            tried += [(c, [chip]) for c in limits]
            refused += no
        parallel, no = semantics_changes(calls, chip)
        tried += [(c, [chip]) for c in parallel]
        refused += no
    tried += [(c, chips) for c in param_changes(target.params, target.param_choices)]
    return tried, refused


def run_fix(target: Target, chips: list[Chip], *, numerics: bool = True, time: bool = True,
            use_cache: bool | str = True, measure: Callable[[Change | None, Chip], float] | None = None,
            fixed: tuple[str, ...] = ()) -> FixResult:
    """Every proposed change tried on ``chips``. ``measure(change, chip)``: the program's device
    time with the change (None: unfixed) on the attached TPU, for the top fixes (--measure).
    ``fixed``: the params the command line set (--set): a change to one is said as a change of
    the command, never written into the source."""
    how: dict = {"time": time, "use_cache": use_cache}
    before = {chip.name: _trial(target, chip, **how) for chip in chips}
    proposed, refused = _proposals(target, chips, before, use_cache)
    checker = _Numerics(target, chips[0]) if numerics else None
    fixes = []
    for change, on in proposed:
        trials = []
        for chip in on:
            if change.kind == "vmem_limit":
                change, trial = _limit_trials(target, change, chip, **how)
            else:
                trial = _trial(variant(target, change), chip, **how)
            trials.append(trial)
        fix = Fix(change=change, trials=trials)
        if checker is not None and any(t.compiles for t in trials):
            fix.numerics, fix.numerics_detail = checker.verdict(variant(target, change))
        _recommend(fix, before)
        fixes.append(fix)
    if measure is not None:
        _measure_top(fixes, before, chips[0], measure)
    fixes.sort(key=lambda f: [_rank_key(f, c.name) for c in chips])
    result = FixResult(target=target.spec, chips=[c.name for c in chips], before=list(before.values()), fixes=fixes,
                       refused=refused, best={}, not_tried=list(NOT_TRIED))
    choose(result, target.params, fixed)
    return result


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
        in_source = [i for i in ranked if not on_command_line(result.fixes[i].change, fixed)]
        if in_source:
            result.best_in_source[chip] = in_source[0]
        change = result.fixes[ranked[0]].change
        if on_command_line(change, fixed):
            assert isinstance(change.value, dict)
            result.command_line[chip] = " ".join(f"change --set {k}={params.get(k)} to --set {k}={v}"
                                                 for k, v in change.value.items())
    before = {t.chip: t for t in result.before}
    result.ok = all(before[c].compiles or c in result.best for c in result.chips)


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
    if trial.compiles and (not base.compiles or (gain or 0.0) > 1.0):
        fix.recommended.append(trial.chip)
