"""The `inspector` command. Parses arguments before jax loads, so usage errors answer at once.

Exit codes: 0 ok, 1 the analysed function failed or a finding is an error, 2 usage.
"""
from __future__ import annotations

import argparse
import sys

from .errors import EXIT_FINDINGS, EXIT_OK, InspectorError

VIEWS = ("overview", "jaxpr", "stablehlo", "hlo", "mosaic", "fusions", "pallas")
VERBS = ("show", "check", "diff", "export", "chips")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise InspectorError(f"{message} (see `{self.prog} --help`)")


def _target_options(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("target", help="path/to/file.py:function or package.module:function")
    p.add_argument("--target", dest="chip", default="cpu", metavar="CHIP",
                   help="where to compile: cpu (default), gpu, or a TPU such as tpu-v5e (see `inspector chips`)")
    p.add_argument("--args", help='example inputs as shape specs, e.g. "bf16[4,2048,128] f32[] k=i32[16]"')
    p.add_argument("--ref", help="reference function: name in the same file, or file.py:function")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="static keyword parameter (repeatable)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print the Report as JSON")
    p.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has this module")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="inspector", description="Inspect what XLA and Pallas make of a JAX function.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and jax/libtpu logs")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    show = sub.add_parser("show", help="print one view of a target")
    _target_options(show)
    show.add_argument("--view", choices=VIEWS, default="overview")
    show.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target; e.g. h100 for --target cpu)")
    show.add_argument("--sort", choices=("order", "bytes", "flops", "time"), default="order", help="fusions view: row order")
    show.add_argument("--top", type=int, default=40, metavar="N", help="fusions view: rows to print (0 for all)")
    export = sub.add_parser("export", help="write the kernel graph (SVG, DOT) and the Report (JSON) to files")
    _target_options(export, json_flag=False)
    export.add_argument("--svg", metavar="PATH", help="kernel graph as SVG (needs Graphviz's dot)")
    export.add_argument("--dot", metavar="PATH", help="kernel graph as Graphviz DOT source")
    export.add_argument("--json", dest="json_path", metavar="PATH", help="the whole Report as JSON")
    export.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target)")
    export.add_argument("--max-nodes", type=int, default=200, metavar="N", help="collapse scopes (layers) past N nodes (default 200)")
    export.add_argument("--expand", action="append", default=[], metavar="SCOPE", help="keep this scope's kernels when collapsing (repeatable)")
    check = sub.add_parser("check", help="VMEM fit, layout rules and BlockSpec bugs of every pallas_call; exit 1 on a problem")
    _target_options(check)
    check.set_defaults(chip="tpu-v5e")
    check.add_argument("--estimate-only", action="store_true", help="skip the real TPU compiles (libtpu); the static estimate only")
    check.add_argument("--sweep", action="store_true", help="also estimate every combination of INSPECT's params: which block sizes fit")
    diff = sub.add_parser("diff", help="run the function and its reference on the same inputs; where do they differ")
    _target_options(diff)
    diff.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    diff.add_argument("--atol", type=float, help="absolute tolerance (default per dtype)")
    diff.add_argument("--rtol", type=float, help="relative tolerance (default per dtype)")
    diff.add_argument("--grad", action="store_true", help="compare gradients too (vjp with a random cotangent)")
    diff.add_argument("--runs", type=int, default=3, metavar="N", help="timed runs after the checked one (0: no timing)")
    diff.add_argument("--strict", action="store_true",
                      help="a kernel the TPU interpreter cannot run is an error (exit 1), not an info finding")
    tui = sub.add_parser("tui", help="the terminal UI (what `inspector TARGET` opens)")
    _target_options(tui)
    tui.add_argument("--watch", action="store_true", help="re-analyse when the target file is saved")
    chips = sub.add_parser("chips", help="list the hardware targets and their figures")
    chips.add_argument("--json", action="store_true")
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """`inspector TARGET ...` is `inspector tui TARGET ...`."""
    rest = [a for a in argv if a != "--debug"]
    if rest and not rest[0].startswith("-") and rest[0] not in VERBS + ("tui",):
        i = argv.index(rest[0])
        return argv[:i] + ["tui"] + argv[i:]
    return argv


def _report(opts, *, compile: bool, jaxpr_text: bool, fusions: bool, pallas: bool = False):
    """Load the target, capture its stages and gather the Report: the one path every verb takes."""
    from .chips import get_chip
    from .report import make_report
    from .stages import cache_enabled
    from .target import load_target

    chip = get_chip(opts.chip)
    roofline = get_chip(opts.roofline) if getattr(opts, "roofline", None) else None
    target = load_target(opts.target, args=opts.args, ref=opts.ref, sets=opts.set)
    return make_report(target, chip, compile=compile, jaxpr_text=jaxpr_text, fusions=fusions, pallas=pallas,
                       roofline_chip=roofline, use_cache=cache_enabled() and not opts.no_cache)


def _show(opts) -> int:
    from .views.printer import make_console, print_json, print_view

    report = _report(opts, compile=opts.view in ("overview", "hlo", "fusions"), jaxpr_text=opts.view == "jaxpr",
                     fusions=opts.view in ("overview", "fusions"), pallas=opts.view in ("overview", "pallas"))
    console = make_console()
    if opts.json:
        texts = () if opts.view in ("overview", "fusions") else (opts.view,)
        print_json(report.to_dict(texts=texts), console)
    else:
        print_view(report, opts.view, console, sort=opts.sort, top=opts.top)
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _export(opts) -> int:
    import json

    from .atomic import write_atomic
    from .hlo.graph import build_dot, render_svg

    if not (opts.svg or opts.dot or opts.json_path):
        raise InspectorError("export needs at least one of --svg PATH, --dot PATH, --json PATH")
    if opts.svg or opts.dot:  # fail before the compile when the SVG cannot be drawn
        from .hlo.graph import dot_available
        if opts.svg and not dot_available():
            render_svg(None)  # raises the how-to-install message
    report = _report(opts, compile=True, jaxpr_text=bool(opts.json_path), fusions=True, pallas=True)
    written = []
    if opts.json_path:
        data = report.to_dict(texts=("jaxpr", "stablehlo", "hlo", "mosaic"))
        written.append(f"{write_atomic(opts.json_path, json.dumps(data, indent=2, default=str))} (the Report)")
    if (opts.svg or opts.dot) and report.fusions is None:
        reason = report.stages.compile_error.headline if report.stages.compile_error else "not compiled"
        raise InspectorError(f"no kernel graph: {reason}")
    if opts.svg or opts.dot:
        graph, summary = build_dot(report.fusions, report.graph_title(), max_nodes=opts.max_nodes, expand=tuple(opts.expand))
        what = f"{summary.nodes} nodes" + (f", {len(summary.collapsed)} scopes collapsed (--expand SCOPE to open one)" if summary.collapsed else "")
        if opts.dot:
            written.append(f"{write_atomic(opts.dot, graph.source)} ({what})")
        if opts.svg:
            written.append(f"{write_atomic(opts.svg, render_svg(graph, summary.nodes))} ({what})")
    for line in written:
        print(f"wrote {line}")
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _emit(opts, result, view) -> int:
    """Print a check or diff result (JSON with --json) and turn its verdict into the exit code."""
    import dataclasses

    from .views.printer import make_console, print_json

    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        console.print(view(result), soft_wrap=False)
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _check(opts) -> int:
    from .views.pallas import check_view

    from .pallas.check import run_check
    from .chips import parse_targets
    from .stages import cache_enabled
    from .target import load_target

    chips = parse_targets(opts.chip)
    local = [c.name for c in chips if c.is_local]
    if local:
        raise InspectorError(f"check is about TPU and GPU targets, not {', '.join(local)}: e.g. --target tpu-v5e,tpu-v6e,h100")
    target = load_target(opts.target, args=opts.args, ref=opts.ref, sets=opts.set)
    result = run_check(target, chips, estimate_only=opts.estimate_only, use_cache=cache_enabled() and not opts.no_cache)
    if opts.sweep:
        from .pallas.sweep import sweep

        result.sweep = sweep(target, [c for c in chips if c.is_tpu or c.kind == "gpu"])
    return _emit(opts, result, check_view)


def _diff(opts) -> int:
    from .views.diff import diff_view

    from .diff import run_diff
    from .target import load_target

    from .chips import parse_targets
    from .diff import check_tolerance

    # diff runs on this machine; --target names the TPU that interpret mode simulates (the first TPU given)
    chips = parse_targets(opts.chip)
    spec_only = [c.name for c in chips if c.kind == "gpu"]
    if spec_only:
        raise InspectorError(f"diff runs on this machine, not on {', '.join(spec_only)}: --target names the TPU that "
                             "interpret mode simulates (e.g. tpu-v5p), or cpu/gpu")
    if opts.runs < 0:
        raise InspectorError(f"--runs must be 0 or more, not {opts.runs}")
    try:
        check_tolerance("--atol", opts.atol)
        check_tolerance("--rtol", opts.rtol)
    except ValueError as err:
        raise InspectorError(str(err)) from err
    chip = next((c for c in chips if c.is_tpu), None)
    target = load_target(opts.target, args=opts.args, ref=opts.ref, sets=opts.set)
    try:
        result = run_diff(target, seed=opts.seed, atol=opts.atol, rtol=opts.rtol, grad=opts.grad, runs=opts.runs,
                          chip=chip, strict=opts.strict)
    except ValueError as err:
        raise InspectorError(str(err)) from err
    return _emit(opts, result, diff_view)


def _tui(opts) -> int:
    """The terminal UI; when stdout is not a terminal (a pipe, CI), the overview instead."""
    import sys as _sys

    if not _sys.stdout.isatty() or opts.json:
        opts.view, opts.roofline, opts.sort, opts.top = "overview", None, "order", 40
        return _show(opts)
    from .views.tui.app import InspectorApp

    from .chips import get_chip
    from .session import Session
    from .stages import cache_enabled

    get_chip(opts.chip)  # a bad --target is a usage error before the screen opens
    session = Session(opts.target, opts.chip, opts.args, opts.ref, list(opts.set), cache_enabled() and not opts.no_cache)
    InspectorApp(session, watch=opts.watch).run()
    return EXIT_OK


def _chips(opts) -> int:
    from .views.printer import chip_rows, chips_table, make_console, print_json

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
        verbs = {"show": _show, "check": _check, "diff": _diff, "export": _export, "chips": _chips, "tui": _tui}
        return verbs[opts.verb](opts)
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
