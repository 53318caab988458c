"""Every sweep result is kept, so a second run is instant and an interrupted one resumes.

Two kinds of entries, in the compile cache's folder (``inspector cache clear`` removes them too):

- a **row**, keyed like a compile: the lowered module with its locations, the chip, every
  variable that reaches XLA or libtpu, the jax/jaxlib/libtpu/inspector versions (all of
  ``compile_cache.key``), with the estimate's budget and the inspector's own code. A worker reads it after tracing a candidate,
  before compiling: nothing that shapes the row changed, so the row stands.
- a **journal** entry, keyed by the request (the target, the shape, the parameters, the chip,
  the budget, the environment, the versions) and the signatures of every file the target's import
  touched (``fingerprint``): the parent reads it before starting any worker. When no file changed,
  the lowered module cannot have, and the row is served without importing jax at all.

Entries are JSON, checked when read; anything else is a miss. Writes are atomic.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from pathlib import Path

import inspector.compilation.compile_cache as compile_cache

from ..compilation.compile_cache import own_version, dist_version

SCHEMA = 3  # 2: roofline-only rows are untimed, not ranked; 3: rows libtpu put below their roofline are ranked at it
ROW, JOURNAL, PLAN = "tune-row", "tune-journal", "tune-plan"


def versions() -> dict[str, str]:
    found = {d: dist_version(d) for d in ("jax", "jaxlib", "libtpu")}
    found["inspector"] = own_version()
    found["inspector code"] = code_fingerprint()
    found["python"] = ".".join(map(str, sys.version_info[:3]))
    return found


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Of the inspector's own source: a row holds the VMEM estimate's verdict (a pruned candidate)
    and figures read from libtpu's output, and the code that makes them changes between commits
    of one version number (about 15 ms, once)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _hash(kind: str, parts: dict) -> str:
    text = json.dumps({"kind": kind, "schema": SCHEMA, **parts}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def row_key(module_text: str, chip: str, budget: dict) -> str:
    return _hash(ROW, {"compile": compile_cache.key(module_text, chip), "budget": budget, "code": code_fingerprint()})


def request_parts(spec: str, chip: str | None, budget: dict) -> dict:
    """What every journal key holds: the target (by its real path), the chip, the budget, the
    variables that reach XLA or libtpu, the versions and the working folder (relative imports)."""
    where, _, func = spec.rpartition(":")
    path = os.path.realpath(where) if os.path.exists(where) else where
    return {"target": f"{path}:{func}", "chip": chip, "budget": budget, "cwd": os.getcwd(),
            "environment": compile_cache.compiler_environment(), "versions": versions()}


def journal_key(parts: dict, shape_args: str | None, params: dict, closure_digest: str) -> str:
    return _hash(JOURNAL, {**parts, "args": shape_args, "params": sorted((k, repr(v)) for k, v in params.items()),
                           "closure": closure_digest})


def plan_key(parts: dict, args: list[str], grid_names: list[str]) -> str:
    return _hash(PLAN, {**parts, "args": list(args), "grid": sorted(grid_names)})


def load(key: str, kind: str):
    """The stored result for ``key``, or None."""
    return compile_cache.load_entry(key, kind, SCHEMA)


def store(key: str, kind: str, result) -> bool:
    """Written whole or not at all; a cache that cannot be written only costs time."""
    return compile_cache.store_entry(key, kind, SCHEMA, result)
