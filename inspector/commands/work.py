"""What each verb computes, in the child process: runs jax and the user's code and returns plain
data (a Report, CheckResult, DiffResult, Compare, Checkup) for the parent to render.

Imported inside the verb's work, so that ``inspector --help`` (which imports this module to build
its parser) stays quick: the target loader, the analyses (numpy, jax), the child-process runner."""
from __future__ import annotations

import contextlib
import sys

import inspector.base.environment as environment

from ..compilation.backends import Backend
from ..base.chips import CHIPS, INTERPRET_EXAMPLE, get_chip, parse_targets
from ..base.errors import TargetFailure, UsageError
from ..base.tempdirs import temp_folder
from ..base.user_code import describe_error, reraise_interrupt
from ..request import Request, report_for, use_cache
from ..verbs.rules import diff_simulated_chip, doctor_chips
from ..results.view_table import Needs
from . import verb_table
from .requests import compare_sides, request_from, show_request


@contextlib.contextmanager
def _exits_are_failures(target, doing: str):
    """sys.exit() (any BaseException but a real Ctrl-C) in the user's function is a failure of
    that function with its code, never our exit."""
    try:
        yield
    except Exception:
        raise
    except BaseException as err:
        reraise_interrupt(err)
        raise TargetFailure(describe_error(err, target.file, doing)) from err


def _use_cache(opts):
    return use_cache(True, refresh=bool(opts.no_cache))


def _load(opts):
    from ..compilation.target import load_target

    return load_target(opts.target, args=opts.args, ref=getattr(opts, "ref", None), sets=opts.set,
                       mesh=getattr(opts, "mesh", None), shard=getattr(opts, "shard", None))


def _report(request: Request):
    """Load the target, capture its stages and gather the Report: the one path every verb takes."""
    target = request.target()
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        return report_for(request, target)


def work_show(opts):
    return _report(show_request(opts))




def work_compare(opts):
    from ..verbs.comparison import compare_reports

    reports = [_report(side) for side in compare_sides(opts, Needs(compile=True, fusions=True, pallas=True, time=opts.time))]
    return compare_reports(*reports)


def work_export(opts):
    return _report(request_from(opts, Needs(compile=True, jaxpr_text=bool(opts.json_path), fusions=True, pallas=True,
                                            collectives=True, time=opts.time)))


def work_check(opts):
    import functools

    from ..verbs.checking import run_check

    chips = parse_targets(opts.chip)
    target = _load(opts)
    # several TPU compiles: each in a process of its own, so that libtpu aborting one is that chip's finding
    apart = (functools.partial(_compile_apart, opts)
             if opts.isolate and not opts.estimate_only and sum(c.is_tpu for c in chips) > 1 else None)
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        result = run_check(target, chips, estimate_only=opts.estimate_only, use_cache=_use_cache(opts),
                           compile_apart=apart)
        if opts.sweep:
            from ..pallas.sweep import sweep

            result.sweep = sweep(target, [c for c in chips if c.is_tpu or c.kind == "gpu"])
    return result


def _compile_apart(opts, chip):
    """The compiled Stages of the target on ``chip``, made in a child process whose stderr (where
    libtpu logs) goes to a file: shown with --debug, else kept from the user's terminal. A child
    that ends without an answer (libtpu's abort) raises CompilerAborted with the log's tail."""
    import os

    from ..verbs.checking import CompilerAborted
    from ..base.child_process import ChildFailed, run_isolated

    with temp_folder("chip-log") as folder:
        log = os.path.join(folder, "stderr.txt")
        try:
            return run_isolated(_compile_chip, opts, chip.name, stderr_to=log)
        except ChildFailed as err:
            code = getattr(err, "returncode", None)
            if code is None:
                raise
            raise CompilerAborted(chip.name, code, _read_log(log)) from err
        finally:
            if opts.debug and os.path.exists(log):
                sys.stderr.write(_read_log(log))


def _read_log(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _compile_chip(opts, chip_name: str):
    """In the child: trace, lower and compile the target for one chip; its Stages (plain data)."""
    environment.prepare(debug=opts.debug)
    from ..compilation.stages import capture
    from ..mosaic.explain import explain_capture

    target = _load(opts)
    chip = get_chip(chip_name)
    with contextlib.redirect_stdout(sys.stderr), _exits_are_failures(target, f"raised while tracing {target.name}"):
        # explained here: what explains a failure (the traced program) stays in this process
        return explain_capture(capture(target, Backend(chip), compile=True, use_cache=_use_cache(opts), memo=False,
                                       buffers=True), chip).stages


def work_fix(opts):
    import dataclasses
    import functools

    from ..verbs.fixing import run_fix, set_names

    chips = parse_targets(opts.chip)
    target = _load(opts)
    measure = functools.partial(_measure_fix, opts) if opts.measure else None
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        result = run_fix(target, chips, numerics=not opts.no_numerics, time=not opts.no_time, use_cache=_use_cache(opts),
                         measure=measure, fixed=set_names(opts.set or []))
    if opts.patch:
        patch, note, encoding = _fix_patch(result, target, opts, _other_inputs(opts))
        result = dataclasses.replace(result, patch=patch, patch_note=note, patch_encoding=encoding)
    return result


def _other_inputs(opts) -> list:
    """The other input sets the file names for the target (INSPECT's args, where --args replaced
    them): a patch of a shared kernel must hold there too."""
    from ..compilation.target import load_target

    if opts.args is None:
        return []
    try:
        return [("INSPECT's args", load_target(opts.target, ref=getattr(opts, "ref", None), sets=opts.set,
                                               mesh=getattr(opts, "mesh", None), shard=getattr(opts, "shard", None)))]
    except UsageError:  # the file names none
        return []


def _fix_patch(result, target, opts, others) -> tuple[str | None, str, str]:
    """The best fix on the first chip that the source can express as a diff of it and that holds at
    every input set the file names; what it does, or why none; the diff's encoding. A change of a
    --set is the command line's, said by the printer."""
    import os
    import shlex

    from ..base.errors import UsageError as Unpatchable
    from ..verbs.fixing import holding_patch
    from ..verbs.patching import patch_text

    chip = result.chips[0]
    if chip not in result.best:
        return None, f"no fix is recommended on {chip}", "utf-8"
    if chip not in result.best_in_source:
        return None, f"every fix recommended on {chip} changes a --set of yours: {result.command_line.get(chip, '')}", "utf-8"
    given = "INSPECT's args" if opts.args is None else "--args" + ("" if others else " (the file names no others)")
    change, holds = holding_patch(result, others, given=given, use_cache=_use_cache(opts))
    if change is None:
        return None, holds, "utf-8"
    try:
        patch = patch_text(change, target.file, target.name)
    except Unpatchable as err:
        return None, f"{change.label}: {err}", "utf-8"
    # git -C reads the patch's name from the repository: an absolute one, where that is elsewhere
    here = os.path.realpath(os.getcwd()) == os.path.realpath(patch.repository)
    how = "git apply" if here else f"git -C {shlex.quote(patch.repository)} apply {shlex.quote(os.path.abspath(opts.patch))}"
    return patch.text, f"{change.label} in {patch.path} ({holds}); apply with `{how}`", patch.encoding


def _measure_fix(opts, change, chip) -> float:
    """The program's device time with ``change`` on the attached TPU (--measure)."""
    import functools

    from ..verbs.fixing import load_variant
    from ..measure.run import measure_on_chip

    return measure_on_chip(functools.partial(load_variant, functools.partial(_load, opts), change), chip, debug=opts.debug).seconds


def work_diff(opts):
    from ..run import run_diff

    chip = diff_simulated_chip(parse_targets(opts.chip), "--target", INTERPRET_EXAMPLE, "cpu/gpu")
    target = _load(opts)
    with _exits_are_failures(target, f"raised while running {target.name}"):
        try:
            return run_diff(target, seed=opts.seed, atol=opts.atol, rtol=opts.rtol, grad=opts.grad, runs=opts.runs,
                            chip=chip, strict=opts.strict, start_devices=bool(getattr(opts, "isolate", False)))
        except ValueError as err:
            raise UsageError(str(err)) from err


def work_doctor(opts):
    from .doctor import checkup

    chips = doctor_chips(parse_targets(opts.chip)) if opts.chip else [c for c in CHIPS if c.is_tpu and c.devices == 1]
    return checkup(chips, svg_required=opts.svg)


def work(opts):
    """What the verb computes: runs jax and the user's code, returns plain data. Whatever the
    user's code prints goes to stderr: stdout is the inspector's alone."""
    environment.prepare(debug=opts.debug)
    from ..jax_internals import check_version

    if opts.verb != "doctor" and (note := check_version()) is not None:  # doctor says it in its table
        print(f"inspector: note: {note}", file=sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return verb_table.load(verb_table.get_verb(opts.verb).work)(opts)
    except (RuntimeError, AssertionError) as err:  # JAX_PLATFORMS names a backend jax cannot start; the TPU is busy
        from ..base.environment import chip_failure

        failure = environment.backend_failure(err) or chip_failure(err)
        if failure is None:
            raise
        raise failure from err


def runs_on_chip(opts) -> bool:
    """diff runs the function itself: on the attached TPU where there is one (and nothing the user
    set keeps jax off it), so its process opens the chip; every other verb's stays deviceless."""
    return opts.verb == "diff" and environment.may_use_chip()


def run(opts):
    """``work(opts)`` in a child process (the CLI), or here (``main(isolate=False)``: tests)."""
    if not opts.isolate:
        return work(opts)
    from ..base.child_process import run_isolated

    return run_isolated(work, opts, env=environment.chip_env() if runs_on_chip(opts) else None)
