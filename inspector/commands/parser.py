"""The command line's grammar: every verb and option. Parsed before jax loads, so a usage
error answers at once."""
from __future__ import annotations

import argparse

from ..base.chips import DEFAULT_TPU
from ..base.errors import UsageError
from ..view_table import SHOW_VIEWS, SORT_ORDERS
from .arg_types import count as _count
from .arg_types import positive as _positive
from .arg_types import gibibytes as _gibibytes
from .arg_types import seconds as _seconds
from .arg_types import tolerance as _tolerance
from .help_text import EPILOGS, TOP, HelpFormatter
from .baseline import add_baseline_parser, add_check_options, add_tui_options
from .tune import add_tune_parser

VERBS = ("show", "check", "diff", "export", "compare", "tune", "baseline", "chips", "cache", "doctor")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # every option's default in --help, the examples as written
        kwargs.setdefault("formatter_class", HelpFormatter)
        # no abbreviations: `--time` must not quietly mean `--time-budget` where only that exists
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line and exit 2, like every other usage error
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _globals() -> _Parser:
    """Options every verb takes, before or after the verb (SUPPRESS: the verb's parser keeps the
    top-level value when the flag is not repeated after the verb)."""
    common = _Parser(add_help=False)  # a parent: only its arguments are copied (its class as the verbs', for typing)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks and jax/libtpu logs")
    return common


def _target_options(p: argparse.ArgumentParser, json_flag: bool = True, otherwise: str = "cpu") -> None:
    p.add_argument("target", help="path/to/file.py:function or package.module:function")
    p.add_argument("--target", dest="chip", default=None, metavar="CHIP",
                   help="where to compile: cpu, gpu, or a TPU such as tpu-v5e (see `inspector chips`); default: the TPU "
                        f"attached to this machine (compiled without opening it), else {otherwise}")
    p.add_argument("--args", help='example inputs as shape specs, e.g. "bf16[4,2048,128] f32[] k=i32[16]" (default: INSPECT\'s args)')
    p.add_argument("--ref", help="reference function: name in the same file, or file.py:function (default: INSPECT's reference)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="static keyword parameter (repeatable)")
    p.add_argument("--mesh", metavar="AXIS=N,...", help="shard over a mesh of the target's devices, e.g. data=4,model=4 (one may be -1; default: INSPECT's mesh, else none)")
    p.add_argument("--shard", metavar="SPECS", help="one PartitionSpec per positional input, e.g. \"P('data',None) P(None,'model')\" (default: INSPECT's shardings, else replicated)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print the Report as JSON")
    p.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has this module (and store the fresh result)")


def _measure_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measure", action="store_true",
                   help="run the program on the TPU attached to this machine and read each kernel's device time from "
                        "jax's profiler, beside the estimate and the roofline (needs a TPU VM; the chip is opened only "
                        "for the runs)")


def _time_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time", action="store_true",
                   help="libtpu's estimated time per kernel (its static simulation of the compiled program, no TPU needed; "
                        "compiles of its own, cached)")
    p.add_argument("--time-budget", type=_seconds, metavar="SECONDS",
                   help="what the simulation may take (default 60 s): past it, Pallas grids are simulated smaller and "
                        "extrapolated (labelled so)")
    p.add_argument("--time-memory", type=_gibibytes, metavar="GIB",
                   help="the memory the simulation may use (default 4 GiB): a program that needs more is simulated "
                        "op by op, as far as the budget goes (labelled so)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="inspector", description="Inspect what XLA and Pallas make of a JAX function.", epilog=TOP)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and jax/libtpu logs")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    common = [_globals()]
    show = sub.add_parser("show", help="print one view of a target", parents=common, epilog=EPILOGS["show"])
    _target_options(show)
    show.add_argument("--view", choices=SHOW_VIEWS, default="overview", metavar="VIEW",
                      help="the view to print: " + ", ".join(SHOW_VIEWS))
    show.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target; e.g. h100 for --target cpu)")
    show.add_argument("--sort", choices=SORT_ORDERS, default="order", help="fusions view: row order")
    show.add_argument("--top", type=_count, default=40, metavar="N", help="fusions view: rows to print (0 for all)")
    show.add_argument("--pass", dest="pass_select", metavar="PASS",
                      help="passes view: the diff of the module before and after PASS (a name, a substring or an index; A..B for a range); "
                           "mosaic view: the same for a Mosaic pass (default: none, the list of passes)")
    _time_options(show)
    _measure_option(show)
    show.add_argument("--passes", action="store_true",
                      help="compile with pass dumps: the fusions view names the pass that created each kernel (no compile cache)")
    export = sub.add_parser("export", help="write the kernel graph (SVG, interactive HTML, DOT) and the Report (JSON) to files",
                            parents=common, epilog=EPILOGS["export"])
    _target_options(export, json_flag=False)
    _time_options(export)
    _measure_option(export)
    export.add_argument("--svg", metavar="PATH", help="kernel graph as SVG (needs Graphviz's dot)")
    export.add_argument("--dot", metavar="PATH", help="kernel graph as Graphviz DOT source")
    export.add_argument("--json", dest="json_path", metavar="PATH", help="the whole Report as JSON")
    export.add_argument("--html", metavar="PATH", help="kernel graph as one self-contained HTML page: pan, zoom, search, "
                        "the slowest kernels (without Graphviz's dot here, the page lays the graph out itself)")
    export.add_argument("--color", choices=("roofline", "bytes", "bound"), default="roofline",
                        help="node colour: roofline time (default), HBM bytes, or memory-/compute-bound")
    export.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target)")
    export.add_argument("--max-nodes", type=_positive, default=200, metavar="N", help="collapse groups (layers) past N nodes, merge neighbours past it (default 200)")
    export.add_argument("--expand", action="append", default=[], metavar="GROUP",
                        help="keep this group's kernels when collapsing: a scope (layer3) or words of a group's label ('block #7'); repeatable")
    export.add_argument("--layout-budget", type=_seconds, default=30.0, metavar="SECONDS",
                        help="time for laying out the drawings (default 30); past it Graphviz's simpler settings, then a layout of our own")
    check = sub.add_parser("check", help="VMEM fit, layout rules and BlockSpec bugs of every pallas_call; exit 1 on a problem", parents=common,
                           epilog=EPILOGS["check"])
    _target_options(check, otherwise=DEFAULT_TPU)
    check.set_defaults(chip=None)  # chosen_chip: the attached TPU, else DEFAULT_TPU
    check.add_argument("--estimate-only", action="store_true", help="skip the real TPU compiles (libtpu); the static estimate only")
    check.add_argument("--sweep", action="store_true", help="also estimate every combination of INSPECT's params: which block sizes fit")
    add_check_options(check)
    diff = sub.add_parser("diff", help="run the function and its reference on the same inputs; where do they differ", parents=common,
                          epilog=EPILOGS["diff"])
    _target_options(diff)
    diff.add_argument("--seed", type=_count, default=0, help="seed of the random inputs (default 0)")
    diff.add_argument("--atol", type=_tolerance, help="absolute tolerance (default per dtype)")
    diff.add_argument("--rtol", type=_tolerance, help="relative tolerance (default per dtype)")
    diff.add_argument("--grad", action="store_true", help="compare gradients too (vjp with a random cotangent)")
    diff.add_argument("--runs", type=_count, default=3, metavar="N",
                      help="timed runs after the checked one (0: no timing; default 3); on a TPU, device time from jax's profiler")
    diff.add_argument("--strict", action="store_true",
                      help="a kernel the TPU interpreter cannot run is an error (exit 1), not an info finding")
    tui = sub.add_parser("tui", help="the terminal UI (what `inspector TARGET` opens)", parents=common, epilog=EPILOGS["tui"])
    _target_options(tui)
    tui.add_argument("--watch", action="store_true", help="re-analyse when the target file is saved")
    add_tui_options(tui)
    _compare_parser(sub, common)

    add_tune_parser(sub, common)
    add_baseline_parser(sub, common)
    chips = sub.add_parser("chips", help="list the hardware targets and their figures", parents=common, epilog=EPILOGS["chips"])
    chips.add_argument("--json", action="store_true", help="as JSON, each figure with its source")
    cache = sub.add_parser("cache", help="where the compile cache is and its size; `cache clear` empties it", parents=common,
                           epilog=EPILOGS["cache"])
    cache.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                       help="info: where and how big (default); clear: empty it")
    cache.add_argument("--json", action="store_true", help="as JSON")
    doctor = sub.add_parser("doctor", help="versions found, a deviceless compile per TPU generation, Graphviz, accelerators, "
                                           "the cache; exit 1 when something asked for cannot work", parents=common,
                                epilog=EPILOGS["doctor"])
    doctor.add_argument("--target", dest="chip", metavar="CHIPS", help="the TPU targets to compile for, e.g. tpu-v5e,tpu-v6e "
                                                                        "(default: every TPU generation)")
    doctor.add_argument("--svg", action="store_true", help="SVG export is needed: Graphviz's dot missing is a failure")
    doctor.add_argument("--json", action="store_true", help="as JSON")
    return parser


def _compare_parser(sub, common) -> None:
    compare = sub.add_parser("compare", help="two variants side by side: two targets, two --set's or two chips", parents=common,
                             epilog=EPILOGS["compare"])
    compare.add_argument("target", help="path/to/file.py:function (variant A, and B unless B is given)")
    compare.add_argument("target_b", nargs="?", metavar="target-b", help="variant B's function (default: the same)")
    compare.add_argument("--target", dest="chip", default=None, metavar="CHIP",
                         help="chip of both variants (default: the attached TPU, else cpu)")
    compare.add_argument("--target-a", dest="chip_a", metavar="CHIP", help="chip of variant A (default: --target)")
    compare.add_argument("--target-b", dest="chip_b", metavar="CHIP", help="chip of variant B (default: --target)")
    compare.add_argument("--args", help="example inputs of both variants, as shape specs (default: INSPECT's args)")
    compare.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of both (repeatable)")
    compare.add_argument("--set-a", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of A only (repeatable)")
    compare.add_argument("--set-b", action="append", default=[], metavar="NAME=VALUE", help="a static parameter of B only (repeatable)")
    compare.add_argument("--mesh", metavar="AXIS=N,...", help="both variants' mesh on a TPU slice, e.g. data=-1,model=2 (-1 fits each slice; default: INSPECT's mesh)")
    compare.add_argument("--shard", metavar="SPECS", help="both variants' PartitionSpecs, one per positional input (default: INSPECT's shardings)")
    compare.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: each variant's target)")
    compare.add_argument("--top", type=_count, default=10, metavar="N", help="kernels whose bytes changed most: rows to print (0 for all; default 10)")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    _time_options(compare)
    _measure_option(compare)
    compare.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has the module")


def chosen_chip(opts) -> None:
    """--target left out: the chip of compilation/default_target.py's one rule, for every verb
    that compiles a target and for the UI and its overview in a pipe alike; why, in
    ``opts.chip_reason`` (the overview says it)."""
    opts.chip_reason = None
    if getattr(opts, "chip", "") is not None or opts.verb == "doctor":
        return
    from ..compilation.default_target import default_target

    opts.chip, opts.chip_reason = default_target(opts.verb)


def normalise(argv: list[str]) -> list[str]:
    """`inspector TARGET ...` is `inspector tui TARGET ...`."""
    rest = [a for a in argv if a != "--debug"]
    if rest and not rest[0].startswith("-") and rest[0] not in VERBS + ("tui",):
        i = argv.index(rest[0])
        return argv[:i] + ["tui"] + argv[i:]
    return argv
