"""`inspector fix`'s results in the on-disk compile cache, so that asking again compiles, times
and interprets nothing: a trial (a variant compiled for a chip, with its VMEM and libtpu's time)
and a numerics verdict (a variant against the unfixed kernel in interpret mode).

The key is the compile cache's own (the lowered module with its locations, the chip, every
variable that reaches XLA or libtpu, the versions) with what else decides the result: whether
time was asked for and libtpu's budget; for numerics, the unfixed module too, the seed and the
tolerances. A refused compile is kept as well (the compile cache keeps only successes): here a
refusal is the result. Entries are JSON, checked when read; anything else is a miss.
"""
from __future__ import annotations

import hashlib

from ..base import json_text
from ..base.atomic import write_atomic
from ..base.errors import OutputError
from . import compile_cache

SCHEMA = 1
KIND = "fix"


def key(*parts: object, module_text: str, chip: str) -> str:
    """The key of a result of ``module_text`` on ``chip`` that ``parts`` also decide."""
    base = compile_cache.key(module_text, chip)
    return hashlib.sha256(f"{KIND}/{SCHEMA}/{base}/{json_text.dumps(list(parts))}".encode()).hexdigest()


def load(k: str) -> dict | None:
    path = compile_cache.cache_dir() / f"{k}.json"
    try:
        entry = json_text.loads(compile_cache.read_regular(path))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("key") != k or entry.get("kind") != KIND:
        return None
    result = entry.get("result")
    return result if isinstance(result, dict) else None


def store(k: str, result: dict) -> bool:
    """Keep ``result``; a cache that cannot be written only costs time, so errors are swallowed."""
    directory = compile_cache.cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / f"{k}.json", json_text.dumps({"schema": SCHEMA, "key": k, "kind": KIND, "result": result}),
                     own=True)
        return True
    except (OSError, OutputError, ValueError, TypeError):
        return False
