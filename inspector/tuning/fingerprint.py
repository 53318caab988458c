"""The Python files a target's import touched, each with a signature, so that a rerun can tell,
without importing anything, that none changed (then the lowered modules cannot have changed
either, and every cached row stands).

Files of installed distributions (site-packages) are signed by size and modification time, the
rest (the user's files, the inspector's own) by their contents. The standard library is left
out: the Python version is part of the key."""
from __future__ import annotations

import hashlib
import os
import sys
import sysconfig

_STD = tuple(os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})


def _installed(path: str) -> bool:
    return f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path


def signature(path: str) -> str:
    """``size:mtime`` for an installed file, ``sha256`` of the contents for any other; ``-`` when gone."""
    try:
        if _installed(path):
            st = os.stat(path)
            return f"{st.st_size}:{st.st_mtime_ns}"
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "-"


def loaded_files() -> list[str]:
    """Every module file this process has imported, outside the standard library, sorted."""
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        real = os.path.realpath(path)
        if not real.startswith(_STD) or _installed(real):  # a venv's site-packages lies under its "platstdlib"
            found.add(real)
    return sorted(found)


def closure() -> list[tuple[str, str]]:
    """(path, signature) of every file ``loaded_files`` lists."""
    return [(path, signature(path)) for path in loaded_files()]


def unchanged(files: list) -> bool:
    """Whether every file still has the signature it had."""
    return all(signature(path) == sig for path, sig in files)


def digest(files: list) -> str:
    h = hashlib.sha256()
    for path, sig in files:
        h.update(f"{path}\0{sig}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()
