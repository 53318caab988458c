"""The command line's edge: argparse's options turned into the Request every front door builds
(inspector/request.py). Nothing past this module reads the Namespace for a Report."""
from __future__ import annotations

import argparse

from ..request import Request, use_cache
from ..results.view_table import Needs


def request_from(opts: argparse.Namespace, needs: Needs) -> Request:
    """The Request of a verb that makes a Report (show, export, the UI's overview in a pipe, each
    side of compare), as its options ask."""
    return Request(opts.target, opts.chip, args=opts.args, ref=getattr(opts, "ref", None), sets=tuple(opts.set),
                   mesh=getattr(opts, "mesh", None), shard=getattr(opts, "shard", None),
                   chip_reason=getattr(opts, "chip_reason", None), needs=needs, roofline=getattr(opts, "roofline", None),
                   pass_select=getattr(opts, "pass_select", None), time_budget=getattr(opts, "time_budget", None),
                   time_memory=getattr(opts, "time_memory", None), measure=bool(getattr(opts, "measure", False)),
                   fixes=bool(getattr(opts, "fixes", False)),
                   cache=use_cache(True, refresh=bool(opts.no_cache)), debug=bool(getattr(opts, "debug", False)))


def show_request(opts: argparse.Namespace) -> Request:
    """show's Request: what its view needs, with what --passes and --time add."""
    from ..verbs.rules import show_needs

    return request_from(opts, show_needs(opts.view, passes=bool(getattr(opts, "passes", False)),
                                         time=bool(getattr(opts, "time", False))))


def compare_sides(opts: argparse.Namespace, needs: Needs) -> list[Request]:
    """The two variants' requests: A is TARGET with --set and --set-a on --target-a (or --target),
    B is TARGET-B (or TARGET) with --set and --set-b on --target-b (or --target)."""
    import dataclasses

    from ..compilation.static_params import FlagValue

    both = request_from(opts, needs)
    sides: list[Request] = []
    for spec, chip, sets in ((opts.target, opts.chip_a, opts.set_a), (opts.target_b or opts.target, opts.chip_b, opts.set_b)):
        flag = "--set-a" if not sides else "--set-b"
        sides.append(dataclasses.replace(both, spec=spec, chip=chip or opts.chip, ref=None,
                                         chip_reason=None if chip else both.chip_reason,
                                         # messages name the flag given
                                         sets=both.sets + tuple(FlagValue(item, flag) for item in sets)))
    return sides
