"""The verbs as the parent process runs them: check the options, have the work done (in a child
process), render the result and choose the exit code.

Imported inside the verb that uses them, so that ``inspector --help`` (which builds its parser from
this module) loads none of them: the views (rich, textual), the kernel graph, the cache's state
and the terminal UI's Session."""
from __future__ import annotations

import os
import sys

from ..base import json_text
from ..base.atomic import check_not_read_only, check_writable, refuse_foreign, write_atomic
from ..base.chips import INTERPRET_EXAMPLE, get_chip, parse_targets
from ..base.errors import EXIT_FINDINGS, EXIT_OK, EXIT_UNDECIDED, TargetFailure, UsageError
from ..compilation.sharding import parse_mesh, parse_specs
from ..base.units import fmt_bytes
from ..request import Request
from ..verbs.rules import check_chips, diff_simulated_chip, require_two_variants
from ..results.view_table import get_view
from .requests import (CompareOptions, check_job, compare_sides, diff_job, doctor_job, export_request, fix_job,
                       overview_request, show_request, shown_view)
from .work import run
from ..families import family_of


def show(opts) -> int:
    from ..hlo.pass_select import check_view_options

    check_view_options(opts.view, opts.pass_select, opts.passes)  # what the view shows: --pass, --passes
    request = show_request(opts)
    if opts.fixes:
        _check_fixes(opts)
    return _print_report(request, shown_view(opts), json=opts.json, sort=opts.sort, top=opts.top, isolate=opts.isolate)


def _print_report(request: Request, view: str, *, json: bool, sort: str, top: int, isolate: bool) -> int:
    """The Report the request asks for, printed as ``view`` (or JSON); the exit code."""
    from ..views.printer import make_console, print_json, print_view

    report = run("show", request, isolate=isolate)
    console = make_console()
    if json:
        text = get_view(view).stage_text
        print_json(report.to_dict(texts=(text,) if text else ()), console)
    else:
        print_view(report, view, console, sort=sort, top=top)
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _check_fixes(opts) -> None:
    """show --fixes: the overview (or --json), on a TPU."""
    if opts.view != "overview" and not opts.json:
        raise UsageError(f"--fixes puts the fixes under the overview's findings: --view {opts.view} does not show them")
    if not family_of(parse_targets(opts.chip)[0]).info.can.fix:
        raise UsageError(f"--fixes compiles each fix for the chip: --target {opts.chip} has no compiler here (e.g. --target tpu-v5e or h100)")


def _export_paths(opts) -> None:
    """Before the compile: every output names its own file in a folder that exists."""
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


def export(opts) -> int:
    from ..hlo.graph import render_svg

    if not (opts.svg or opts.dot or opts.json_path or opts.html):
        raise UsageError("export needs at least one of --svg PATH, --dot PATH, --html PATH, --json PATH")
    _export_paths(opts)
    request = export_request(opts)
    drawings = [(f, p) for f, p in (("SVG", opts.svg), ("DOT", opts.dot), ("HTML", opts.html)) if p]
    blank = [e for e in opts.expand if not e.strip()]
    if blank:
        raise UsageError(f"--expand {blank[0]!r}: give a group's name, e.g. --expand layer3 or --expand 'block #7'")
    if opts.expand and not drawings:
        raise UsageError("--expand opens groups of the drawing: give --svg, --dot or --html too, or leave it out")
    from ..hlo.graph import dot_available

    # SVG needs Graphviz's dot here; the HTML page lays itself out where dot is missing
    in_page = bool(opts.html) and not dot_available()
    if opts.svg and not dot_available():  # fail before the compile when the SVG cannot be drawn
        try:
            render_svg(None)  # raises the how-to-install message
        except UsageError as err:
            raise UsageError(str(err).replace("so no SVG", "so no --svg") + (
                " (--html lays its graph out in the page without dot)" if opts.html else "")) from None
    report = run("export", request, isolate=opts.isolate)
    written, failure, notes = [], None, []
    if opts.json_path:
        written.append(f"{write_atomic(opts.json_path, report.to_json())} (the Report)")
    if drawings and report.fusions is None:
        reason = report.stages.compile_error.headline if report.stages.compile_error else "not compiled"
        failure = TargetFailure(f"no kernel graph, so no {' or '.join(f for f, _ in drawings)} written: {reason}")
    elif drawings:
        from ..hlo.graph_render import draw
        drawing = draw(report.fusions, report.graph_title(), max_nodes=opts.max_nodes, expand=tuple(opts.expand),
                       color=opts.color, budget_s=opts.layout_budget, svg=bool(opts.svg or opts.html), groups=bool(opts.html),
                       in_page=in_page)
        what = drawing.summary
        if opts.dot:
            written.append(f"{write_atomic(opts.dot, drawing.dot)} ({what})")
        if opts.svg:
            written.append(f"{write_atomic(opts.svg, drawing.svg)} ({what})")
        if opts.html:
            from ..views.html_graph import graph_page
            page = graph_page(drawing.graph, drawing.svg.decode(), drawing.group_svgs, drawing.notes, drawing.group_graphs,
                              dots=drawing.dots)
            written.append(f"{write_atomic(opts.html, page)} ({what}; open it in a browser)")
        notes = drawing.notes
    # `--json /dev/stdout | jq`: stdout is one of the outputs, so what was written is said on stderr
    said = sys.stderr if any(_is_stdout(p) for p in (opts.json_path, opts.dot, opts.svg, opts.html) if p) else sys.stdout
    for line in written:
        print(f"wrote {line}", file=said)
    for note in notes:  # what the drawing simplified to finish, and how to see more
        print(f"note: {note}", file=sys.stderr)
    if failure is not None:
        raise failure
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _is_stdout(path: str) -> bool:
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # no such file, or a stdout without a descriptor
        return False


def _emit(opts, result, view, debug: bool) -> int:
    """Print a check or diff result (JSON with --json) and turn its verdict into the exit code."""
    import dataclasses

    from ..views.printer import make_console, print_fitting, print_json

    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        print_fitting(console, view(result))
    if debug:  # --debug: the traceback (or interpreter output) behind each finding that kept one
        for f in result.findings:
            if isinstance(f.data, dict) and f.data.get("detail"):
                print(f"--debug: {f.code}: {f.message.splitlines()[0][:160]}\n{f.data['detail']}", file=sys.stderr)
    if result.ok:
        return EXIT_OK
    return EXIT_UNDECIDED if getattr(result, "undecided", None) and not result.failed else EXIT_FINDINGS


def compare(opts) -> int:
    import dataclasses

    from ..views.compare import compare_view
    from ..views.printer import make_console, print_fitting, print_json

    a, b = compare_sides(opts)
    params = lambda side: dict(item.split("=", 1) if "=" in item else (item, None) for item in side.sets)  # the last --set wins
    require_two_variants((a.spec, a.chip, params(a)), (b.spec, b.chip, params(b)),
                         "give a second target, --set-a/--set-b (e.g. --set-a block_q=128 --set-b block_q=256) "
                         "or --target-a/--target-b")
    result = run("compare", a, CompareOptions(b=b), isolate=opts.isolate)
    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        print_fitting(console, compare_view(result, top=opts.top))
    return EXIT_OK if result.ok else EXIT_FINDINGS


def check(opts) -> int:
    from ..views.pallas import check_view

    if opts.baseline is not None or opts.more_targets or opts.tolerance:  # the performance gate: commands/baseline.py
        from .baseline import check_baseline

        return check_baseline(opts)

    check_chips(parse_targets(opts.chip), "--target tpu-v5e,tpu-v6e,h100")
    request, options = check_job(opts)
    return _emit(opts, run("check", request, options, isolate=opts.isolate), check_view, request.debug)


def fix(opts) -> int:
    import dataclasses

    from ..views.fix import fix_view
    from ..views.printer import make_console, print_fitting, print_json

    chips = parse_targets(opts.chip)
    if any(not family_of(c).info.can.fix for c in chips):
        raise UsageError(f"fix compiles each change for its chip: --target {', '.join(c.name for c in chips if not family_of(c).info.can.fix)} "
                         "has no compiler here (e.g. --target tpu-v5e,tpu-v5p or h100)")
    request, options = fix_job(opts)
    if opts.patch is not None:
        _check_patch_path(opts)
    elif opts.force:
        raise UsageError("--force lets --patch replace a file this tool did not write: give --patch FILE too, or leave it out")
    result = run("fix", request, options, isolate=opts.isolate)
    console = make_console()
    if opts.json:
        print_json(dataclasses.asdict(result), console)
    else:
        print_fitting(console, fix_view(result))
    if opts.patch and result.patch:
        from ..verbs.patching import patch_bytes

        write_atomic(opts.patch, patch_bytes(result.patch, result.patch_encoding))
        print(f"wrote {opts.patch} ({result.patch_note})", file=sys.stderr if opts.json else sys.stdout)
    elif opts.patch:
        print(f"no patch written: {result.patch_note}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _check_patch_path(opts) -> None:
    """Before any compile: --patch names a file this tool may write (not a .py source, not a file of
    the user's unless --force), and the target's file can be patched at all (its encoding)."""
    from ..compilation.user_files import split_spec
    from ..verbs.patching import is_our_patch, read_source

    if not opts.patch.strip():
        raise UsageError("--patch is empty: give the patch's file name, e.g. --patch fix.diff")
    check_writable(opts.patch)  # a folder, a missing folder: said as such
    refuse_foreign(opts.patch, ours=is_our_patch, what="a patch", force=opts.force)
    check_not_read_only(opts.patch)
    where, _ = split_spec(opts.target)
    if where.endswith(".py") and os.path.isfile(where):
        read_source(where)  # a file that cannot be decoded: said now, not after every trial


def diff(opts) -> int:
    from ..views.diff import diff_view

    diff_simulated_chip(parse_targets(opts.chip), "--target", INTERPRET_EXAMPLE, "cpu/gpu")
    request, options = diff_job(opts)
    return _emit(opts, run("diff", request, options, isolate=opts.isolate), diff_view, request.debug)


def tui(opts) -> int:
    """The terminal UI; when stdout is not a terminal (a pipe, CI), the overview instead."""
    baseline = None
    if opts.baseline is not None:  # the overview shows what moved against it
        from ..baseline.record import load

        baseline = load(opts.baseline)
    if not sys.stdout.isatty() or opts.json:
        if baseline is not None:  # in a pipe: the gate's table, as check --baseline prints it
            from .baseline import check_baseline

            return check_baseline(opts)
        return _print_report(overview_request(opts), "overview", json=opts.json, sort="order", top=40,
                             isolate=opts.isolate)
    import dataclasses

    from ..request import Cache
    from ..session import Session
    from ..views.tui.app import InspectorApp

    get_chip(opts.chip)  # a bad --target, --mesh or --shard is a usage error before the screen opens
    if opts.mesh is not None:
        parse_mesh(opts.mesh)
    if opts.shard is not None:
        parse_specs(opts.shard)
    request = overview_request(opts)  # the Session adds what each tab needs; --no-cache leaves the cache alone
    session = Session(request=dataclasses.replace(request, cache=Cache.OFF) if request.cache is Cache.REFRESH else request)
    InspectorApp(session, baseline=baseline).run()  # it reloads a saved file, --watch or not
    return EXIT_OK


def chips(opts) -> int:
    from ..views.printer import chip_rows, chips_table, make_console, print_fitting, print_json

    console = make_console()
    if opts.json:
        print_json(chip_rows(), console)
    else:
        print_fitting(console, chips_table())
    return EXIT_OK


def doctor(opts) -> int:
    from ..views.doctor import doctor_view
    from ..views.printer import make_console, print_fitting, print_json

    request, options = doctor_job(opts)
    found = run("doctor", request, options, isolate=opts.isolate)
    console = make_console()
    if opts.json:
        print_json(found.to_dict(), console)
    else:
        print_fitting(console, doctor_view(found))
    return EXIT_FINDINGS if found.failed else EXIT_OK


def cache(opts) -> int:
    import dataclasses

    import inspector.compilation.compile_cache as compile_cache

    try:
        found = compile_cache.clear() if opts.action == "clear" else compile_cache.info()
    except OSError as err:
        raise UsageError(f"cannot {'clear' if opts.action == 'clear' else 'read'} the compile cache at "
                         f"{compile_cache.cache_dir()}: {err.strerror or err} (set INSPECTOR_CACHE_DIR to another folder)") from err
    if opts.json:
        print(json_text.dumps({"action": opts.action, **dataclasses.asdict(found), "enabled": compile_cache.enabled()}, indent=2))
    elif opts.action == "clear":
        print(f"cleared {found.path}: removed {found.entries} entries, {fmt_bytes(found.bytes)}")
    else:
        state = "" if compile_cache.enabled() else " (off: INSPECTOR_NO_CACHE or --xla_dump_to in XLA_FLAGS)"
        where = found.path if found.exists or found.problem else f"{found.path} (not created yet)"
        print(f"compile cache: {where}{state}\n{found.entries} entries, {fmt_bytes(found.bytes)}"
              + (f" ({found.temp_files} temporary files)" if found.temp_files else "")
              + (f"\n{found.problem}" if found.problem else "")
              + "\n`inspector cache clear` empties it; INSPECTOR_CACHE_DIR moves it")
    return EXIT_OK
