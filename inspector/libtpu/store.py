"""Time estimates in the on-disk compile cache, so that asking again is instant.

The key is the compile cache's own (the lowered module with its locations, the chip, every
variable that reaches XLA or libtpu, the jax/jaxlib/libtpu/inspector versions) with this
estimate's schema and budget: the same program on the same stack gives the same dumps. Entries
are JSON (never pickles: the folder may be shared) and are checked when read; anything that is
not what this version writes is a miss. ``inspector cache clear`` removes them with the rest.
"""
from __future__ import annotations

import dataclasses
import hashlib
import types
import typing

import inspector.compilation.compile_cache as compile_cache

from ..base import json_text
from ..base.atomic import write_atomic
from ..base.errors import OutputError
from ..base.findings import Finding
from .budget import Budget
from .model import TimeEstimate

SCHEMA = 12  # 12: a Pallas kernel XLA names after the name stack paired with its record by its results' shapes; 11: an XLA op libtpu did not simulate is a floor, not the cost model's figure; 9, 10: a plan made from the bundles, figures with their kind; 6: XLA ops the cost model gave up on get a finding (xla-cost-unknown); 7: the roofline takes the cheapest branches; 8: untimed XLA ops simulated alone


def key(module_text: str, chip: str, budget: Budget) -> str:
    base = compile_cache.key(module_text, chip)
    return hashlib.sha256(f"libtpu-time/{SCHEMA}/{base}/{budget.seconds}/{budget.memory_bytes}/"
                          f"{budget.probe_steps}/{budget.whole}".encode()).hexdigest()


def load(k: str) -> TimeEstimate | None:
    path = compile_cache.cache_dir() / f"{k}.json"
    try:
        entry = json_text.loads(compile_cache.read_regular(path))
        if entry.get("schema") != SCHEMA or entry.get("key") != k or entry.get("kind") != "libtpu-time":
            return None
        return _build(TimeEstimate, entry["result"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(k: str, estimate: TimeEstimate) -> bool:
    directory = compile_cache.cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        text = json_text.dumps({"schema": SCHEMA, "key": k, "kind": "libtpu-time", "result": dataclasses.asdict(estimate)})
        write_atomic(directory / f"{k}.json", text, own=True)
        return True
    except (OSError, OutputError, ValueError, TypeError):
        return False


def _build(kind, value):
    """``value`` (parsed JSON) as ``kind``: dataclasses, lists, dicts, tuples and optionals of them."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        return _build(options[0], value) if len(options) == 1 else value
    if origin is list:
        (item,) = typing.get_args(kind) or (typing.Any,)
        return [_build(item, v) for v in value]
    if origin is tuple:
        items = typing.get_args(kind)
        return tuple(_build(i, v) for i, v in zip(items, value))
    if origin is dict:
        _, item = typing.get_args(kind) or (str, typing.Any)
        return {k: _build(item, v) for k, v in value.items()}
    if kind is Finding or (dataclasses.is_dataclass(kind) and isinstance(kind, type)):
        hints = typing.get_type_hints(kind)
        fields = {f.name for f in dataclasses.fields(kind)}
        if set(value) - fields:
            raise TypeError(f"unknown fields for {kind.__name__}: {sorted(set(value) - fields)}")
        return kind(**{name: _build(hints[name], v) for name, v in value.items()})
    if kind is float and isinstance(value, int):
        return float(value)
    return value

