"""Each verb's options: one function per verb, which its row in the table of verbs
(verb_table.py) names. Parsed before jax loads, so a usage error answers at once."""
from __future__ import annotations

import argparse
from typing import TypeVar

from ..base.chips import DEFAULT_TPU
from ..results.view_table import SHOW_VIEWS, SORT_ORDERS
from .arg_types import SetValues
from .arg_types import count as _count
from .arg_types import gibibytes as _gibibytes
from .arg_types import positive as _positive
from .arg_types import seconds as _seconds
from .arg_types import tolerance as _tolerance

P = TypeVar("P", bound=argparse.ArgumentParser)


def debug_parent(parser_class: type[P]) -> P:
    """Options every verb (and a verb's actions) takes, before or after the verb (SUPPRESS: the
    verb's parser keeps the top-level value when the flag is not repeated after the verb): a
    parent, whose arguments alone are copied (of the verbs' class, for typing)."""
    common = parser_class(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks and jax/libtpu logs")
    return common


def _target_options(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    p.add_argument("target", help="path/to/file.py:function or package.module:function")
    p.add_argument("--target", dest="chip", default=None, metavar="CHIP",
                   help="where to compile: cpu, gpu, or a TPU such as tpu-v5e (see `inspector chips`); default: the TPU "
                        "attached to this machine (compiled without opening it), else $INSPECTOR_TARGET or [tool.inspector] "
                        f"target in pyproject.toml, else {DEFAULT_TPU}")
    p.add_argument("--args", help='example inputs as shape specs, e.g. "bf16[4,2048,128] f32[] k=i32[16]" (default: INSPECT\'s args)')
    p.add_argument("--ref", help="reference function: name in the same file, or file.py:function (default: INSPECT's reference)")
    p.add_argument("--set", action=SetValues, default=[], metavar="NAME=VALUE", help="static keyword parameter (repeatable)")
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


def show_options(p: argparse.ArgumentParser) -> None:
    """show: the target, the view and how it is printed, what the compile adds."""
    _target_options(p)
    p.add_argument("--view", choices=SHOW_VIEWS, default="overview", metavar="VIEW",
                   help="the view to print: " + ", ".join(SHOW_VIEWS))
    p.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target; e.g. h100 for --target cpu)")
    p.add_argument("--sort", choices=SORT_ORDERS, default="order", help="fusions view: row order")
    p.add_argument("--top", type=_count, default=40, metavar="N", help="fusions view: rows to print (0 for all)")
    p.add_argument("--pass", dest="pass_select", metavar="PASS",
                   help="passes view: the diff of the module before and after PASS (a name, a substring or an index; A..B for a range); "
                        "mosaic view: the same for a Mosaic pass (default: none, the list of passes)")
    _time_options(p)
    _measure_option(p)
    p.add_argument("--passes", action="store_true",
                   help="compile with pass dumps: the fusions view names the pass that created each kernel (no compile cache)")
    p.add_argument("--fixes", action="store_true",
                   help="overview: under each finding, the fixes `inspector fix` proves for it (compiles each variant: slow "
                        "the first time, then cached)")


def export_options(p: argparse.ArgumentParser) -> None:
    """export: the target and the files to write."""
    _target_options(p, json_flag=False)
    _time_options(p)
    _measure_option(p)
    p.add_argument("--svg", metavar="PATH", help="kernel graph as SVG (needs Graphviz's dot)")
    p.add_argument("--dot", metavar="PATH", help="kernel graph as Graphviz DOT source")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="the whole Report as JSON")
    p.add_argument("--html", metavar="PATH", help="kernel graph as one self-contained HTML page: pan, zoom, search, "
                   "the slowest kernels (without Graphviz's dot here, the page lays the graph out itself)")
    p.add_argument("--color", choices=("roofline", "bytes", "bound"), default="roofline",
                   help="node colour: roofline time (default), HBM bytes, or memory-/compute-bound")
    p.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: the target)")
    p.add_argument("--max-nodes", type=_positive, default=200, metavar="N", help="collapse groups (layers) past N nodes, merge neighbours past it (default 200)")
    p.add_argument("--expand", action="append", default=[], metavar="GROUP",
                   help="keep this group's kernels when collapsing: a scope (layer3) or words of a group's label ('block #7'); repeatable")
    p.add_argument("--layout-budget", type=_seconds, default=30.0, metavar="SECONDS",
                   help="time for laying out the drawings (default 30); past it Graphviz's simpler settings, then a layout of our own")


def check_options(p: argparse.ArgumentParser) -> None:
    """check: the targets, whether to compile for real, the sweep."""
    _target_options(p)
    p.set_defaults(chip=None)  # chosen_chip: the attached TPU, else DEFAULT_TPU
    p.add_argument("--estimate-only", action="store_true", help="skip the real TPU compiles (libtpu); the static estimate only")
    p.add_argument("--sweep", action="store_true", help="also estimate every combination of INSPECT's params: which block sizes fit")


def fix_options(p: argparse.ArgumentParser) -> None:
    """fix: the targets, what to judge each change by, the patch."""
    _target_options(p)
    p.set_defaults(chip=None)  # chosen_chip: the attached TPU, else DEFAULT_TPU
    p.add_argument("--patch", metavar="FILE", help="write the best fix for the first --target chip as a unified diff of "
                                                   "the source (git apply FILE)")
    p.add_argument("--force", action="store_true", help="let --patch replace a file this tool did not write")
    p.add_argument("--no-numerics", action="store_true",
                   help="skip running each fix in TPU interpret mode against the unfixed kernel (faster; numerics 'not checked')")
    p.add_argument("--no-time", action="store_true", help="skip libtpu's time estimate (compiles only: faster)")
    _measure_option(p)


def diff_options(p: argparse.ArgumentParser) -> None:
    """diff: the target, its inputs' seed, the tolerances, the runs."""
    _target_options(p)
    p.add_argument("--seed", type=_count, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--atol", type=_tolerance, help="absolute tolerance (default per dtype)")
    p.add_argument("--rtol", type=_tolerance, help="relative tolerance (default per dtype)")
    p.add_argument("--grad", action="store_true", help="compare gradients too (vjp with a random cotangent)")
    p.add_argument("--runs", type=_count, default=3, metavar="N",
                   help="timed runs after the checked one (0: no timing; default 3); on a TPU, device time from jax's profiler")
    p.add_argument("--strict", action="store_true",
                   help="a kernel the TPU interpreter cannot run is an error (exit 1), not an info finding")


def tui_options(p: argparse.ArgumentParser) -> None:
    """tui: the target, and --watch."""
    _target_options(p)
    p.add_argument("--watch", action="store_true", help="accepted for old scripts: the UI re-analyses a saved target file without it")


def compare_options(p: argparse.ArgumentParser) -> None:
    """compare: the two variants (targets, chips, parameters) and what both compile."""
    p.add_argument("target", help="path/to/file.py:function (variant A, and B unless B is given)")
    p.add_argument("target_b", nargs="?", metavar="target-b", help="variant B's function (default: the same)")
    p.add_argument("--target", dest="chip", default=None, metavar="CHIP",
                   help="chip of both variants (default: the attached TPU, else cpu)")
    p.add_argument("--target-a", dest="chip_a", metavar="CHIP", help="chip of variant A (default: --target)")
    p.add_argument("--target-b", dest="chip_b", metavar="CHIP", help="chip of variant B (default: --target)")
    p.add_argument("--args", help="example inputs of both variants, as shape specs (default: INSPECT's args)")
    p.add_argument("--set", action=SetValues, default=[], metavar="NAME=VALUE", help="a static parameter of both (repeatable)")
    p.add_argument("--set-a", action=SetValues, default=[], metavar="NAME=VALUE", help="a static parameter of A only (repeatable)")
    p.add_argument("--set-b", action=SetValues, default=[], metavar="NAME=VALUE", help="a static parameter of B only (repeatable)")
    p.add_argument("--mesh", metavar="AXIS=N,...", help="both variants' mesh on a TPU slice, e.g. data=-1,model=2 (-1 fits each slice; default: INSPECT's mesh)")
    p.add_argument("--shard", metavar="SPECS", help="both variants' PartitionSpecs, one per positional input (default: INSPECT's shardings)")
    p.add_argument("--roofline", metavar="CHIP", help="chip whose figures the roofline uses (default: each variant's target)")
    p.add_argument("--top", type=_count, default=10, metavar="N", help="kernels whose bytes changed most: rows to print (0 for all; default 10)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    _time_options(p)
    _measure_option(p)
    p.add_argument("--no-cache", action="store_true", help="compile even when the on-disk cache has the module")


def chips_options(p: argparse.ArgumentParser) -> None:
    """chips: JSON or the table."""
    p.add_argument("--json", action="store_true", help="as JSON, each figure with its source")


def cache_options(p: argparse.ArgumentParser) -> None:
    """cache: info or clear."""
    p.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                   help="info: where and how big (default); clear: empty it")
    p.add_argument("--json", action="store_true", help="as JSON")


def doctor_options(p: argparse.ArgumentParser) -> None:
    """doctor: the TPU targets to compile for, whether SVG export is needed."""
    p.add_argument("--target", dest="chip", metavar="CHIPS", help="the TPU targets to compile for, e.g. tpu-v5e,tpu-v6e "
                                                                   "(default: every TPU generation)")
    p.add_argument("--svg", action="store_true", help="SVG export is needed: Graphviz's dot missing is a failure")
    p.add_argument("--json", action="store_true", help="as JSON")
