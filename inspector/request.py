"""One request for a Report, whichever front door it came through: the command line builds it at
its edge from argparse's options (commands/requests.py), the Python API from its arguments
(``inspector.inspect``), the terminal UI from its Session (``Session.request``). Below the front
doors nothing sees an argparse Namespace: ``report_for`` takes this record and nothing else, so an
option one door has the others can set too (``time_memory`` included), and a figure is the same
through each.

Plain data that pickles (the CLI sends it to the child process that does the work), but for a
``Target`` built from a function object (the Python API), which stays in its process."""
from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Callable

import inspector.compilation.compile_cache as compile_cache

from .results.view_table import Needs

if TYPE_CHECKING:
    from .compilation.target import Target
    from .libtpu import Budget
    from .results.report import Report


class Cache(enum.Enum):
    """The compile cache's one setting, for every verb and door: read and store (ON), left alone
    (OFF), or compile anyway and store the fresh result (REFRESH, ``--no-cache``). ``value`` is
    what the compile takes (``compilation/compile_cache.py``'s ``use_cache``)."""

    ON = True
    OFF = False
    REFRESH = compile_cache.REFRESH

    def __bool__(self) -> bool:  # the cache is used at all (read, or stored into)
        return self is not Cache.OFF

    @classmethod
    def asked(cls, use: bool = True, *, refresh: bool = False) -> Cache:
        """The setting a door's options ask for: OFF where the cache is off (INSPECTOR_NO_CACHE) or
        ``use`` is False, REFRESH for ``refresh`` (--no-cache), else ON."""
        if not use or not compile_cache.enabled():
            return cls.OFF
        return cls.REFRESH if refresh else cls.ON


@dataclasses.dataclass(frozen=True)
class Request:
    """What to inspect and how: the target (a ``file.py:function`` spec with its settings, or a
    Target built already), the chip, what is needed, libtpu's time budget and memory, whether to
    measure on the attached TPU, and the compile cache."""

    spec: str | Target  # "file.py:function" (args, ref, sets, mesh and shard apply), or a Target made already
    chip: str = "cpu"
    _: dataclasses.KW_ONLY
    args: str | None = None  # --args: shape specs
    ref: str | None = None  # --ref
    sets: tuple[str, ...] = ()  # --set NAME=VALUE, in order (the last one wins)
    mesh: str | None = None  # --mesh data=4,model=4
    shard: str | None = None  # --shard "P('data',None) P()"
    chip_reason: str | None = None  # why this chip, when none was named (compilation/default_target.py)
    needs: Needs = Needs()
    roofline: str | None = None  # the chip whose figures the roofline uses (default: ``chip``)
    pass_select: str | None = None  # --pass: the pass (XLA's or Mosaic's) whose diff to keep
    time_budget: float | None = None  # seconds libtpu's simulation may take (default: Budget's)
    time_memory: int | None = None  # bytes its compiles may use (default: Budget's)
    measure: bool = False  # each kernel's device time on the attached TPU
    fixes: bool = False  # the fixes `inspector fix` proves, beside the findings they answer (a TPU chip: compiles each)
    cache: Cache = Cache.ON  # the compile cache (True, False and "refresh" are taken as their Cache)
    memo: bool = True  # keep this process's trace and lowering for the next request (the CLI's child, the UI's worker)
    debug: bool = False  # the measuring child's logs on stderr

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache", Cache(self.cache))

    def target(self) -> Target:
        """The Target the stages trace (loaded afresh from the spec each call)."""
        if not isinstance(self.spec, str):
            return self.spec
        from .compilation.target import load_target

        return load_target(self.spec, args=self.args, ref=self.ref, sets=list(self.sets), mesh=self.mesh, shard=self.shard)

    def budget(self, option: str = "--time-budget") -> Budget:
        """libtpu's budget: ``time_budget`` and ``time_memory`` over Budget's defaults (a budget it
        cannot keep is a UsageError naming ``option``)."""
        from .verbs.rules import time_budget

        return time_budget(self.time_budget, option, self.time_memory)


def report_for(request: Request, target: Target | None = None, *, budget_option: str = "--time-budget",
               measure_on_chip: Callable | None = None) -> Report:
    """The Report the request asks for: ``target`` (``request.target()`` unless given: a front door
    that loads it itself, to name it in a failure) captured on the chip, the analyses ``needs``
    says, then measured on the attached TPU with ``measure``. The one path every front door takes;
    a budget libtpu cannot keep is a UsageError naming ``budget_option``, as that door spells it.
    ``measure_on_chip(load, chip)``: how the door measures (default: families/measuring.py's, in a child
    process on the attached TPU)."""
    from .base.chips import get_chip
    from .results.report import make_report

    chip = get_chip(request.chip)
    roofline = get_chip(request.roofline) if request.roofline else None
    target = request.target() if target is None else target
    report = make_report(target, chip, request.needs, roofline_chip=roofline, use_cache=request.cache.value,
                         memo=request.memo, pass_select=request.pass_select, time_budget=request.budget(budget_option))
    _ = report.stages.op_counts  # counted here, where the stages were made, not in the process that renders
    if request.chip_reason:
        report = dataclasses.replace(report, chip_reason=request.chip_reason)
    if request.measure:
        from .results.report import with_measurement

        if measure_on_chip is None:
            import functools

            from .families.measuring import measure_on_chip as on_chip

            measure_on_chip = functools.partial(on_chip, debug=request.debug)
        report = with_measurement(report, measure_on_chip(request.target, chip))
    if request.fixes:
        from .verbs.fixing import fixes_on

        fixes = fixes_on(target, chip, sets=request.sets, use_cache=request.cache.value, pick="e.g. target tpu-v5e")
        report = dataclasses.replace(report, fixes=fixes)
    return report
