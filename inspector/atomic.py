"""Write a file so that a reader never sees half of it: a temporary file beside it, then rename.

The temporary file is removed on every path (a full disk, Ctrl-C mid-write), and every failure
is one line that names the file. A link is followed (its target is replaced, the link kept), and
a path that is not a regular file (/dev/stdout, a pipe such as bash's `>(jq .)`, /dev/full) is
written in place: a rename over it would replace a device or a pipe with a plain file."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import OutputError


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early (before a long compile) when ``path`` cannot be written: its folder is missing
    or not writable, or it is a folder itself."""
    path = Path(path)
    try:
        if _special(path):
            return path  # written in place; whether it takes the bytes is known only then
        if path.is_symlink():  # a dangling link: its target is what gets written
            path = Path(os.path.realpath(path))
        directory = path.parent if str(path.parent) else Path(".")
        if not directory.is_dir():
            raise OutputError(f"cannot write {path}: folder {directory} does not exist")
        if path.is_dir():
            raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    except OSError as err:  # a name too long, a loop of links
        raise OutputError(f"cannot write {path}: {err.strerror or err}") from err
    if not os.access(directory, os.W_OK):
        raise OutputError(f"cannot write {path}: folder {directory} is not writable")
    return path


def check_not_read_only(path: str | os.PathLike) -> None:
    """A user's read-only file is refused, as the shell's `>` refuses it (a rename would replace it)."""
    if os.path.isfile(path) and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {path}: the file is read-only (chmod u+w it, or give another name)")


def _special(path: Path) -> bool | None:
    """True: it exists and is not a regular file or folder (a device, a pipe); None: no such file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_in_place(path: Path, payload: bytes) -> Path:
    try:
        with open(path, "wb") as f:
            f.write(payload)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {err.strerror or err}") from err
    return path


def _mode_for(path: Path | None) -> int:
    """The permissions the written file gets: those of the user's file it replaces (a 0600 file
    stays private, as the shell's `>` keeps it), else what the umask gives a new file."""
    if path is not None:
        try:
            return stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            pass  # a new file
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: str | os.PathLike, data: bytes | str, *, own: bool = False) -> Path:
    """``own``: a file only we use (a cache entry): whatever is in its place, a link or a pipe
    included, is replaced, never written through."""
    shown = Path(path)  # what the user named, link or not
    payload = data.encode() if isinstance(data, str) else data
    if own:
        path = Path(path)
    else:
        path = check_writable(path)
        if _special(path):
            return _write_in_place(path, payload)
        if path.is_symlink():  # replace the link's target, keep the link
            path = Path(os.path.realpath(path))
    directory = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name[:64]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, _mode_for(None if own else path))  # mkstemp makes it 0600
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
    return shown
