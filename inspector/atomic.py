"""Write a file so that a reader never sees half of it: a temporary file beside it, then rename.

The temporary file is removed on every path (a full disk, Ctrl-C mid-write), and every failure
is one line that names the file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import OutputError


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early (before a long compile) when ``path`` cannot be written: its folder is missing
    or not writable, or it is a folder itself."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        if not directory.is_dir():
            raise OutputError(f"cannot write {path}: folder {directory} does not exist")
        if path.is_dir():
            raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    except OSError as err:  # a name too long, a loop of links
        raise OutputError(f"cannot write {path}: {err.strerror or err}") from err
    if not os.access(directory, os.W_OK):
        raise OutputError(f"cannot write {path}: folder {directory} is not writable")
    return path


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    path = check_writable(path)
    directory = path.parent if str(path.parent) else Path(".")
    payload = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name[:64]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a normal file follows the umask
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise OutputError(f"cannot write {path}: {err.strerror or err}") from err
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path
