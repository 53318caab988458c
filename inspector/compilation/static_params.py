"""Static params: ``--set NAME=VALUE`` items (ints, floats, bools, else text) and INSPECT's
``"params"`` choices, parsed and checked against the function's signature and defaults."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from ..base.errors import UsageError


def signature_of(fn: Callable) -> inspect.Signature | None:
    """The function's signature; None where Python cannot read one (some builtins and C callables)."""
    try:
        return inspect.signature(fn)  # follows __wrapped__, so jax.jit-wrapped functions work
    except (TypeError, ValueError):
        return None


def parse_value(text: str) -> Any:
    """``--set`` values: ints, floats, bools, else the string itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def same_kind(value, like) -> bool:
    """Whether a parsed --set value fits the kind of ``like`` (INSPECT's first choice or the
    function's default): "maybe" for a bool would be passed on as a truthy string."""
    if like is None or value is None or isinstance(like, str):
        return True
    if isinstance(like, bool):
        return isinstance(value, bool)
    if isinstance(like, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(like, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


class FlagValue(str):
    """A ``NAME=VALUE`` item that remembers the flag it came with (compare's ``--set-a``), so a
    message names the flag the user typed."""

    flag: str

    def __new__(cls, text: str, flag: str):
        item = super().__new__(cls, text)
        item.flag = flag
        return item

    def __reduce__(self):
        return FlagValue, (str(self), self.flag)


def static_params(fn_sig, entry: dict, sets: list[str], spec: str, func: str = "") -> tuple[dict, dict]:
    """(the static params, every value offered per param): INSPECT's choices (the first of each the
    default), then each ``--set NAME=VALUE`` over them, each of the kind the function's default or
    INSPECT's first choice has, and each a parameter the function takes."""
    defaults = {p.name: p.default for p in fn_sig.parameters.values() if p.default is not p.empty} if fn_sig else {}
    choices: dict[str, list] = {}
    for name, value in (entry.get("params") or {}).items():
        if not isinstance(value, (list, tuple)):  # taken as [value], it was a choice nobody was told about
            raise UsageError(f"{spec}: INSPECT[{func!r}][\"params\"][{name!r}] is {value!r}: give a list of the "
                             f"values to try, the first the default, e.g. [{value!r}] (or --set {name}=... on the "
                             "command line)")
        choices[name] = list(value)
        _check_choices(name, choices[name], defaults.get(name), f"{spec}: INSPECT[{func!r}][\"params\"][{name!r}]")
    check_param_names(fn_sig, choices, spec, f"INSPECT[{func!r}][\"params\"] names {{name!r}}")
    params = {name: values[0] for name, values in choices.items() if values}
    for item in sets:
        flag = getattr(item, "flag", "--set")
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise UsageError(f"{flag} {str(item)!r}: write {flag} name=value, e.g. {flag} block_q=256")
        value = parse_value(raw)
        like = params[name] if name in params else defaults.get(name)
        if not same_kind(value, like):
            kind = type(like).__name__
            raise UsageError(f"{flag} {name}={raw}: {name} takes {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                             f"(like {like!r}), e.g. {flag} {name}={like}")
        check_param_names(fn_sig, {name: value}, spec, f"{flag} {{name}}=...")
        params[name] = value
    return params, choices


def _check_choices(name: str, values: list, default, where: str) -> None:
    """INSPECT's values of a static param, checked as --set checks one: at least one, each of the
    kind of the function's default (else of the first value)."""
    if not values:
        raise UsageError(f"{where} is an empty list: give the values to try (the first is the default), "
                         f"or leave {name!r} out")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if default is None and numbers:
        return  # ints and floats together: a float param offered as [1, 0.5]
    like = default if default is not None else values[0]
    for value in values:
        if not same_kind(value, like):
            kind = type(like).__name__
            raise UsageError(f"{where} holds {value!r} (a {type(value).__name__}) but {name} takes "
                             f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} (like {like!r})")


def check_param_names(fn_sig, params: dict, spec: str, how: str = "--set {name}=...") -> None:
    """Every static param must be one the function takes (or it takes ``**kwargs``)."""
    if fn_sig is None:
        return
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in fn_sig.parameters.values())
    for name in params:
        if name not in fn_sig.parameters and not accepts_any:
            takes = ", ".join(fn_sig.parameters)
            raise UsageError(f"{spec}: {how.format(name=name)} but the function takes no parameter {name!r} (it takes: {takes})")
