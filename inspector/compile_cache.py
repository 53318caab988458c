"""On-disk cache of compile results, so a second run of the same target skips the compile.

The key is the lowered StableHLO itself plus the target chip and the jax/jaxlib/libtpu versions:
that covers the source, the inputs and the params (they all shape the module) without trusting
a file hash that would miss a change in an imported module. Entries are written to a temporary
file and renamed, so a killed run never leaves half an entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("INSPECTOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jax-inspector")
    return Path(root)


def _versions() -> str:
    found = []
    for dist in ("jax", "jaxlib", "libtpu"):
        try:
            found.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist}=none")
    return ";".join(found)


def key(module_text: str, chip: str) -> str:
    h = hashlib.sha256()
    for part in (_versions(), chip, module_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load(k: str) -> dict | None:
    path = cache_dir() / f"{k}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(k: str, result: dict) -> None:
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(result, f)
        os.replace(tmp, directory / f"{k}.json")
    except OSError:
        pass  # a cache that cannot be written only costs time
