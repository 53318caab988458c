"""Write a file so that a reader never sees half of it: a temporary file beside it, then rename."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import UsageError


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"cannot write {path}: folder {directory} does not exist")
    payload = data.encode() if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a normal file follows the umask
        os.replace(tmp, path)
    except OSError as err:
        if "tmp" in locals() and os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {path}: {err.strerror}") from err
    return path
