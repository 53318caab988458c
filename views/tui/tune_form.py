"""The tune screen's form: what can be swept for the current target (each parameter's current
value, INSPECT's lists), what to say when nothing can, and the sweep request the filled form asks
for (the same SweepRequest as `inspector tune`), or its problems, one line each."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ...base.chips import DEFAULT_TPU
from ...base.errors import InspectorError
from ...compilation.static_params import parse_value, same_kind
from .tune_options import shown, sweep_options
from .tune_table import param_text

if TYPE_CHECKING:
    from ...session import Session
    from ...tuning.sweep import SweepRequest


def declare_hint(function: str) -> str:
    """What to write so that a function has parameters to tune."""
    return (f"{function} has no parameters to tune: give it static keyword parameters and list the values to try "
            f'in the file, e.g.\n    def {function}(a, b, bm=256): ...\n    INSPECT = {{"{function}": {{"args": "bf16[1024,1024] '
            f'bf16[1024,1024]", "params": {{"bm": [256, 128, 512]}}}}}}\n(the first value is the default); '
            "the CLI's --grid bm=128,256 does the same for one run")


@dataclasses.dataclass
class TuneForm:
    """What the tune screen offers to sweep: each parameter's current value and INSPECT's list."""

    spec: str
    function: str
    current: dict  # every static parameter's value in the current analysis (INSPECT's and the signature's)
    choices: dict  # INSPECT's lists

    @property
    def tunable(self) -> bool:
        return bool(self.current or self.choices)

    def prefill(self, name: str) -> str:
        """INSPECT's values, else empty (not swept: the current value stays)."""
        return ", ".join(param_text(v) for v in self.choices.get(name, []))


def tunable_chip(name: str) -> bool:
    """Whether tune takes the session's chip as it is (a TPU libtpu times, a GPU; not a slice or the local backend)."""
    from ...tuning.sweep import check_chips

    try:
        check_chips([name])
    except InspectorError:
        return False
    return True


def sweep_request(form: TuneForm, session: Session, chips_text: str, values: dict[str, str],
                  options: dict[str, str] | None = None) -> tuple[SweepRequest | None, list[str]]:
    """The sweep the form asks for, or the problems with it (one line each). ``values``: each
    parameter's field, "a, b, c" (empty: not swept; the current value is kept); ``options``: the
    option fields' texts (tune_options.py; None: as the screen opens them)."""
    from ...tuning.sweep import SweepRequest, check_chips

    problems: list[str] = []
    chips = [c.strip() for c in chips_text.replace(" ", ",").split(",") if c.strip()]
    if not chips:
        problems.append(f"chips: give one or more TPU or GPU chips, e.g. {DEFAULT_TPU},tpu-v6e or h100,a100")
    else:
        try:
            chips = [c.name for c in check_chips(chips)]
        except InspectorError as err:
            problems.append(f"chips: {err}")
    fields, wrong_options = sweep_options(shown(session) if options is None else options, session, form.spec,
                                          chips[0] if chips and not problems else None)
    problems += wrong_options
    if session.mesh or session.shard:
        problems.append("tune ranks one chip's kernels: this analysis is sharded over a mesh (--mesh/--shard)")
    grid: dict[str, list] = {}
    for name, text in values.items():
        items = [parse_value(t.strip()) for t in text.split(",") if t.strip()]
        like = form.current.get(name, next(iter(form.choices.get(name) or []), None))
        wrong = [v for v in items if not same_kind(v, like)]
        if wrong:
            problems.append(f"{name}: {param_text(wrong[0])} is not {'an' if type(like).__name__[0] in 'aeiou' else 'a'} "
                            f"{type(like).__name__} (like {like!r})")
        elif items:
            grid[name] = list(dict.fromkeys(items))
    if not grid:
        problems.append("nothing to sweep: give two or more values for a parameter (a, b, c)")
    # what is not swept keeps its current value: the parameter screen's choices and INSPECT's lists left empty
    sets = {k: parse_value(v) for k, _, v in (s.partition("=") for s in session.sets)}
    fixed = {name: value for name, value in sets.items() if name not in grid}
    fixed.update({name: form.current[name] for name in form.choices if name not in grid and name in form.current})
    if problems:
        return None, problems
    fields.pop("top")  # the table's rows (the screen's); in the request, as --measure's count
    request = SweepRequest(spec=session.spec, chips=chips, grid=grid, fixed=fixed, **fields)
    return request, []


def count_candidates(values: dict[str, str], chips_text: str) -> str:
    total = 1
    for text in values.values():
        total *= max(1, len({t.strip() for t in text.split(",") if t.strip()}))
    chips = len([c for c in chips_text.replace(" ", ",").split(",") if c.strip()])
    return f"{total} candidate{'s' if total != 1 else ''} x {chips} chip{'s' if chips != 1 else ''} (x the input shapes)"
