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
from ..request import Request, report_for
from ..verbs.rules import diff_simulated_chip, doctor_chips
from . import verb_table
from .requests import CheckOptions, CompareOptions, DiffOptions, DoctorOptions, FixOptions
from ..families import family_of


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


def _report(request: Request):
    """Load the target, capture its stages and gather the Report: the one path every verb takes."""
    target = request.target()
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        return report_for(request, target)


def work_show(request: Request, options: None = None):
    return _report(request)


def work_compare(request: Request, options: CompareOptions):
    from ..verbs.comparison import compare_reports

    return compare_reports(_report(request), _report(options.b))


def work_check(request: Request, opts: CheckOptions):
    import functools

    from ..verbs.checking import run_check

    chips = parse_targets(request.chip)
    target = request.target()
    # several TPU compiles: each in a process of its own, so that libtpu aborting one is that chip's finding
    apart = (functools.partial(_compile_apart, request)
             if opts.isolate and not opts.estimate_only and sum(family_of(c).info.can.compile for c in chips) > 1 else None)
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        result = run_check(target, chips, estimate_only=opts.estimate_only, use_cache=request.cache.value,
                           compile_apart=apart)
        if opts.sweep:
            from ..pallas.sweep import sweep

            result.sweep = sweep(target, [c for c in chips if family_of(c).info.can.sweep])
    return result


def _compile_apart(request: Request, chip):
    """The compiled Stages of the target on ``chip``, made in a child process whose stderr (where
    libtpu logs) goes to a file: shown with --debug, else kept from the user's terminal. A child
    that ends without an answer (libtpu's abort) raises CompilerAborted with the log's tail."""
    import os

    from ..verbs.checking import CompilerAborted
    from ..base.child_process import ChildFailed, run_isolated

    with temp_folder("chip-log") as folder:
        log = os.path.join(folder, "stderr.txt")
        try:
            return run_isolated(_compile_chip, request, chip.name, stderr_to=log)
        except ChildFailed as err:
            code = getattr(err, "returncode", None)
            if code is None:
                raise
            raise CompilerAborted(chip.name, code, _read_log(log)) from err
        finally:
            if request.debug and os.path.exists(log):
                sys.stderr.write(_read_log(log))


def _read_log(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _compile_chip(request: Request, chip_name: str):
    """In the child: trace, lower and compile the target for one chip; its Stages (plain data)."""
    environment.prepare(debug=request.debug)
    from ..compilation.stages import capture
    from ..mosaic.explain import explain_capture

    target = request.target()
    chip = get_chip(chip_name)
    with contextlib.redirect_stdout(sys.stderr), _exits_are_failures(target, f"raised while tracing {target.name}"):
        # explained here: what explains a failure (the traced program) stays in this process
        return explain_capture(capture(target, Backend(chip), compile=True, use_cache=request.cache.value, memo=False,
                                       buffers=True), chip).stages


def work_fix(request: Request, options: FixOptions):
    import dataclasses
    import functools

    from ..verbs.fixing import run_fix, set_names

    chips = parse_targets(request.chip)
    target = request.target()
    measure = functools.partial(_measure_fix, request) if request.measure else None
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        result = run_fix(target, chips, numerics=options.numerics, time=options.time, use_cache=request.cache.value,
                         measure=measure, fixed=set_names(list(request.sets)))
    if options.patch:
        patch, note, encoding = _fix_patch(result, target, request, options.patch, _other_inputs(request))
        result = dataclasses.replace(result, patch=patch, patch_note=note, patch_encoding=encoding)
    return result


def _other_inputs(request: Request) -> list:
    """The other input sets the file names for the target (INSPECT's args, where --args replaced
    them): a patch of a shared kernel must hold there too."""
    import dataclasses

    if request.args is None:
        return []
    try:
        return [("INSPECT's args", dataclasses.replace(request, args=None).target())]
    except UsageError:  # the file names none
        return []


def _fix_patch(result, target, request: Request, patch_file: str, others) -> tuple[str | None, str, str]:
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
    given = "INSPECT's args" if request.args is None else "--args" + ("" if others else " (the file names no others)")
    change, holds = holding_patch(result, others, given=given, use_cache=request.cache.value)
    if change is None:
        return None, holds, "utf-8"
    try:
        patch = patch_text(change, target.file, target.name)
    except Unpatchable as err:
        return None, f"{change.label}: {err}", "utf-8"
    # git -C reads the patch's name from the repository: an absolute one, where that is elsewhere
    here = os.path.realpath(os.getcwd()) == os.path.realpath(patch.repository)
    how = "git apply" if here else f"git -C {shlex.quote(patch.repository)} apply {shlex.quote(os.path.abspath(patch_file))}"
    return patch.text, f"{change.label} in {patch.path} ({holds}); apply with `{how}`", patch.encoding


def _measure_fix(request: Request, change, chip) -> float:
    """The program's device time with ``change`` on the attached TPU (--measure)."""
    import functools

    from ..verbs.fixing import load_variant
    from ..families.measuring import measure_on_chip

    return measure_on_chip(functools.partial(load_variant, request.target, change), chip, debug=request.debug).seconds


def work_diff(request: Request, options: DiffOptions):
    from ..run import run_diff

    chip = diff_simulated_chip(parse_targets(request.chip), "--target", INTERPRET_EXAMPLE, "cpu/gpu")
    target = request.target()
    with _exits_are_failures(target, f"raised while running {target.name}"):
        try:
            return run_diff(target, seed=options.seed, atol=options.atol, rtol=options.rtol, grad=options.grad,
                            runs=options.runs, chip=chip, strict=options.strict, start_devices=options.start_devices)
        except ValueError as err:
            raise UsageError(str(err)) from err


def work_doctor(request: Request, opts: DoctorOptions):
    from .doctor import checkup

    chips = doctor_chips(parse_targets(opts.chip)) if opts.chip else [c for c in CHIPS if family_of(c).info.can.compile and c.devices == 1]
    return checkup(chips, svg_required=opts.svg)


def work(verb: str, request: Request, options=None):
    """What the verb computes: runs jax and the user's code, returns plain data. Whatever the
    user's code prints goes to stderr: stdout is the inspector's alone."""
    environment.prepare(debug=request.debug)
    from ..jax_internals import check_version

    if verb != "doctor" and (note := check_version()) is not None:  # doctor says it in its table
        print(f"inspector: note: {note}", file=sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return verb_table.load(verb_table.get_verb(verb).work)(request, options)
    except (RuntimeError, AssertionError) as err:  # JAX_PLATFORMS names a backend jax cannot start; the TPU is busy
        from ..base.environment import chip_failure

        failure = environment.backend_failure(err) or chip_failure(err)
        if failure is None:
            raise
        raise failure from err


def runs_on_chip(verb: str) -> bool:
    """diff runs the function itself: on the attached TPU where there is one (and nothing the user
    set keeps jax off it), so its process opens the chip; every other verb's stays deviceless."""
    return verb == "diff" and environment.may_use_chip()


def run(verb: str, request: Request, options=None, *, isolate: bool = True):
    """``work(verb, request, options)`` in a child process (the CLI), or here (``isolate`` False:
    ``main(isolate=False)``, the tests). What crosses is the Request and the verb's own record of
    options (commands/requests.py), plain data that pickles; never argparse's Namespace."""
    if not isolate:
        return work(verb, request, options)
    from ..base.child_process import run_isolated

    return run_isolated(work, verb, request, options, env=environment.chip_env() if runs_on_chip(verb) else None)
