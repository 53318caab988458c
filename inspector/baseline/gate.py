"""check against a saved baseline: the targets' figures now, computed as ``baseline save``
computes them, compared with the file's. The command line (``check --baseline FILE``) and the
Python API (``inspector.check(..., baseline=FILE)``) both make their ``Gate`` here, so the same
targets, chips, tolerances and request come out of each door; each spells its options in the
errors as the user wrote them (``option``)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..base.chips import parse_targets
from ..base.errors import UsageError
from .compare import Comparison, Tolerance, compare, parse_tolerances
from .record import Baseline, load, new_baseline
from .targets import expand
from .work import Request, compute, template
from ..families import family_of


def tpu_chips(text: str, example: str = "--target tpu-v5e,tpu-v6e") -> list[str]:
    """The chip names of ``text``: chips that compile here (TPUs, GPUs with XLA's target config): a
    baseline's figures are the compile's, made without the chip."""
    chips = parse_targets(text)
    other = [c.name for c in chips if not family_of(c).info.can.baseline]
    if other:
        raise UsageError(f"a baseline records chips compiled here without the chip (TPUs; h100, h200, a100), not "
                         f"{', '.join(other)}: e.g. {example}")
    return [c.name for c in chips]


@dataclasses.dataclass(frozen=True)
class Gate:
    """A check against a saved baseline, ready to run: the file's figures (``before``), the files
    whose targets are all computed now (``covered``), the request that computes them, the tolerances."""

    before: Baseline
    covered: list[str]
    request: Request
    tolerances: dict[str, Tolerance]


def make_gate(path: str, targets: list[str], *, chips: str | None, sets: list[str], tolerances: list[str],
              use_cache: Any, debug: bool = False, option: str = "--target", example: str = "--target tpu-v5e,tpu-v6e",
              tolerance_option: str = "--tolerance") -> Gate:
    """``targets``: specs, files, folders or globs (every INSPECT entry there); ``chips``: the
    chips to compute ("tpu-v5e,tpu-v6e"), each of which the baseline must hold (None: the
    baseline's own). ``option``, ``example``, ``tolerance_option``: the door's spelling."""
    parsed = parse_tolerances(tolerances, option=tolerance_option)  # a bad tolerance before a file is read
    before = load(path)
    found = expand(targets)
    named = None if chips is None else tpu_chips(chips, example)
    if named is not None:
        missing = [c for c in named if c not in before.chips]
        if missing:
            raise UsageError(f"baseline {path} has no figures for {', '.join(missing)} (it holds "
                             f"{', '.join(before.chips) or 'none'}): leave {option} out, or save it again with "
                             f"--target {','.join(dict.fromkeys([*before.chips, *missing]))}")
    request = Request(specs=found.specs, chips=before.chips if named is None else named,
                      template=template(sets, time=before.time, time_budget=before.data.get("time_budget_s"),
                                        cache=use_cache, debug=debug))
    return Gate(before, found.files, request, parsed)


def run_gate(gate: Gate, *, isolate: bool = True, progress: Callable[[int, str], None] | None = None) -> Comparison:
    """The figures of now, each target in a child process of its own (``isolate``), against the file's."""
    request = gate.request
    computed = compute(request, isolate=isolate, progress=progress)
    now = new_baseline(request.chips, request.time, {c.label: c.entry for c in computed}, request.time_budget)
    result = compare(gate.before, now, gate.tolerances, covered=gate.covered, chips=request.chips)
    result.compiles = sum(c.compiles for c in computed)
    result.from_cache = sum(c.from_cache for c in computed)
    result.refused = sum(c.refused for c in computed)
    result.compiled = [what for c in computed for what in c.compiled]
    refuse_empty(result, f"check --baseline {gate.before.path}",
                 f"the baseline holds {some(list(gate.before.targets))}; now: {some([c.label for c in computed])}")
    return result


def refuse_empty(result: Comparison, where: str, sides: str) -> None:
    """A comparison that compared no figure is no pass (exit 2, not 0): a gate that checks nothing
    would pass forever. Nothing moved and nothing compared: the targets named are not the
    baseline's, or each raised on both sides."""
    if result.ok and result.targets == 0:
        raise UsageError(f"{where}: nothing compared, no target traced on both sides ({sides}): name targets "
                         "the baseline holds, or save it again")


def some(labels: list[str]) -> str:
    return ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "") if labels else "none"
