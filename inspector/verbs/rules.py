"""The verbs' rules, once: what each verb accepts and what it computes for a view. The command
line and the Python API both call these, so a usage error reads the same in both (each names its
own spelling of the option: ``--target`` or ``targets=``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.errors import UsageError
from ..results.view_table import Needs, get_view
from ..families import family_of

if TYPE_CHECKING:
    from ..base.chips import Chip


def show_needs(view: str, *, passes: bool = False, time: bool = False) -> Needs:
    """What `show --view VIEW` computes; ``passes`` (``--passes``) adds a compile with pass dumps,
    ``time`` (``--time``) libtpu's time estimate per kernel (which needs the kernels)."""
    needs = get_view(view).needs
    if passes:
        needs = needs | Needs(compile=True, passes=True)
    if time:
        needs = needs | Needs(compile=True, fusions=True, pallas=True, time=True)
    return needs


def time_budget(seconds: float | None, option: str, memory_bytes: int | None = None):
    """libtpu's simulation budget: ``seconds`` of compile time in all (default 60), a whole
    simulation past it is extrapolated from smaller grids; ``memory_bytes`` its compiles may use."""
    from ..libtpu import Budget
    from ..libtpu.budget import MIN_SECONDS

    if seconds is not None and (not seconds >= MIN_SECONDS or seconds == float("inf")):
        raise UsageError(f"{option} {seconds:g}: give the seconds libtpu's simulation may take, {MIN_SECONDS:g} or more "
                         f"(each of its compiles is given {MIN_SECONDS:g} s at least; default 60)")
    default = Budget()
    return Budget(seconds=default.seconds if seconds is None else float(seconds),
                  memory_bytes=default.memory_bytes if memory_bytes is None else memory_bytes)


TIMED_VIEWS = ("overview", "fusions", "bundles")  # the views that print libtpu's estimate


def _time_shown(chip: str | None) -> tuple[str, tuple[str, ...]]:
    """What ``--time`` gives on the target's family, in its words, and the views that show it:
    libtpu's estimate has bundles too, a floor only the kernels' column (``chip``: --target, where given)."""
    from ..base.chips import get_chip

    try:
        info = family_of(get_chip(chip)).info if chip and "," not in chip else None
    except UsageError:  # a bad target is said where it is read, with its own advice
        info = None
    if info is None:
        return "the time estimate", TIMED_VIEWS
    return info.time_estimate, TIMED_VIEWS if info.can.time == "simulated" else TIMED_VIEWS[:2]


def check_time_options(time: bool, budget: float | None, view: str | None = None, json: bool = False,
                       memory: int | None = None, chip: str | None = None) -> None:
    """``--time`` only where its figures are shown (it costs compiles of its own), ``--time-budget``
    and ``--time-memory`` only with what they budget (``--time``, or the bundles view, which estimates anyway);
    ``chip``: the target given (--target), whose family words what --time gives."""
    if memory is not None and not time and view != "bundles":
        raise UsageError("--time-memory is the memory of libtpu's time estimate: add --time (or --view bundles)")
    if time and view is not None and view not in TIMED_VIEWS and not json:
        what, views = _time_shown(chip)
        raise UsageError(f"--time adds {what} to the {', '.join(views[:-1])} and {views[-1]} views (and --json): "
                         f"--view {view} does not show it, it only makes the run slower")
    if budget is not None and not time and view != "bundles":
        raise UsageError("--time-budget is the budget of libtpu's time estimate: add --time (or --view bundles)")
    if budget is not None:
        time_budget(budget, "--time-budget")  # a budget it cannot keep: refused before the compile


# what gives an estimate without the chip, per verb (attached_to_measure fills in the family's
# estimate and kind of chip): tune has no --time (without --measure it ranks by the estimate)
_NO_CHIP_ADVICE = {"tune": "without --measure, tune ranks by {estimate} without {kind}"}


def check_measure(measure: bool, verb: str = "show", chip: str | None = None) -> Chip | None:
    """--measure runs the program on the attached chip of the target's family (``chip``, the
    first of a list; default the default TPU): where there is none, one line before any compile,
    with the way to an estimate that this verb has. The attached chip, where measured."""
    if not measure:
        return None
    from ..base.chips import DEFAULT_TPU, parse_targets
    from ..families.measuring import attached_to_measure

    return attached_to_measure(parse_targets(chip or DEFAULT_TPU)[0], advice=_NO_CHIP_ADVICE.get(verb))


def check_tune_measure(measure: bool, first_chip: str, option: str) -> None:
    """tune's measure ranks on the attached chip of the first target's family (a TPU or a GPU):
    it must be there, and be that first target."""
    attached = check_measure(measure, "tune", first_chip)
    if attached is not None and first_chip.split(":")[0] != attached.name:
        raise UsageError(f"tune --measure ranks on the attached {attached.name}: give it first in {option} "
                         f"(not {first_chip})")


def check_chips(chips: list[Chip], example: str) -> list[Chip]:
    """check is about TPUs (compiled deviceless) and spec-only GPUs, never the local backend."""
    local = [c.name for c in chips if not family_of(c).info.can.check]
    if local:
        raise UsageError(f"check is about TPU and GPU targets, not {', '.join(local)}: e.g. {example}")
    return chips


def diff_simulated_chip(chips: list[Chip], option: str, example: str, local: str) -> Chip | None:
    """diff runs here: the chips name the TPU that interpret mode simulates (the first TPU given),
    else the GPU whose kernels run in Pallas interpret mode on the CPU (None: jax's own backend);
    a GPU known only by its figures cannot run anything."""
    spec_only = [c.name for c in chips if not family_of(c).info.can.run]
    if spec_only:
        raise UsageError(f"diff runs on this machine, not on {', '.join(spec_only)}: {option} names the TPU that "
                         f"interpret mode simulates (e.g. {example}), a GPU XLA compiles for (h100), or {local}")
    return (next((c for c in chips if family_of(c).info.can.simulate), None)
            or next((c for c in chips if family_of(c).info.can.kernels), None))


def require_two_variants(a: tuple, b: tuple, how: str) -> None:
    """compare needs the two sides to differ in function, chip or parameters."""
    if a == b:
        raise UsageError(f"compare needs two different variants: {how}")


def doctor_chips(chips: list[Chip]) -> list[Chip]:
    """doctor compiles for TPUs without a TPU: its targets are TPUs."""
    not_tpu = [c.name for c in chips if not family_of(c).info.can.compile]
    if not_tpu:
        raise UsageError(f"doctor --target takes TPU targets (it compiles for them without a TPU), not {', '.join(not_tpu)}")
    return chips
