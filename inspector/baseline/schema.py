"""A baseline file checked whole before a figure of it is used: every key known, every value of
its kind (a figure a number, a flag a bool, a chip a TPU the inspector knows, each label the one
its spec and --set values make). A hand edit, a merge gone wrong or another tool's JSON is one
line naming the first bad field, never a comparison of garbage. The schema, for users: docs/ci.md.

    {"schema": "inspector-baseline/1", "versions": {NAME: str|null}, "chips": [TPU, ...] (one or more),
     "time": bool, "time_budget_s": null|seconds > 0,
     "targets": {LABEL: {"spec": str, "sets": [NAME=VALUE, ...],
                         "error": str  |  "chips": {TPU: {"error": str} | {"program": FIGURES, "kernels": {KEY: KERNEL}}}}}}
"""
from __future__ import annotations

import math
from typing import Any

from .figures import FIGURES, SCHEMA, stem, target_label
from ..families import family_of

TIME_KINDS = ("estimate", "floor", "range")
TOP = ("schema", "versions", "chips", "time", "time_budget_s", "targets")
PROGRAM_EXTRA = ("error_kernel", "error_source")  # the failing kernel and its line, when it failed
KERNEL_NAMING = ("name", "kind", "source")


class Bad(Exception):
    """The first bad field: ``where`` (a path such as targets["k.py:f"].chips["tpu-v5e"].program.flops), ``why``."""

    def __init__(self, where: str, why: str):
        super().__init__(f"{where}: {why}" if where else why)


def _key(where: str, key: str) -> str:
    return f"{where}[{key!r}]" if not key.isidentifier() else (f"{where}.{key}" if where else key)


def _kind(value: Any) -> str:
    return "null" if value is None else "a bool" if isinstance(value, bool) else \
        f"{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__}"


def _object(value: Any, where: str, required: tuple[str, ...] = (), allowed: tuple[str, ...] | None = None) -> dict:
    if not isinstance(value, dict):
        raise Bad(where, f"is {_kind(value)}, not an object")
    for key in required:
        if key not in value:
            raise Bad(where, f"has no {key!r}")
    if allowed is not None:
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise Bad(where, f"has unknown keys {unknown}")
    return value


def _text(value: Any, where: str, null: bool = False) -> None:
    if not (isinstance(value, str) or (null and value is None)):
        raise Bad(where, f"is {_kind(value)}, not a string{' or null' if null else ''}")


def _number(value: Any, where: str, null: bool = True) -> None:
    if value is None and null:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Bad(where, f"is {_kind(value)}, not a number{' or null' if null else ''}")
    if not math.isfinite(value) or value < 0:
        raise Bad(where, f"is {value!r}, not a number >= 0")


def _figure(name: str, value: Any, where: str) -> None:
    unit = FIGURES[name][0]
    if unit == "flag":
        if value is not None and not isinstance(value, bool):
            raise Bad(where, f"is {_kind(value)}, not true, false or null")
    elif unit == "text":
        _text(value, where, null=True)
    elif unit == "codes":
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise Bad(where, "is not a list of finding codes (strings)")
    elif unit == "time":
        if value is None:
            return
        _object(value, where, ("seconds", "kind", "high_seconds"), ("seconds", "kind", "high_seconds"))
        _number(value["seconds"], f"{where}.seconds", null=False)
        if value["kind"] not in TIME_KINDS:
            raise Bad(f"{where}.kind", f"is {value['kind']!r}, not one of {', '.join(TIME_KINDS)}")
        _number(value["high_seconds"], f"{where}.high_seconds")
        if value["high_seconds"] is not None and value["high_seconds"] < value["seconds"]:
            raise Bad(f"{where}.high_seconds", "is below seconds (a range's top)")
    else:
        _number(value, where)


def _figures(found: dict, where: str, extra: tuple[str, ...]) -> None:
    for name, value in found.items():
        if name in FIGURES:
            _figure(name, value, _key(where, name))
        elif name in extra:
            _text(value, _key(where, name), null=True)
        else:
            raise Bad(_key(where, name), f"is no figure (the figures: {', '.join(FIGURES)})")


def _chip(found: Any, where: str) -> None:
    if isinstance(found, dict) and "error" in found:
        _object(found, where, allowed=("error",))
        _text(found["error"], f"{where}.error")
        return
    _object(found, where, ("program", "kernels"), ("program", "kernels"))
    program = _object(found["program"], f"{where}.program", ("compiled",))
    if not isinstance(program["compiled"], bool):
        raise Bad(f"{where}.program.compiled", f"is {_kind(program['compiled'])}, not true or false")
    _figures(program, f"{where}.program", PROGRAM_EXTRA)
    for key, kernel in _object(found["kernels"], f"{where}.kernels").items():
        at = f"{where}.kernels[{key!r}]"
        _object(kernel, at, KERNEL_NAMING)
        _text(kernel["name"], f"{at}.name")
        _text(kernel["kind"], f"{at}.kind")
        _text(kernel["source"], f"{at}.source", null=True)
        base = f"{kernel['kind']} {stem(kernel['name'])} {kernel['source'] or '-'}"
        if key != base and not (key.startswith(base + " #") and key[len(base) + 2:].isdigit()):
            raise Bad(at, f"is not the key of its kind, name and source ({base!r})")
        _figures({k: v for k, v in kernel.items() if k not in KERNEL_NAMING}, at, ())


def _chips(value: Any) -> list[str]:
    from ..base.chips import parse_targets
    from ..base.errors import UsageError

    if not isinstance(value, list) or not value:
        raise Bad("chips", "is not a list of one or more chips" if not isinstance(value, list) else "is empty: no chip to compare")
    for i, name in enumerate(value):
        _text(name, f"chips[{i}]")
        try:
            chips = parse_targets(name)
        except UsageError:
            raise Bad(f"chips[{i}]", f"{name!r} is no chip the inspector knows (inspector chips lists them)") from None
        if len(chips) != 1 or not family_of(chips[0]).info.can.baseline or chips[0].name != name:
            raise Bad(f"chips[{i}]", f"{name!r} is not a chip a baseline records (TPUs; h100, h200, a100: compiled without one)")
    if len(set(value)) != len(value):
        raise Bad("chips", "names a chip twice")
    return value


def check(data: Any) -> None:
    """Raise ``Bad`` naming the first field that is not as ``baseline save`` writes it."""
    if not isinstance(data, dict):
        raise Bad("", f"the JSON is {_kind(data)}, not an object")
    if data.get("schema") != SCHEMA:
        raise Bad("schema", f"is {data['schema']!r}, not {SCHEMA!r}" if "schema" in data else "is missing")
    _object(data, "", TOP, TOP)
    for name, version in _object(data["versions"], "versions").items():
        _text(version, _key("versions", name), null=True)
    chips = _chips(data["chips"])
    if not isinstance(data["time"], bool):
        raise Bad("time", f"is {_kind(data['time'])}, not true or false")
    budget = data["time_budget_s"]
    if budget is not None:
        _number(budget, "time_budget_s")
        if not budget > 0 or not data["time"]:
            raise Bad("time_budget_s", "is the budget of --time: a number of seconds > 0 with \"time\": true, or null")
    targets = _object(data["targets"], "targets")
    if not targets:
        raise Bad("targets", "is empty: no target to compare")
    for label, entry in targets.items():
        where = f"targets[{label!r}]"
        _object(entry, where, ("spec", "sets"), ("spec", "sets", "error", "chips"))
        _text(entry["spec"], f"{where}.spec")
        sets = entry["sets"]
        if not isinstance(sets, list) or not all(isinstance(s, str) and "=" in s for s in sets):
            raise Bad(f"{where}.sets", "is not a list of NAME=VALUE strings")
        if label != target_label(entry["spec"], sets):
            raise Bad(where, f"is not the label of its spec and sets ({target_label(entry['spec'], sets)!r})")
        if ("error" in entry) == ("chips" in entry):
            raise Bad(where, "has neither \"chips\" nor \"error\"" if "error" not in entry else "has both \"chips\" and \"error\"")
        if "error" in entry:
            _text(entry["error"], f"{where}.error")
            continue
        for chip, found in _object(entry["chips"], f"{where}.chips").items():
            if chip not in chips:
                raise Bad(f"{where}.chips[{chip!r}]", f"is not one of the baseline's chips ({', '.join(chips)})")
            _chip(found, f"{where}.chips[{chip!r}]")
        missing = [c for c in chips if c not in entry["chips"]]
        if missing:  # save records every chip of a target, its figures or its error
            raise Bad(f"{where}.chips", f"has no entry for {', '.join(missing)} (every chip of \"chips\" has one)")
