"""The candidates of a sweep: INSPECT's ``params`` lists, or ``--grid name=a,b,c``, with ``--set``
fixing some, crossed with the input shapes and the chips. Pure data; nothing here imports jax."""
from __future__ import annotations

import dataclasses
import itertools

from ..base.errors import UsageError
from ..compilation.static_params import parse_value, same_kind

MAX_CANDIDATES = 4096  # past this a sweep is a typo (a grid of 8 params x 8 values is 16M)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TunePlan:
    """What loading the target told (in a worker: it imports the user's file): the parameters it
    offers, their defaults, the input shapes, and the files its import touched (the cache's check)."""

    spec: str
    choices: dict[str, list]  # INSPECT's params lists, in order (first value: the default)
    defaults: dict  # every static parameter's default: INSPECT's first value, else the signature's
    takes: list[str] | None  # the parameter names the function takes (None: it takes **kwargs)
    shapes: list[tuple[str, str | None]]  # (label, args text to load it with; None: INSPECT's own args)
    closure: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (path, signature)


def parse_grid(items: list[str]) -> dict[str, list]:
    """``--grid bm=128,256 --grid bk=512`` -> {"bm": [128, 256], "bk": [512]}; values parsed like
    --set's (ints, floats, bools, strings)."""
    grid: dict[str, list] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        values = [v.strip() for v in raw.split(",") if v.strip()]
        if not sep or not name or not values:
            raise UsageError(f"--grid {item!r}: write --grid name=a,b,c, e.g. --grid bm=128,256,512")
        if name in grid:  # the second would silently replace the first
            raise UsageError(f"--grid {name} is given twice: give its values once, e.g. --grid {name}=a,b,c")
        grid[name] = list(dict.fromkeys(parse_value(v) for v in values))  # repeats once
    return grid


def parse_sets(items: list[str]) -> dict:
    fixed = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set {item!r}: write --set name=value, e.g. --set bm=256")
        fixed[name.strip()] = parse_value(raw.strip())
    return fixed


def check_overlap(grid: dict, fixed: dict) -> None:
    """A parameter both swept and fixed is a mistake, said as such (not as "nothing to sweep")."""
    both = [name for name in grid if name in fixed]
    if both:
        raise UsageError(f"--grid {both[0]}=... and --set {both[0]}=... name the same parameter: sweep it (--grid) "
                         "or fix it (--set), not both")


def swept_values(plan: TunePlan, grid: dict[str, list], fixed: dict) -> dict[str, list]:
    """Each swept parameter's values: INSPECT's lists, replaced or extended by --grid, less
    those --set fixes. Names and value kinds are checked against the function."""
    check_overlap(grid, fixed)
    for name, values in list(grid.items()) + [(k, [v]) for k, v in fixed.items()]:
        flag = "--grid" if name in grid else "--set"
        if plan.takes is not None and name not in plan.takes:
            raise UsageError(f"{plan.spec}: {flag} {name}=... but the function takes no parameter {name!r} "
                             f"(it takes: {', '.join(plan.takes)})")
        like = plan.defaults.get(name)
        for value in values:
            if not same_kind(value, like):
                kind = type(like).__name__
                raise UsageError(f"{flag} {name}={value}: {name} takes {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                                 f"(like {like!r})")
    values = {name: list(choices) for name, choices in plan.choices.items()}
    values.update(grid)
    for name in fixed:
        values.pop(name, None)
    if not values:
        raise UsageError(f"{plan.spec}: nothing to sweep: INSPECT offers no params lists; give --grid name=a,b,c "
                         "(repeatable), e.g. --grid bm=128,256,512")
    return values


def candidates(values: dict[str, list], default: dict) -> list[tuple[dict, bool]]:
    """Every combination (dicts of the swept names), each with whether it is the default; the
    default combination is added when the grid leaves it out, so its distance to the best shows."""
    names = list(values)
    total = 1
    for name in names:
        total *= len(values[name])
    if total > MAX_CANDIDATES:
        raise UsageError(f"{total:,} candidates: more than {MAX_CANDIDATES:,}; fix some with --set or shorten --grid")
    combos = [dict(zip(names, combo)) for combo in itertools.product(*(values[n] for n in names))]
    wanted = {n: default[n] for n in names if n in default}
    found = [(c, len(wanted) == len(names) and c == wanted) for c in combos]
    if len(wanted) == len(names) and not any(is_default for _, is_default in found):
        found.append((wanted, True))
    return found


def default_params(plan: TunePlan, values: dict[str, list], fixed: dict) -> dict:
    """The default of each swept parameter (INSPECT's first value, else the signature's)."""
    return {n: plan.defaults[n] for n in values if n in plan.defaults and n not in fixed}
