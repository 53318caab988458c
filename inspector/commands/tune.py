"""``inspector tune``: its options, its work and its printer, which its row in the table of verbs
(verb_table.py) names.

    tune_options(parser)                # the options
    result = work_tune(opts)            # the sweep; call it in the CLI's own process (see below)
    code = render_tune(opts, result)    # print it; the exit code

``work_tune`` never imports jax in the calling process: it starts its own worker processes (or
Ray tasks), draws the progress bar, and on Ctrl-C kills the workers at once and returns what is
done, marked interrupted. So it must not be wrapped in ``base.child_process.run_isolated`` (a child killed
on Ctrl-C could not print what is done); ``render_tune`` then exits 130. The sweep's modules and
the views are imported when the verb runs: ``inspector --help`` builds its parser from this module.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..compilation.backends import attached_chip
from ..base.chips import DEFAULT_TPU
from ..base.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError
from ..base.specs import parse_specs
from ..tuning.table import check_table
from ..verbs.rules import check_tune_measure, time_budget
from .arg_types import SetValues
from .arg_types import count as _count
from .arg_types import positive as _positive
from .arg_types import seconds as _seconds
from .process import EXIT_SIGINT, say


def tune_options(tune: argparse.ArgumentParser) -> None:
    """tune's options (its row in the table of verbs, verb_table.py, names this function)."""
    tune.add_argument("target", help="path/to/file.py:function or package.module:function")
    tune.add_argument("--target", dest="chip", default=None, metavar="CHIPS",
                      help=f"the chips to rank for, TPUs or GPUs, e.g. tpu-v5e,tpu-v6e or h100,a100 (default: the attached TPU, else {DEFAULT_TPU})")
    tune.add_argument("--args", action="append", default=[], metavar="SPECS",
                      help='input shapes, e.g. "bf16[4096,4096] bf16[4096,4096]"; repeat for one table per shape '
                           "(default: INSPECT's shapes, else its args)")
    tune.add_argument("--grid", action="append", default=[], metavar="NAME=A,B,C",
                      help="values to sweep for a parameter (repeatable); replaces INSPECT's list for it")
    tune.add_argument("--set", action=SetValues, default=[], metavar="NAME=VALUE",
                      help="fix a parameter (repeatable): it is not swept")
    tune.add_argument("--workers", type=_positive, default=None, metavar="N",
                      help="compile N candidates at once (default: the cores)")
    tune.add_argument("--ray", metavar="ADDRESS", default=None,
                      help="send each candidate to the Ray cluster at ADDRESS (default: $RAY_ADDRESS when set); "
                           "needs Ray (pip install 'ray>=2.9')")
    tune.add_argument("--table", metavar="FILE",
                      help="write (or add to) a tuning table: the best parameters per shape and chip, as JSON (default: none)")
    # None, not 0: an explicit --top 0 (all) must reach --measure, which otherwise times MEASURE_TOP
    tune.add_argument("--top", type=_count, default=None, metavar="N",
                      help="ranked rows per table, and with --measure the candidates timed (0: all; default: every row, "
                           "and 8 timed)")
    tune.add_argument("--time-budget", type=_seconds, default=None, metavar="SECONDS",
                      help="what libtpu's simulation may spend per candidate before its time is extrapolated "
                           "(default 60)")
    tune.add_argument("--measure", action="store_true",
                      help="run the top candidates by estimate (--top; default 8, 0 for all) on the first target, attached to this "
                           "machine (a TPU VM, or an NVIDIA GPU), and rank them by device time")
    tune.add_argument("--json", action="store_true", help="every row as JSON")
    tune.add_argument("--no-cache", action="store_true",
                      help="compute every candidate again (and store the fresh results)")


def request(opts):
    """The SweepRequest the options ask for (checked before anything starts)."""
    from ..tuning.candidates import check_overlap, parse_grid, parse_sets
    from ..tuning.measured import measure_count
    from ..request import Cache
    from ..tuning.sweep import SweepRequest, check_chips

    attached = attached_chip()
    opts.chip = opts.chip or (attached.name if attached is not None else DEFAULT_TPU)
    chips = [c.name for c in check_chips([opts.chip])]
    check_tune_measure(opts.measure, chips[0], "--target")
    if opts.table:
        check_table(opts.table, opts.target)  # not a tuning table, or another kernel's: refused now, not after the sweep
    for text in opts.args:
        parse_specs(text)
    budget = time_budget(opts.time_budget, "--time-budget")
    cache = Cache.asked(refresh=opts.no_cache).value
    grid, fixed = parse_grid(opts.grid), parse_sets(opts.set)
    check_overlap(grid, fixed)  # before any worker starts
    return SweepRequest(spec=opts.target, chips=chips, args=list(opts.args), grid=grid, fixed=fixed,
                        workers=opts.workers, ray=opts.ray or os.environ.get("RAY_ADDRESS") or None, cache=cache,
                        budget=budget, table=opts.table, debug=opts.debug,
                        measure=measure_count(opts.top) if opts.measure else 0)


def work_tune(opts):
    """Run the sweep (workers or Ray tasks do the jax work); a TuneResult, interrupted on Ctrl-C."""
    from ..tuning.sweep import run_sweep
    from ..views.tune import TuneProgress

    req = request(opts)
    return run_sweep(req, TuneProgress(opts.target))


def render_tune(opts, result) -> int:
    """Print the ranked tables (or JSON); exit 130 when interrupted, 1 when a shape has no ranked
    candidate on some chip, else 0."""
    from ..views.printer import make_console, print_fitting, print_json
    from ..views.tune import tune_view

    console = make_console()
    if opts.json:
        print_json(result.to_dict(), console)
    else:
        print_fitting(console, tune_view(result, top=opts.top or 0))
    if result.interrupted:  # on stderr, as every other way a command ends early: stdout keeps the tables
        from ..views.tune import interrupted_line

        say(interrupted_line(result))
        return EXIT_SIGINT
    if result.table_failed:  # the tables are shown; the one thing asked that did not happen is said last
        print(f"inspector: {result.table_note}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if result.ok else EXIT_FINDINGS


def tune_verb(opts) -> int:
    return render_tune(opts, work_tune(opts))


__all__ = ["tune_options", "work_tune", "render_tune", "tune_verb", "UsageError"]
