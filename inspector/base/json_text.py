"""The one place JSON is written (and the tool's own JSON files read back): RFC 8259, which has no
NaN or Infinity. Python's json writes them as bare `NaN` and `Infinity`, which strict parsers
refuse (`diff --json` on an all-NaN output did). The rule, in docs/api.md:

    a non-finite float is written as null, and the object holding it gets, beside its key,
    "<key>_nonfinite": "nan", "inf" or "-inf"; for a list, an object from each such element's
    index ("3", or "3.1" in a list of lists) to that word.

    {"max_abs": null, "max_abs_nonfinite": "inf", "errors": [0.5, null], "errors_nonfinite": {"1": "nan"}}

``loads`` puts the floats back, so the tool's caches read what they wrote.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

MARK = "_nonfinite"
_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _word(x: float) -> str:
    return "nan" if math.isnan(x) else "inf" if x > 0 else "-inf"


def _clean(value: Any) -> tuple[Any, Any]:
    """(value with every non-finite float as None, what they were: a word, {path: word}, or None)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a numpy scalar: its Python value
        value = value.item()
    if isinstance(value, float):
        return (None, _word(value)) if not math.isfinite(value) else (value, None)
    if isinstance(value, dict):
        out: dict = {}
        for key, item in value.items():
            clean, why = _clean(item)
            out[key] = clean
            if why is not None:
                out[f"{key}{MARK}"] = why
        return out, None
    if isinstance(value, (list, tuple)):
        items, found = [], {}
        for i, item in enumerate(value):
            clean, why = _clean(item)
            items.append(clean)
            if isinstance(why, dict):
                found.update({f"{i}.{path}": word for path, word in why.items()})
            elif why is not None:
                found[str(i)] = why
        return items, found or None
    return value, None


def strict(data: Any) -> Any:
    """``data`` with non-finite floats written by the rule above (dicts, lists and tuples walked)."""
    return _clean(data)[0]


def dumps(data: Any, indent: int | None = None, default: Callable | None = str, sort_keys: bool = False) -> str:
    """RFC 8259 JSON of ``data``; what json cannot write goes through ``default`` (str)."""
    return json.dumps(strict(data), indent=indent, default=default, sort_keys=sort_keys, allow_nan=False)


def _restore(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    for key in [k for k in out if k.endswith(MARK) and k[:-len(MARK)] in out]:
        why, base = out.pop(key), key[:-len(MARK)]
        if isinstance(why, str) and out[base] is None:
            out[base] = _WORDS.get(why, math.nan)
        elif isinstance(why, dict) and isinstance(out[base], list):
            for path, word in why.items():
                *outer, last = (int(p) for p in path.split("."))
                target = out[base]
                for i in outer:
                    target = target[i]
                target[last] = _WORDS.get(word, math.nan)
    return out


def loads(text: str | bytes) -> Any:
    """JSON written by ``dumps``, with its non-finite floats put back."""
    return json.loads(text, object_pairs_hook=_restore)
