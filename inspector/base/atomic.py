"""Write a file so that a reader never sees half of it: a temporary file beside it, then rename.

The temporary file is removed on every path (a full disk, Ctrl-C mid-write), and every failure
is one line that names the file. A link is followed (its target is replaced, the link kept), and
a path that is not a regular file (/dev/stdout, a pipe such as bash's `>(jq .)`, /dev/full) is
written in place: a rename over it would replace a device or a pipe with a plain file. So is this
process's own stdout or stderr when it is a file (`--json /dev/stdout > out.json`): a rename would
send what is printed after it to a deleted file."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

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
            what = "is a file, not a folder" if directory.exists() else "does not exist"
            raise OutputError(f"cannot write {path}: {directory} {what}")
        if path.is_dir():
            raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    except OSError as err:  # a name too long, a loop of links
        raise OutputError(f"cannot write {path}: {err.strerror or err}") from err
    if not os.access(directory, os.W_OK):
        raise OutputError(f"cannot write {path}: folder {directory} is not writable")
    return path


def check_not_read_only(path: str | os.PathLike) -> None:
    """A user's read-only file is refused, as the shell's `>` refuses it (a rename would replace it).
    Read-only is the file's mode too, not only access(): to root every file is writable, and a 0444
    file it was told to keep was replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # no file yet (or nothing to say about it here)
    if stat.S_ISREG(mode) and (not os.access(path, os.W_OK) or not mode & 0o222):
        raise OutputError(f"cannot write {path}: the file is read-only (chmod u+w it, or give another name)")


def refuse_foreign(path: str | os.PathLike, *, ours: Callable[[bytes], bool], what: str, force: bool = False) -> None:
    """Before a long run: an output path that holds a file this tool did not write is refused (exit 2)
    unless ``force``; ``ours`` tells from the file's first bytes whether we wrote it (a baseline's schema,
    a patch's header). A Python source is never an output, forced or not: it is a target forgotten
    before the output's name (`baseline save k.py other.py`). A device, a pipe or no file at all passes."""
    path = Path(path)
    if path.suffix == ".py":
        raise OutputError(f"will not write {what} to {path}: a .py file is a target, never an output "
                          "(give the output's own file name first, then the targets)")
    if force or _special(path) is not False or our_output(path) is not None:
        return  # forced, nothing there yet, or a device or pipe written in place
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError as err:
        raise OutputError(f"cannot read {path} to see what it is: {err.strerror or err}") from err
    if not ours(head):
        raise OutputError(f"{path} exists and is not {what} this tool wrote: give another name, "
                          "or add --force to replace it")


def our_output(path: str | os.PathLike) -> int | None:
    """The descriptor (1 or 2) when ``path`` is this process's own stdout or stderr (/dev/stdout,
    /proc/self/fd/1, or the file `> out.txt` opened), else None: a rename over it would leave what
    is printed after going to a deleted file."""
    try:
        target = os.stat(path)
    except OSError:
        return None
    for fd in (1, 2):
        try:
            mine = os.fstat(fd)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (target.st_dev, target.st_ino):
            return fd
    return None


def read_regular(path: str | os.PathLike, limit: int) -> bytes | None:
    """The bytes of the regular file ``path``, at most ``limit`` of them; None when there is no such
    file. Anything else is refused before a byte is read (a device such as /dev/zero or /dev/full
    never ends, a pipe such as /dev/stdout in `| cat` waits for good), as is a file over ``limit``:
    OutputError names what it is. Opened without blocking, so a FIFO cannot hold the open either."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = ("a folder" if stat.S_ISDIR(info.st_mode) else "a pipe" if stat.S_ISFIFO(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a file")
            raise OutputError(f"{path} is {what}, not a regular file: give a file name")
        if info.st_size > limit:
            raise OutputError(f"{path} is {info.st_size / 2**20:,.1f} MiB, more than the {limit / 2**20:,.0f} MiB "
                              "such a file can be: give another file")
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(limit + 1)
        if len(data) > limit:  # it grew since
            raise OutputError(f"{path} is more than the {limit / 2**20:,.0f} MiB such a file can be: give another file")
        return data
    finally:
        if fd >= 0:
            os.close(fd)


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


def _write_to_descriptor(fd: int, path: Path, payload: bytes) -> Path:
    """Through our own stdout or stderr, where what was printed before ends: as `> /dev/stdout`
    does in a shell, with nothing printed before or after lost."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
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
        if (fd := our_output(path)) is not None:  # `--json /dev/stdout > out.json`: out.json is our stdout
            return _write_to_descriptor(fd, path, payload)
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
