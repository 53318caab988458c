"""Which block sizes fit: the VMEM estimate of every combination of the params INSPECT offers,
per chip, without compiling or lowering (a trace each, no walk). Feeds `check --sweep`."""
from __future__ import annotations

import dataclasses
import itertools

from ..compilation.backends import Backend
from ..base.chips import Chip, get_chip
from ..base.errors import InspectorError
from .discovery import find_pallas_calls
from ..compilation.stages import traced_program
from ..compilation.target import Target
from .budgets import budget
from .vmem import deciding_budget, estimate_fits, estimate_range

MAX_COMBINATIONS = 64


@dataclasses.dataclass(kw_only=True)
class SweepRow:
    params: dict
    needs: dict[str, int | None]  # chip -> estimated peak VMEM of the kernel the verdict rests on (None: did not trace)
    certain: dict[str, int | None] = dataclasses.field(default_factory=dict)  # chip -> of it, what is sure (vmem.estimate_range)
    fits: dict[str, bool | None]  # None: unsure (where needs has a figure) or no kernel
    error: str | None = None  # why this combination does not even trace (a block that does not divide, say)


def sweep(target: Target, chips: list[Chip]) -> list[SweepRow]:
    names = list(target.param_choices)
    if not names:
        raise InspectorError(f"{target.spec}: INSPECT offers no params to sweep (give \"params\": {{name: [values]}})")
    combos = list(itertools.product(*(target.param_choices[n] for n in names)))[:MAX_COMBINATIONS]
    rows = []
    for values in combos:
        params = dict(target.params, **dict(zip(names, values)))
        candidate = dataclasses.replace(target, params=params)
        try:
            program = traced_program(candidate, Backend(get_chip("cpu")))
        except InspectorError as err:
            rows.append(SweepRow(params=dict(zip(names, values)), needs={}, fits={},
                                 error=str(err).split(" (raised", 1)[0]))
            continue
        calls = find_pallas_calls(program)
        needs, certain, fits = {}, {}, {}
        for chip in chips:
            budgets = [b for c in calls if (b := budget(c.info, chip))]
            peak = deciding_budget(budgets)
            needs[chip.name] = peak.total_bytes if peak else None
            certain[chip.name] = estimate_range(peak)[0] if peak else None
            fits[chip.name] = estimate_fits(budgets) if budgets else None
        rows.append(SweepRow(params=dict(zip(names, values)), needs=needs, certain=certain, fits=fits))
    return rows
