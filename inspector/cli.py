"""The `inspector` command. Parses arguments before jax loads, so usage errors answer at once.

Exit codes: 0 ok, 1 the analysed function failed or a finding is an error, 2 usage (the command
line, the target file, an output that cannot be written), 130 Ctrl-C, 143 SIGTERM. Every failure
is one line on stderr; ``--debug`` (anywhere on the line) adds the traceback.

The work that runs jax and the user's code (import, trace, compile, run) happens in a child
process (``remote.run_isolated``) and comes back as plain data; this process only parses, waits
and renders. So Ctrl-C during a minutes-long libtpu compile is answered at once, and whatever the
user's code prints goes to stderr, never into our stdout (``--json`` stays valid JSON).
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys

from .errors import EXIT_FINDINGS, EXIT_OK, EXIT_UNDECIDED, InspectorError, OutputError, TargetFailure, UsageError

VIEWS = ("overview", "jaxpr", "stablehlo", "hlo", "mosaic", "fusions", "pallas", "memory", "collectives", "passes")
VERBS = ("show", "check", "diff", "export", "compare", "tune", "chips", "cache", "doctor")
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


class Terminated(BaseException):
    """SIGTERM, raised where the main thread is (like KeyboardInterrupt for SIGINT)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other usage error
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number >= 0")
    return value


def _globals() -> argparse.ArgumentParser:
    """Options every verb takes, before or after the verb (SUPPRESS: the verb's parser keeps the
    top-level value when the flag is not repeated after the verb)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks and jax/libtpu logs")
    return common


def _target_options(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("target", help="path/to/file.py:function or package.module:function")
    p.add_argument("--target", dest="chip", default="cpu", metavar="CHIP",
                   help="where to compile: cpu (default), gpu, or a TPU such as tpu-v5e (see `inspector chips`)")
    p.add_argument("--args", help='example inputs as shape specs, e.g. "bf16[4,2048,128] f32[] k=i32[16]"')
    p.add_argument("--ref", help="reference function: name in the same file, or file.py:function")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="static keyword parameter (repeatable)")
    p.add_argument("--mesh", metavar="AXIS=N,...", help="shard over a mesh of the target's devices, e.g. data=4,model=4 (one may be -1)")
    p.add_argument("--shard", metavar="SPECS", help="one PartitionSpec per positional input, e.g. \"P('data',None) P(None,'model')\"")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print the Report as JSON")
    p.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has this module (and store the fresh result)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="inspector", description="Inspect what XLA and Pallas make of a JAX function.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and jax/libtpu logs")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    common = [_globals()]
    show = sub.add_parser("show", help="print one view of a target", parents=common)
    _target_options(show)
    show.add_argument("--view", choices=VIEWS, default="overview")
    show.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target; e.g. h100 for --target cpu)")
    show.add_argument("--sort", choices=("order", "bytes", "flops", "time"), default="order", help="fusions view: row order")
    show.add_argument("--top", type=_count, default=40, metavar="N", help="fusions view: rows to print (0 for all)")
    show.add_argument("--pass", dest="pass_select", metavar="PASS",
                      help="passes view: the diff of the module before and after PASS (a name, a substring or an index; A..B for a range)")
    show.add_argument("--passes", action="store_true",
                      help="compile with pass dumps: the fusions view names the pass that created each kernel (no compile cache)")
    export = sub.add_parser("export", help="write the kernel graph (SVG, DOT) and the Report (JSON) to files", parents=common)
    _target_options(export, json_flag=False)
    export.add_argument("--svg", metavar="PATH", help="kernel graph as SVG (needs Graphviz's dot)")
    export.add_argument("--dot", metavar="PATH", help="kernel graph as Graphviz DOT source")
    export.add_argument("--json", dest="json_path", metavar="PATH", help="the whole Report as JSON")
    export.add_argument("--html", metavar="PATH", help="kernel graph as one self-contained HTML page: pan, zoom, search, "
                        "the slowest kernels (needs Graphviz's dot)")
    export.add_argument("--color", choices=("roofline", "bytes", "bound"), default="roofline",
                        help="node colour: roofline time (default), HBM bytes, or memory-/compute-bound")
    export.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target)")
    export.add_argument("--max-nodes", type=_count, default=200, metavar="N", help="collapse scopes (layers) past N nodes (default 200)")
    export.add_argument("--expand", action="append", default=[], metavar="SCOPE", help="keep this scope's kernels when collapsing (repeatable)")
    check = sub.add_parser("check", help="VMEM fit, layout rules and BlockSpec bugs of every pallas_call; exit 1 on a problem", parents=common)
    _target_options(check)
    check.set_defaults(chip="tpu-v5e")
    check.add_argument("--estimate-only", action="store_true", help="skip the real TPU compiles (libtpu); the static estimate only")
    check.add_argument("--sweep", action="store_true", help="also estimate every combination of INSPECT's params: which block sizes fit")
    diff = sub.add_parser("diff", help="run the function and its reference on the same inputs; where do they differ", parents=common)
    _target_options(diff)
    diff.add_argument("--seed", type=_count, default=0, help="seed of the random inputs (default 0)")
    diff.add_argument("--atol", type=_tolerance, help="absolute tolerance (default per dtype)")
    diff.add_argument("--rtol", type=_tolerance, help="relative tolerance (default per dtype)")
    diff.add_argument("--grad", action="store_true", help="compare gradients too (vjp with a random cotangent)")
    diff.add_argument("--runs", type=_count, default=3, metavar="N", help="timed runs after the checked one (0: no timing)")
    diff.add_argument("--strict", action="store_true",
                      help="a kernel the TPU interpreter cannot run is an error (exit 1), not an info finding")
    tui = sub.add_parser("tui", help="the terminal UI (what `inspector TARGET` opens)", parents=common)
    _target_options(tui)
    tui.add_argument("--watch", action="store_true", help="re-analyse when the target file is saved")
    tui.set_defaults(chip=None)  # no --target: the file suggests the chip
    _compare_parser(sub, common)
    from .tuning.cli import add_tune_parser

    add_tune_parser(sub, common)
    chips = sub.add_parser("chips", help="list the hardware targets and their figures", parents=common)
    chips.add_argument("--json", action="store_true")
    cache = sub.add_parser("cache", help="where the compile cache is and its size; `cache clear` empties it", parents=common)
    cache.add_argument("action", nargs="?", choices=("info", "clear"), default="info")
    cache.add_argument("--json", action="store_true")
    doctor = sub.add_parser("doctor", help="versions found, a deviceless compile per TPU generation, Graphviz, accelerators, "
                                           "the cache; exit 1 when something asked for cannot work", parents=common)
    doctor.add_argument("--target", dest="chip", metavar="CHIPS", help="the TPU targets to compile for, e.g. tpu-v5e,tpu-v6e "
                                                                        "(default: every TPU generation)")
    doctor.add_argument("--svg", action="store_true", help="SVG export is needed: Graphviz's dot missing is a failure")
    doctor.add_argument("--json", action="store_true")
    return parser


def _compare_parser(sub, common) -> None:
    compare = sub.add_parser("compare", help="two variants side by side: two targets, two --set's or two chips", parents=common)
    compare.add_argument("target", help="path/to/file.py:function (variant A, and B unless B is given)")
    compare.add_argument("target_b", nargs="?", metavar="target-b", help="variant B's function (default: the same)")
    compare.add_argument("--target", dest="chip", default="cpu", metavar="CHIP", help="chip of both variants (default cpu)")
    compare.add_argument("--target-a", dest="chip_a", metavar="CHIP", help="chip of variant A")
    compare.add_argument("--target-b", dest="chip_b", metavar="CHIP", help="chip of variant B")
    compare.add_argument("--args", help="example inputs of both variants, as shape specs")
    compare.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of both (repeatable)")
    compare.add_argument("--set-a", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of A only (repeatable)")
    compare.add_argument("--set-b", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of B only (repeatable)")
    compare.add_argument("--mesh", metavar="AXIS=N,...", help="both variants' mesh on a TPU slice, e.g. data=-1,model=2 (-1 fits each slice)")
    compare.add_argument("--shard", metavar="SPECS", help="both variants' PartitionSpecs, one per positional input")
    compare.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: each variant's target)")
    compare.add_argument("--top", type=_count, default=10, metavar="N", help="kernels whose bytes changed most: rows to print (0 for all)")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has the module")


def _normalise(argv: list[str]) -> list[str]:
    """`inspector TARGET ...` is `inspector tui TARGET ...`."""
    rest = [a for a in argv if a != "--debug"]
    if rest and not rest[0].startswith("-") and rest[0] not in VERBS + ("tui",):
        i = argv.index(rest[0])
        return argv[:i] + ["tui"] + argv[i:]
    return argv


# ----------------------------------------------------------------------------- the work (child process)


@contextlib.contextmanager
def _exits_are_failures(target, doing: str):
    """sys.exit() (any BaseException but a real Ctrl-C) in the user's function is a failure of
    that function with its code, never our exit."""
    from .target import describe_error, reraise_interrupt

    try:
        yield
    except Exception:
        raise
    except BaseException as err:
        reraise_interrupt(err)
        raise TargetFailure(describe_error(err, target.file, doing)) from err


def _use_cache(opts):
    from . import compile_cache

    if not compile_cache.enabled():
        return False
    return compile_cache.REFRESH if opts.no_cache else True


def _load(opts):
    from .target import load_target

    return load_target(opts.target, args=opts.args, ref=getattr(opts, "ref", None), sets=opts.set,
                       mesh=getattr(opts, "mesh", None), shard=getattr(opts, "shard", None))


def _report(opts, *, compile: bool, jaxpr_text: bool, fusions: bool, pallas: bool = False, buffers: bool = False,
            collectives: bool = False, passes: bool = False):
    """Load the target, capture its stages and gather the Report: the one path every verb takes.
    ``passes``: compile with XLA's pass dumps (the passes view; kernels name the pass that made them)."""
    from .chips import get_chip
    from .report import make_report
    from .target import load_target

    chip = get_chip(opts.chip)
    roofline = get_chip(opts.roofline) if getattr(opts, "roofline", None) else None
    target = _load(opts)
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        report = make_report(target, chip, compile=compile, jaxpr_text=jaxpr_text, fusions=fusions, pallas=pallas,
                             roofline_chip=roofline, use_cache=_use_cache(opts), buffers=buffers,
                             collectives=collectives, passes=passes, pass_select=getattr(opts, "pass_select", None))
    report.stages.op_counts  # counted here, where the stages were made, not in the process that renders
    return report


def _work_show(opts):
    passes = opts.view == "passes" or bool(getattr(opts, "passes", False))
    return _report(opts, compile=opts.view in ("overview", "hlo", "fusions", "memory", "collectives", "passes"),
                   jaxpr_text=opts.view == "jaxpr", fusions=opts.view in ("overview", "fusions"),
                   pallas=opts.view in ("overview", "pallas"), buffers=opts.view == "memory",
                   collectives=opts.view in ("overview", "collectives"), passes=passes)


def _work_compare(opts):
    from .compare import compare_reports

    reports = [_report(side, compile=True, jaxpr_text=False, fusions=True, pallas=True) for side in _compare_sides(opts)]
    return compare_reports(*reports)


def _compare_sides(opts) -> list:
    """The two variants' options: A is TARGET with --set and --set-a on --target-a (or --target),
    B is TARGET-B (or TARGET) with --set and --set-b on --target-b (or --target)."""
    import copy

    sides = []
    for spec, chip, sets in ((opts.target, opts.chip_a, opts.set_a), (opts.target_b or opts.target, opts.chip_b, opts.set_b)):
        side = copy.copy(opts)
        side.target, side.chip, side.set, side.ref = spec, chip or opts.chip, list(opts.set) + list(sets), None
        sides.append(side)
    return sides


def _work_export(opts):
    return _report(opts, compile=True, jaxpr_text=bool(opts.json_path), fusions=True, pallas=True, collectives=True)


def _work_check(opts):
    from .chips import parse_targets
    from .pallas.check import run_check
    from .target import load_target

    chips = parse_targets(opts.chip)
    target = _load(opts)
    with _exits_are_failures(target, f"raised while tracing {target.name}"):
        result = run_check(target, chips, estimate_only=opts.estimate_only, use_cache=_use_cache(opts))
        if opts.sweep:
            from .pallas.sweep import sweep

            result.sweep = sweep(target, [c for c in chips if c.is_tpu or c.kind == "gpu"])
    return result


def _work_diff(opts):
    from .chips import parse_targets
    from .diff import run_diff
    from .target import load_target

    # diff runs on this machine; --target names the TPU that interpret mode simulates (the first TPU given)
    chip = next((c for c in parse_targets(opts.chip) if c.is_tpu), None)
    target = _load(opts)
    with _exits_are_failures(target, f"raised while running {target.name}"):
        try:
            return run_diff(target, seed=opts.seed, atol=opts.atol, rtol=opts.rtol, grad=opts.grad, runs=opts.runs,
                            chip=chip, strict=opts.strict)
        except ValueError as err:
            raise UsageError(str(err)) from err


def _work_doctor(opts):
    from .chips import CHIPS, parse_targets
    from .doctor import checkup

    chips = parse_targets(opts.chip) if opts.chip else [c for c in CHIPS if c.is_tpu and c.devices == 1]
    not_tpu = [c.name for c in chips if not c.is_tpu]
    if not_tpu:
        raise UsageError(f"doctor --target takes TPU targets (it compiles for them without a TPU), not {', '.join(not_tpu)}")
    return checkup(chips, svg_required=opts.svg)


_WORK = {"show": _work_show, "tui": _work_show, "export": _work_export, "check": _work_check, "diff": _work_diff,
         "compare": _work_compare, "doctor": _work_doctor}


def _work(opts):
    """What the verb computes: runs jax and the user's code, returns plain data. Whatever the
    user's code prints goes to stderr: stdout is the inspector's alone."""
    from . import environment

    environment.prepare(debug=opts.debug)
    from .jax_internals import check_version

    if opts.verb != "doctor" and (note := check_version()) is not None:  # doctor says it in its table
        print(f"inspector: note: {note}", file=sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return _WORK[opts.verb](opts)
    except (RuntimeError, AssertionError) as err:  # JAX_PLATFORMS names a backend jax cannot start
        usage = environment.backend_failure(err)
        if usage is None:
            raise
        raise usage from err


def _run(opts):
    """``_work(opts)`` in a child process (the CLI), or here (``main(isolate=False)``: tests)."""
    if not opts.isolate:
        return _work(opts)
    from .remote import run_isolated

    return run_isolated(_work, opts)


# ----------------------------------------------------------------------------- the verbs (render here)


def _show(opts) -> int:
    from .views.printer import make_console, print_json, print_view

    select = getattr(opts, "pass_select", None)
    if select is not None and opts.view == "overview":
        opts.view = "passes"  # --pass alone asks for the passes view
    if select is not None and opts.view != "passes":
        raise UsageError(f"--pass is for the passes view, not --view {opts.view}")
    report = _run(opts)
    console = make_console()
    if opts.json:
        texts = () if opts.view in ("overview", "fusions", "memory", "collectives", "passes") else (opts.view,)
        print_json(report.to_dict(texts=texts), console)
    else:
        print_view(report, opts.view, console, sort=opts.sort, top=opts.top)
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _export_paths(opts) -> None:
    """Before the compile: every output names its own file in a folder that exists."""
    from .atomic import check_not_read_only, check_writable

    seen: dict[str, str] = {}
    for flag, path in (("--json", opts.json_path), ("--dot", opts.dot), ("--svg", opts.svg), ("--html", opts.html)):
        if not path:
            continue
        check_writable(path)
        check_not_read_only(path)
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"{seen[real]} and {flag} both name {path}: give each output its own file")
        seen[real] = flag


def _export(opts) -> int:
    from .atomic import write_atomic
    from .hlo.graph import render_svg

    if not (opts.svg or opts.dot or opts.json_path or opts.html):
        raise UsageError("export needs at least one of --svg PATH, --dot PATH, --html PATH, --json PATH")
    _export_paths(opts)
    drawings = [(f, p) for f, p in (("SVG", opts.svg), ("DOT", opts.dot), ("HTML", opts.html)) if p]
    if drawings:  # fail before the compile when the SVG cannot be drawn
        from .hlo.graph import dot_available
        if (opts.svg or opts.html) and not dot_available():
            render_svg(None)  # raises the how-to-install message
    report = _run(opts)
    written, failure = [], None
    if opts.json_path:
        written.append(f"{write_atomic(opts.json_path, report.to_json())} (the Report)")
    if drawings and report.fusions is None:
        reason = report.stages.compile_error.headline if report.stages.compile_error else "not compiled"
        failure = TargetFailure(f"no kernel graph, so no {' or '.join(f for f, _ in drawings)} written: {reason}")
    elif drawings:
        graph, summary = report.kernel_graph(max_nodes=opts.max_nodes, expand=tuple(opts.expand), color=opts.color)
        what = f"{summary.nodes} nodes" + (f", {len(summary.collapsed)} groups collapsed (--expand SCOPE to open one)" if summary.collapsed else "")
        if opts.dot:
            written.append(f"{write_atomic(opts.dot, graph.source)} ({what})")
        svg = render_svg(graph, summary.nodes) if (opts.svg or opts.html) else b""
        if opts.svg:
            written.append(f"{write_atomic(opts.svg, svg)} ({what})")
        if opts.html:
            from .hlo.graph import group_svgs
            from .views.html_graph import graph_page
            page = graph_page(summary.graph, svg.decode(), group_svgs(report.fusions, summary.graph))
            written.append(f"{write_atomic(opts.html, page)} ({what}; open it in a browser)")
    # `--json /dev/stdout | jq`: stdout is one of the outputs, so what was written is said on stderr
    said = sys.stderr if any(_is_stdout(p) for p in (opts.json_path, opts.dot, opts.svg, opts.html) if p) else sys.stdout
    for line in written:
        print(f"wrote {line}", file=said)
    if failure is not None:
        raise failure
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _is_stdout(path: str) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # no such file, or a stdout without a descriptor
        return False


def _emit(opts, result, view) -> int:
    """Print a check or diff result (JSON with --json) and turn its verdict into the exit code."""
    import dataclasses

    from .views.printer import make_console, print_json, print_fitting

    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        print_fitting(console, view(result))
    if result.ok:
        return EXIT_OK
    return EXIT_UNDECIDED if getattr(result, "undecided", None) and not result.failed else EXIT_FINDINGS


def _compare(opts) -> int:
    import dataclasses

    from .views.compare import compare_view
    from .views.printer import make_console, print_fitting, print_json

    sides = _compare_sides(opts)
    a, b = sides
    params = lambda side: dict(item.split("=", 1) if "=" in item else (item, None) for item in side.set)  # the last --set wins
    if (a.target, a.chip, params(a)) == (b.target, b.chip, params(b)):
        raise UsageError("compare needs two different variants: give a second target, --set-a/--set-b "
                         "(e.g. --set-a block_q=128 --set-b block_q=256) or --target-a/--target-b")
    result = _run(opts)
    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        print_fitting(console, compare_view(result, top=opts.top))
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _check(opts) -> int:
    from .views.pallas import check_view

    from .chips import parse_targets

    local = [c.name for c in parse_targets(opts.chip) if c.is_local]
    if local:
        raise UsageError(f"check is about TPU and GPU targets, not {', '.join(local)}: e.g. --target tpu-v5e,tpu-v6e,h100")
    return _emit(opts, _run(opts), check_view)


def _diff(opts) -> int:
    from .views.diff import diff_view

    from .chips import parse_targets

    spec_only = [c.name for c in parse_targets(opts.chip) if c.kind == "gpu"]
    if spec_only:
        raise UsageError(f"diff runs on this machine, not on {', '.join(spec_only)}: --target names the TPU that "
                         "interpret mode simulates (e.g. tpu-v5p), or cpu/gpu")
    return _emit(opts, _run(opts), diff_view)


def _tui(opts) -> int:
    """The terminal UI; when stdout is not a terminal (a pipe, CI), the overview instead."""
    choose_chip = opts.chip is None  # no --target: the file suggests one (a TPU for TPU kernels)
    opts.chip = opts.chip or "cpu"
    if not sys.stdout.isatty() or opts.json:
        opts.view, opts.roofline, opts.sort, opts.top = "overview", None, "order", 40
        return _show(opts)
    from .views.tui.app import InspectorApp

    from .chips import get_chip
    from .compile_cache import enabled as cache_enabled
    from .session import Session

    get_chip(opts.chip)  # a bad --target, --mesh or --shard is a usage error before the screen opens
    if opts.mesh is not None:
        from .sharding import parse_mesh
        parse_mesh(opts.mesh)
    if opts.shard is not None:
        from .sharding import parse_specs
        parse_specs(opts.shard)
    session = Session(opts.target, opts.chip, opts.args, opts.ref, list(opts.set), cache_enabled() and not opts.no_cache,
                      mesh=opts.mesh, shard=opts.shard)
    InspectorApp(session, watch=opts.watch, choose_chip=choose_chip).run()
    return EXIT_OK


def _chips(opts) -> int:
    from .views.printer import chip_rows, chips_table, make_console, print_fitting, print_json

    console = make_console()
    if opts.json:
        print_json(chip_rows(), console)
    else:
        print_fitting(console, chips_table())
    return EXIT_OK


def _doctor(opts) -> int:
    from .views.doctor import doctor_view
    from .views.printer import make_console, print_fitting, print_json

    found = _run(opts)
    console = make_console()
    if opts.json:
        print_json(found.to_dict(), console)
    else:
        print_fitting(console, doctor_view(found))
    return EXIT_FINDINGS if found.failed else EXIT_OK


def _tune(opts) -> int:
    """The sweep runs its own worker processes (never run_isolated: Ctrl-C must print what is done)."""
    from .tuning.cli import render_tune, work_tune

    return render_tune(opts, work_tune(opts))


def _cache(opts) -> int:
    import dataclasses
    import json

    from . import compile_cache
    from .units import fmt_bytes

    try:
        found = compile_cache.clear() if opts.action == "clear" else compile_cache.info()
    except OSError as err:
        raise UsageError(f"cannot {'clear' if opts.action == 'clear' else 'read'} the compile cache at "
                         f"{compile_cache.cache_dir()}: {err.strerror or err} (set INSPECTOR_CACHE_DIR to another folder)") from err
    if opts.json:
        print(json.dumps({"action": opts.action, **dataclasses.asdict(found), "enabled": compile_cache.enabled()}, indent=2))
    elif opts.action == "clear":
        print(f"cleared {found.path}: removed {found.entries} entries, {fmt_bytes(found.bytes)}")
    else:
        state = "" if compile_cache.enabled() else " (off: INSPECTOR_NO_CACHE or --xla_dump_to in XLA_FLAGS)"
        where = found.path if found.exists else f"{found.path} (not created yet)"
        print(f"compile cache: {where}{state}\n{found.entries} entries, {fmt_bytes(found.bytes)}"
              + (f" ({found.temp_files} temporary files)" if found.temp_files else "")
              + "\n`inspector cache clear` empties it; INSPECTOR_CACHE_DIR moves it")
    return EXIT_OK


# ----------------------------------------------------------------------------- the process


_OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EINVAL}


def _stdout_usable() -> bool:
    """False when stdout is closed (`>&-`); a stream without a descriptor (a test's capture) is fine."""
    import io

    if sys.stdout is None or sys.stdout.closed:
        return False
    try:
        os.fstat(sys.stdout.fileno())
    except (io.UnsupportedOperation, AttributeError):
        return True
    except (OSError, ValueError):
        return False
    return True


def _reopen_std_streams() -> None:
    """A closed stdin or stderr (`<&-`, `2>&-`) becomes /dev/null: the pipes a child process
    needs must not take those numbers."""
    for fd in (0, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd == 2 and sys.stderr is None:
                sys.stderr = open(2, "w", closefd=False)


def _silence_stdout() -> None:
    """After a failed write: stdout is /dev/null, so the interpreter's final flush cannot fail."""
    if sys.stdout is not sys.__stdout__:
        return  # a stream someone put there (a test's capture): not ours to redirect
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def _say(line: str) -> None:
    try:
        print(f"inspector: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # stderr is gone too: the exit code is all that is left


def _fail(err: BaseException, line: str, code: int, debug: bool) -> int:
    if debug:
        import traceback

        trace = getattr(err, "child_traceback", None) or "".join(traceback.format_exception(err))
        try:
            sys.stderr.write(trace)
        except (OSError, ValueError, AttributeError):
            pass
    _say(line)
    return code


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None, *, isolate: bool = True) -> int:
    """Run one command; returns the exit code. ``isolate=False`` does the work in this process
    (tests: no child to start), with the same messages and codes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if isolate and _main_thread() else None
    try:
        return _main(argv, isolate, debug)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str], isolate: bool, debug: bool) -> int:
    _reopen_std_streams()
    from . import environment

    environment.prepare(debug=debug)
    try:
        opts = build_parser().parse_args(_normalise(argv))
        debug = debug or opts.debug
        opts.isolate = isolate
        if opts.verb is None:
            raise UsageError("give a target (inspector samples/attention.py:naive) or a verb: " + ", ".join(VERBS))
        if not _stdout_usable():
            raise OutputError("standard output is closed: give it a file or a pipe (> out.txt, | less)")
        verbs = {"show": _show, "check": _check, "diff": _diff, "export": _export, "chips": _chips, "tui": _tui,
                 "cache": _cache, "compare": _compare, "doctor": _doctor, "tune": _tune}
        code = verbs[opts.verb](opts)
        sys.stdout.flush()
        return code
    except InspectorError as err:
        return _fail(err, str(err), err.exit_code, debug)
    except KeyboardInterrupt as err:
        return _fail(err, "interrupted (Ctrl-C)", EXIT_SIGINT, False)
    except Terminated as err:
        return _fail(err, "terminated (SIGTERM)", EXIT_SIGTERM, False)
    except (OSError, ValueError) as err:
        if _is_stdout_error(err):
            _silence_stdout()
            reason = "closed" if isinstance(err, ValueError) else (os.strerror(err.errno) if err.errno else str(err))
            return _fail(err, f"cannot write to standard output: {reason}", OutputError.exit_code, debug)
        return _internal(err, debug)
    except Exception as err:  # a bug of ours: still one line, the traceback on request
        return _internal(err, debug)


def _is_stdout_error(err: BaseException) -> bool:
    """A failed write of ours to stdout (closed, full, a reader gone): no file name, an output
    errno, and not an error sent back from the child process."""
    if getattr(err, "child_traceback", None) is not None:
        return False
    if isinstance(err, ValueError):  # "I/O operation on closed file"
        return sys.stdout is not None and sys.stdout.closed
    return err.errno in _OUTPUT_ERRNOS and not getattr(err, "filename", None)


def _internal(err: BaseException, debug: bool) -> int:
    return _fail(err, f"internal error: {type(err).__name__}: {err} (run again with --debug for the traceback)",
                 EXIT_FINDINGS, debug)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def entry() -> None:
    sys.exit(main())
