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
from . import compile_cache

SCHEMA = 1
KIND = "fix"


def key(*parts: object, module_text: str, chip: str) -> str:
    """The key of a result of ``module_text`` on ``chip`` that ``parts`` also decide."""
    base = compile_cache.key(module_text, chip)
    return hashlib.sha256(f"{KIND}/{SCHEMA}/{base}/{json_text.dumps(list(parts))}".encode()).hexdigest()


def load(k: str) -> dict | None:
    result = compile_cache.load_entry(k, KIND, SCHEMA)
    return result if isinstance(result, dict) else None


def store(k: str, result: dict) -> bool:
    return compile_cache.store_entry(k, KIND, SCHEMA, result)
