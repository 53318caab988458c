"""``inspector baseline save|diff`` and ``inspector check --baseline``: the command line's side of
the performance gate (inspector/baseline/ computes and compares; views/baseline.py prints).

    baseline_options(parser)            # the `baseline` verb's actions and their options
    add_check_options(check)            # --baseline, --tolerance and more targets for `check`
    baseline_verb(opts)                 # save / diff
    check_baseline(opts)                # check TARGET... --baseline FILE (check_gate: its Gate)
"""
from __future__ import annotations

import argparse
import sys

from ..base.chips import DEFAULT_TPU
from ..base.errors import EXIT_FINDINGS, EXIT_OK, UsageError
from .arg_types import SetValues
from .arg_types import seconds as _seconds
from .options import debug_parent

TOLERANCE_HELP = ("how far a figure may move: FIGURE=N%% or FIGURE=N in its unit, comma-separated or repeated, e.g. "
                  "time=5%%,hbm_bytes=0 (default: time=2%%, every other figure exact)")


def baseline_options(baseline: argparse.ArgumentParser) -> None:
    """The `baseline` verb's actions and their options (its row in verb_table.py names this)."""
    common = [debug_parent(type(baseline))]
    actions = baseline.add_subparsers(dest="action", metavar="ACTION", parser_class=type(baseline))
    save = actions.add_parser("save", parents=common, help="compute and write a baseline",
                              description="compute every target's figures per chip and write them as JSON")
    save.add_argument("file", metavar="FILE", help="the baseline to write (JSON; replaced whole)")
    save.add_argument("targets", nargs="+", metavar="TARGET",
                      help="path/to/file.py:function, or a file, folder or glob: every entry of the INSPECT dicts there")
    save.add_argument("--target", dest="chips", default=None, metavar="CHIPS",
                      help=f"the chips to record, TPUs or GPUs, e.g. tpu-v5e,tpu-v6e or h100 (default: {DEFAULT_TPU})")
    save.add_argument("--set", action=SetValues, default=[], metavar="NAME=VALUE",
                      help="a static keyword parameter of every target (repeatable; default: INSPECT's)")
    save.add_argument("--time", action="store_true", help="also the estimated time (libtpu's; a GPU's floor), bundles and spills per kernel "
                                                           "(its simulation: the slowest part)")
    save.add_argument("--time-budget", type=_seconds, default=None, metavar="SECONDS",
                      help="what libtpu's simulation may take per target and chip (default 60); kept in the baseline")
    save.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has the module")
    save.add_argument("--force", action="store_true",
                      help="replace FILE even when it is not a baseline (default: such a file is refused; a .py never written)")
    diff = actions.add_parser("diff", parents=common, help="two saved baselines side by side",
                              description="what differs between two baselines, kernel by kernel, with their versions")
    diff.add_argument("first", metavar="A", help="a saved baseline")
    diff.add_argument("second", metavar="B", help="another")
    diff.add_argument("--tolerance", action="append", default=[], metavar="FIGURE=N",
                      help="how far a figure may move and not be listed: FIGURE=N%% or FIGURE=N (default: every figure exact)")
    diff.add_argument("--json", action="store_true", help="as JSON")


def add_check_options(check: argparse.ArgumentParser) -> None:
    check.add_argument("more_targets", nargs="*", metavar="TARGET",
                       help="with --baseline: more targets; a file, folder or glob stands for its INSPECT entries")
    check.add_argument("--baseline", metavar="FILE", default=None,
                       help="compare with a saved baseline (`inspector baseline save`): exit 1 when a figure moved "
                            "past its tolerance (default: none)")
    check.add_argument("--tolerance", action="append", default=[], metavar="FIGURE=N", help=TOLERANCE_HELP)


def add_tui_options(tui: argparse.ArgumentParser) -> None:
    tui.add_argument("--baseline", metavar="FILE", default=None,
                     help="a saved baseline: the overview shows what moved against its figures for this target and "
                          "chip (in a pipe: check --baseline's table; default: none)")
    # in a pipe, --baseline runs check's gate: check's options the UI has not, at their defaults
    tui.set_defaults(more_targets=[], tolerance=[], estimate_only=False, sweep=False)


def _cache(opts):
    from ..request import Cache

    return Cache.asked(refresh=opts.no_cache)


def _progress(total: int):
    def say(i: int, spec: str) -> None:
        if total > 1 or sys.stderr.isatty():
            print(f"baseline: {spec} ({i + 1} of {total})", file=sys.stderr, flush=True)
    return say


def _compute(opts, specs: list[str], chips: list[str], sets: list[str], time: bool, budget: float | None):
    from ..baseline.work import Request, compute, template

    request = Request(specs=specs, chips=chips,
                      template=template(sets, time=time, time_budget=budget, cache=_cache(opts), debug=opts.debug))
    return compute(request, isolate=opts.isolate, progress=_progress(len(specs)))


def _save(opts) -> int:
    from ..base.atomic import check_not_read_only, check_writable, our_output, refuse_foreign
    from ..baseline.gate import tpu_chips
    from ..baseline.record import new_baseline, save, written_by_us
    from ..baseline.targets import expand
    from ..views.baseline import saved_view
    from ..views.printer import make_console, print_fitting
    from ..verbs.rules import time_budget

    refuse_foreign(opts.file, ours=written_by_us, what="a baseline", force=opts.force)  # before anything compiles
    check_writable(opts.file)
    check_not_read_only(opts.file)
    if opts.time_budget is not None and not opts.time:
        raise UsageError("--time-budget is the budget of --time: give --time too, or leave it out")
    if opts.time_budget is not None:
        time_budget(opts.time_budget, "--time-budget")  # checked before anything compiles
    chips = tpu_chips(DEFAULT_TPU if opts.chips is None else opts.chips)  # --target '': refused as check refuses it
    targets = expand(opts.targets)
    computed = _compute(opts, targets.specs, chips, opts.set, opts.time, opts.time_budget)
    if not any("error" not in found for c in computed for found in c.entry.get("chips", {}).values()):
        first = computed[0].entry  # every target raised, on every chip: a gate of nothing would pass forever
        why = first.get("error") or next(iter(first["chips"].values()))["error"]
        raise UsageError(f"nothing to record in {opts.file}: no target traced on any chip ({computed[0].label}: {why})")
    baseline = new_baseline(chips, opts.time, {c.label: c.entry for c in computed}, opts.time_budget)
    to_stdout = our_output(opts.file) == 1 or opts.file in ("/dev/stdout", "/proc/self/fd/1")
    where = save(baseline, opts.file)
    # the baseline on stdout: the table goes to stderr, so that stdout is the JSON alone
    print_fitting(make_console(file=sys.stderr) if to_stdout else make_console(), saved_view(baseline, where))
    for c in computed:  # what could not be recorded, on stderr: the file holds it too
        if "error" in c.entry:
            print(f"inspector: note: {c.label}: {c.entry['error']}", file=sys.stderr)
        for chip, found in c.entry.get("chips", {}).items():
            if "error" in found:
                print(f"inspector: note: {c.label} on {chip}: {found['error']}", file=sys.stderr)
    return EXIT_OK


def _emit(opts, comparison, title: str, sides: tuple[str, str] = ("before", "after")) -> int:
    from ..views.baseline import comparison_view
    from ..views.printer import make_console, print_fitting, print_json

    console = make_console()
    if opts.json:
        print_json(comparison.to_dict(), console)
    else:
        print_fitting(console, comparison_view(comparison, title, sides))
    return EXIT_OK if comparison.ok else EXIT_FINDINGS


def _diff(opts) -> int:
    from ..baseline.compare import compare, parse_tolerances
    from ..baseline.gate import refuse_empty, some
    from ..baseline.record import load

    tolerances = parse_tolerances(opts.tolerance, base={})
    first, second = load(opts.first), load(opts.second)
    result = compare(first, second, tolerances)
    refuse_empty(result, f"baseline diff {opts.first} {opts.second}",
                 f"A holds {some(list(first.targets))}; B {some(list(second.targets))}")
    return _emit(opts, result, f"baseline diff {opts.first} {opts.second}", ("A", "B"))


def baseline_verb(opts) -> int:
    if opts.action is None:
        raise UsageError("baseline needs an action: `inspector baseline save FILE TARGET...` or "
                         "`inspector baseline diff A B`")
    return _save(opts) if opts.action == "save" else _diff(opts)


def check_gate(opts):
    """``check TARGET... --baseline FILE``'s Gate (inspector/baseline/gate.py): the one the Python
    API's ``inspector.check(..., baseline=FILE)`` makes for the same options."""
    from ..baseline.gate import make_gate

    if opts.baseline is None:
        if opts.tolerance:
            raise UsageError("--tolerance applies to --baseline FILE: give the baseline too, or leave it out")
        raise UsageError("check takes one target; several with --baseline FILE (a saved `inspector baseline`)")
    for flag, given in (("--estimate-only", opts.estimate_only), ("--sweep", opts.sweep),
                        ("--args", opts.args), ("--mesh", opts.mesh), ("--shard", opts.shard), ("--ref", opts.ref)):
        if given:
            raise UsageError(f"{flag} does not go with --baseline: the baseline's figures come from whole compiles of "
                             "INSPECT's entries")
    # --target given: those chips, each of which the baseline must hold; else the baseline's
    chips = opts.chip if opts.chip_reason is None else None
    return make_gate(opts.baseline, [opts.target, *opts.more_targets], chips=chips, sets=opts.set,
                     tolerances=opts.tolerance, use_cache=_cache(opts), debug=opts.debug)


def check_baseline(opts) -> int:
    """``check TARGET... --baseline FILE``: the same figures now, against the file's."""
    from ..baseline.gate import run_gate

    gate = check_gate(opts)
    result = run_gate(gate, isolate=opts.isolate, progress=_progress(len(gate.request.specs)))
    return _emit(opts, result, f"check --baseline {opts.baseline}", ("before", "now"))
