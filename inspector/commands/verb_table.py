"""The table of verbs: one row per verb of the ``inspector`` command, as the table of views
(inspector/results/view_table.py) has one per view. The parser, ``inspector --help``, the dispatch in
``cli.py`` and the child process's work all read it, so a new verb is one row here, its options
and its two functions.

A verb's functions are named as ``"module:function"`` (in ``inspector.commands``, or a full dotted
module) and imported when the verb runs: ``inspector --help`` builds its parser from this module
without loading the views, the analyses or jax."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
from typing import Any, Callable

from . import options
from .baseline import add_check_options, add_tui_options, baseline_options
from .help_text import examples
from .tune import tune_options


@dataclasses.dataclass(frozen=True)
class Verb:
    name: str
    help: str  # its line in `inspector --help`
    examples: tuple[str, ...]  # its --help's examples: commands that run as written from the repository's root
    options: tuple[Callable[[argparse.ArgumentParser], None], ...]  # each adds a group of its arguments to its parser
    printer: str | Callable  # in this process: checks the options, has the work done, prints; returns the exit code
    # what it computes, in the child process (``work.run``): jax and the user's code, from the Request
    # and the verb's own record of options (commands/requests.py)
    work: str | Callable | None = None
    # where the usage error's list of verbs names it, the most used first (None: not named; tui is what
    # `inspector TARGET` opens); a verb left at the default comes last
    listed: int | None = 100

    @property
    def epilog(self) -> str:
        return examples(*self.examples)


def load(name: str | Callable | None) -> Any:
    """``"module:function"`` (a module of inspector.commands, or a dotted one) -> the function (a
    function given as itself is itself)."""
    if name is None or callable(name):
        return name
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module if "." in module else f"inspector.commands.{module}"), attribute)


VERBS: tuple[Verb, ...] = (
    Verb("show", "print one view of a target", (
        "inspector show samples/attention.py:naive                                # the overview",
        "inspector show samples/attention.py:naive --view fusions --target tpu-v5e",
        "inspector show samples/matmul.py:tiled --target tpu-v5e --time --view fusions",
        "inspector show samples/attention.py:flash --target tpu-v5e --view pallas --json",
    ), (options.show_options,), "verbs:show", "work:work_show", listed=1),
    Verb("export", "write the kernel graph (SVG, interactive HTML, DOT) and the Report (JSON) to files", (
        "inspector export samples/attention.py:naive --svg naive.svg",
        "inspector export samples/attention.py:naive --html naive.html --target tpu-v5e",
        "inspector export samples/transformer.py:train_step --svg step.svg --expand layer3",
    ), (options.export_options,), "verbs:export", "work:work_show", listed=4),
    Verb("check", "VMEM fit, layout rules and BlockSpec bugs of every pallas_call; exit 1 on a problem", (
        "inspector check samples/attention.py:flash --target tpu-v5e,tpu-v6e",
        "inspector check samples/attention.py:flash --target tpu-v5e --set block_q=4096",
        "inspector check samples/bugs.py:dropped_tail --estimate-only",
    ), (options.check_options, add_check_options), "verbs:check", "work:work_check", listed=2),
    Verb("diff", "run the function and its reference on the same inputs; where do they differ", (
        "inspector diff samples/bugs.py:dropped_tail",
        "inspector diff samples/attention.py:flash --args 'bf16[1,512,128] bf16[1,512,128] bf16[1,512,128]' --grad",
    ), (options.diff_options,), "verbs:diff", "work:work_diff", listed=3),
    Verb("fix", "try the changes the findings point to (VMEM limit, Buffered(1), parallel axes, block sizes, grid "
                "order): each compiled per chip, timed and checked against the unfixed kernel; --patch writes the best", (
        "inspector fix samples/attention.py:flash --set block_q=4096 --target tpu-v5e",
        "inspector fix samples/matmul.py:tiled --target tpu-v5p --no-numerics --patch fix.diff",
    ), (options.fix_options,), "verbs:fix", "work:work_fix", listed=5),
    Verb("tui", "the terminal UI (what `inspector TARGET` opens)", (
        "inspector samples/attention.py:flash                  # same as `inspector tui ...`",
        "inspector samples/attention.py:naive --target tpu-v5e",
    ), (options.tui_options, add_tui_options), "verbs:tui", "work:work_show", listed=None),
    Verb("compare", "two variants side by side: two targets, two --set's or two chips", (
        "inspector compare samples/matmul.py:tiled --set-a bm=128 --set-b bm=256 --target tpu-v5e",
        "inspector compare samples/attention.py:naive --target-a tpu-v5e --target-b tpu-v6e",
    ), (options.compare_options,), "verbs:compare", "work:work_compare", listed=5),
    # tune's work runs in this process: it starts worker processes of its own (commands/tune.py says why)
    Verb("tune", "rank every candidate of INSPECT's params (or --grid) per chip by libtpu's estimated time, without a TPU", (
        "inspector tune samples/matmul.py:tiled --target tpu-v5e,tpu-v6e",
        "inspector tune samples/matmul.py:tiled --grid bm=128,256 --set bk=256 --table mm_tuning.json",
    ), (tune_options,), "tune:tune_verb", listed=6),
    Verb("baseline", "save the figures of kernels per chip (no TPU) to gate CI on with `check --baseline`; diff two saved "
                     "baselines", (
        "inspector baseline save perf.json samples/matmul.py --target tpu-v5e,tpu-v6e",
        "inspector check samples/matmul.py --baseline perf.json                # exit 1 when a figure moved",
        "inspector baseline diff perf.json perf-new.json",
    ), (baseline_options,), "baseline:baseline_verb", listed=7),
    Verb("chips", "list the hardware targets and their figures", ("inspector chips", "inspector chips --json"),
         (options.chips_options,), "verbs:chips", listed=8),
    Verb("cache", "where the compile cache is and its size; `cache clear` empties it", ("inspector cache", "inspector cache clear"),
         (options.cache_options,), "verbs:cache", listed=9),
    Verb("doctor", "versions found, a deviceless compile per TPU generation and GPU, Graphviz, accelerators, the cache; exit 1 "
                   "when something asked for cannot work", ("inspector doctor", "inspector doctor --target tpu-v5e --svg"),
         (options.doctor_options,), "verbs:doctor", "work:work_doctor", listed=10),
)


def get_verb(name: str) -> Verb:
    return next(v for v in VERBS if v.name == name)
