"""The `inspector` command. Parses arguments before jax loads, so usage errors answer at once.

Exit codes: 0 ok, 1 the analysed function failed or a finding is an error, 2 usage.
"""
from __future__ import annotations

import argparse
import sys

from .errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, InspectorError

VIEWS = ("overview", "jaxpr", "stablehlo", "hlo", "mosaic")
VERBS = ("show", "chips")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise InspectorError(f"{message} (see `{self.prog} --help`)")


def _target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="path/to/file.py:function or package.module:function")
    p.add_argument("--target", dest="chip", default="cpu", metavar="CHIP",
                   help="where to compile: cpu (default), gpu, or a TPU such as tpu-v5e (see `inspector chips`)")
    p.add_argument("--args", help='example inputs as shape specs, e.g. "bf16[4,2048,128] f32[] k=i32[16]"')
    p.add_argument("--ref", help="reference function: name in the same file, or file.py:function")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="static keyword parameter (repeatable)")
    p.add_argument("--json", action="store_true", help="print the Report as JSON")
    p.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has this module")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="inspector", description="Inspect what XLA and Pallas make of a JAX function.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and jax/libtpu logs")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    show = sub.add_parser("show", help="print one view of a target")
    _target_options(show)
    show.add_argument("--view", choices=VIEWS, default="overview")
    chips = sub.add_parser("chips", help="list the hardware targets and their figures")
    chips.add_argument("--json", action="store_true")
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """`inspector TARGET ...` is `inspector show TARGET ...` (the terminal UI is not built yet)."""
    rest = [a for a in argv if a != "--debug"]
    if rest and not rest[0].startswith("-") and rest[0] not in VERBS:
        i = argv.index(rest[0])
        return argv[:i] + ["show"] + argv[i:]
    return argv


def _show(opts) -> int:
    from views.printer import make_console, print_json, print_view

    from .backends import Backend
    from .chips import get_chip
    from .report import build_report
    from .stages import capture, cache_enabled
    from .target import load_target

    chip = get_chip(opts.chip)
    target = load_target(opts.target, args=opts.args, ref=opts.ref, sets=opts.set)
    backend = Backend(chip)
    needs_compile = opts.view in ("overview", "hlo")
    stages = capture(target, backend, compile=needs_compile, jaxpr_text=opts.view == "jaxpr",
                     use_cache=cache_enabled() and not opts.no_cache)
    report = build_report(target, chip, stages)
    console = make_console()
    if opts.json:
        texts = () if opts.view == "overview" else (opts.view,)
        print_json(report.to_dict(texts=texts), console)
    else:
        print_view(report, opts.view, console)
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _chips(opts) -> int:
    from views.printer import chip_rows, chips_table, make_console, print_json

    console = make_console()
    if opts.json:
        print_json(chip_rows(), console)
    else:
        console.print(chips_table(), soft_wrap=False)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    from . import environment

    environment.prepare(debug=debug)
    try:
        opts = build_parser().parse_args(_normalise(argv))
        if opts.verb is None:
            raise InspectorError("give a target (inspector samples/attention.py:naive) or a verb: " + ", ".join(VERBS))
        return {"show": _show, "chips": _chips}[opts.verb](opts)
    except InspectorError as err:
        if debug:
            raise
        print(f"inspector: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("inspector: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug of ours: still one line, the traceback on request
        if debug:
            raise
        print(f"inspector: internal error: {type(err).__name__}: {err} (run again with --debug for the traceback)", file=sys.stderr)
        return EXIT_FINDINGS


def entry() -> None:
    sys.exit(main())
