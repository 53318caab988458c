"""The command line's door: argparse's options checked and turned into the Request every front door
builds (inspector/request.py), plus each verb's small record of its own options. What crosses to
the child process is these records; argparse's Namespace never leaves commands/."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..request import Cache, Request
from ..results.view_table import Needs, get_view


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """check's own: the static estimate only, the sweep of INSPECT's params, and whether several
    TPU compiles each go in a process of their own."""

    estimate_only: bool = False
    sweep: bool = False
    isolate: bool = True  # several TPU compiles each in a process of its own (the CLI's child; tests: one process)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixOptions:
    """fix's own: what each change is judged by, and the patch's file (None: no patch)."""

    numerics: bool = True
    time: bool = True
    patch: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiffOptions:
    """diff's own: the inputs' seed, the tolerances, the gradients, the timed runs."""

    seed: int = 0
    atol: float | None = None
    rtol: float | None = None
    grad: bool = False
    runs: int = 3
    strict: bool = False
    start_devices: bool = False  # its process opens the chip (the CLI's child)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DoctorOptions:
    """doctor's own: the TPU generations to compile for (None: every one), and whether SVG export
    is needed (Graphviz's dot missing is a failure)."""

    chip: str | None = None
    svg: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareOptions:
    """compare's own: variant B (the Request sent is variant A)."""

    b: Request


def request_from(opts: argparse.Namespace, needs: Needs | None = None, **more: Any) -> Request:
    """The Request of a verb that takes a target (show, export, check, fix, diff, the UI): the
    target options every such verb has, then ``more`` (the fields of the verb's own options)."""
    return Request(opts.target, opts.chip, args=opts.args, ref=opts.ref, sets=tuple(opts.set), mesh=opts.mesh,
                   shard=opts.shard, chip_reason=opts.chip_reason, needs=needs or Needs(),
                   cache=Cache.asked(refresh=opts.no_cache), debug=opts.debug, **more)


def _timed(opts: argparse.Namespace, view: str | None = None, json: bool = False) -> dict:
    """The Request's time and measure fields of a verb with --time, --time-budget, --time-memory and
    --measure (show, export, compare), checked here once: libtpu's budget only with what it budgets,
    --measure only where the target's chip is attached."""
    from ..verbs.rules import check_measure, check_time_options

    check_time_options(opts.time, opts.time_budget, view, json, opts.time_memory, opts.chip)
    check_measure(opts.measure, chip=opts.chip)
    return dict(time_budget=opts.time_budget, time_memory=opts.time_memory, measure=opts.measure,
                roofline=opts.roofline)


def shown_view(opts: argparse.Namespace) -> str:
    """The view show prints: --view's, or the passes view for --pass alone."""
    return "passes" if opts.pass_select is not None and opts.view == "overview" else opts.view


def show_request(opts: argparse.Namespace) -> Request:
    """show's Request: what its view needs, with what --passes and --time add."""
    from ..verbs.rules import show_needs

    timed = _timed(opts, opts.view, opts.json)
    return request_from(opts, show_needs(shown_view(opts), passes=opts.passes, time=opts.time),
                        pass_select=opts.pass_select, fixes=opts.fixes, **timed)


def export_request(opts: argparse.Namespace) -> Request:
    """export's Request: what the graph and the Report's JSON need."""
    needs = get_view("overview").needs | Needs(jaxpr_text=bool(opts.json_path), time=opts.time)
    return request_from(opts, needs, **_timed(opts))


def overview_request(opts: argparse.Namespace) -> Request:
    """The UI's Request: the overview's, what it prints in a pipe."""
    return request_from(opts, get_view("overview").needs)


def compare_sides(opts: argparse.Namespace) -> tuple[Request, Request]:
    """The two variants' requests: A is TARGET with --set and --set-a on --target-a (or --target),
    B is TARGET-B (or TARGET) with --set and --set-b on --target-b (or --target). Both need what
    the fusions view does (the kernels, the totals, each Pallas kernel's VMEM)."""
    from ..compilation.static_params import FlagValue

    needs = get_view("fusions").needs | Needs(time=opts.time)
    both = Request(opts.target, opts.chip, args=opts.args, sets=tuple(opts.set), mesh=opts.mesh, shard=opts.shard,
                   chip_reason=opts.chip_reason, needs=needs, cache=Cache.asked(refresh=opts.no_cache),
                   debug=opts.debug, **_timed(opts))
    sides: list[Request] = []
    for spec, chip, sets in ((opts.target, opts.chip_a, opts.set_a), (opts.target_b or opts.target, opts.chip_b, opts.set_b)):
        flag = "--set-a" if not sides else "--set-b"
        sides.append(dataclasses.replace(both, spec=spec, chip=chip or opts.chip,
                                         chip_reason=None if chip else both.chip_reason,
                                         # messages name the flag given
                                         sets=both.sets + tuple(FlagValue(item, flag) for item in sets)))
    return sides[0], sides[1]


def check_job(opts: argparse.Namespace) -> tuple[Request, CheckOptions]:
    return request_from(opts), CheckOptions(estimate_only=opts.estimate_only, sweep=opts.sweep, isolate=opts.isolate)


def fix_job(opts: argparse.Namespace) -> tuple[Request, FixOptions]:
    from ..verbs.rules import check_measure

    check_measure(opts.measure, chip=opts.chip)
    return request_from(opts, measure=opts.measure), FixOptions(numerics=not opts.no_numerics, time=not opts.no_time,
                                                                patch=opts.patch)


def diff_job(opts: argparse.Namespace) -> tuple[Request, DiffOptions]:
    return request_from(opts), DiffOptions(seed=opts.seed, atol=opts.atol, rtol=opts.rtol, grad=opts.grad, runs=opts.runs,
                                           strict=opts.strict, start_devices=opts.isolate)


def doctor_job(opts: argparse.Namespace) -> tuple[Request, DoctorOptions]:
    """doctor inspects no target: its Request carries --debug, its own record the chips."""
    return Request("", debug=opts.debug), DoctorOptions(chip=opts.chip, svg=opts.svg)
