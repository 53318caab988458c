"""Temporary folders (compiler dumps, libtpu logs) that never outlive the process that made them.

Every folder lives in ``$TMPDIR/inspector-<kind>-<random>/``: the folder handed out is its
``files/`` subfolder (so a reader that lists the dump sees only the compiler's files), beside a
``.owner`` file that the owning process holds an exclusive ``flock`` on for the folder's life.
The kernel drops that lock when the process ends in any way (SIGKILL and a crash in libtpu
included), so whoever looks next can tell a folder whose owner is gone from one in use, without
guessing from its age or trusting a process id that may have been reused:

- ``temp_folder(kind)``: a context manager; the folder is removed when the block ends, on every
  path (an exception, Ctrl-C in this process).
- ``new_folder(kind)`` / ``remove(folder)``: a folder kept across calls (the terminal UI's pass
  dumps, libtpu's log folder); removed by ``remove``, else when this process exits.
- ``sweep()``: removes every folder whose owner has ended. The CLI's parent calls it as soon as it
  has killed its analysis child (Ctrl-C, SIGTERM) or found it dead; the terminal UI's worker pool
  after a cancel; and every ``new_folder``, so what a killed process left goes with the next run.

Folders of older versions (no ``.owner``) are swept once they are 6 hours old, as before.
"""
from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import tempfile
import time
from types import ModuleType
from typing import Iterator

PREFIX = "inspector-"
_OWNER = ".owner"
_FILES = "files"
_LEGACY = ("inspector-passes-", "inspector-dump-", "inspector-tpu-logs-", "inspector-tune-shipped-")  # before this module: no .owner
_LEGACY_STALE_S = 6 * 3600
_OWNED: dict[str, tuple[int, int]] = {}  # this process's folders: root -> (descriptor holding its lock, pid)

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # no flock (Windows): an owner is its process id, alive or not
    fcntl = None


def _lock(fd: int) -> bool:
    """Take the exclusive lock without waiting; False when another open file holds it."""
    assert fcntl is not None  # its one caller checks
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def new_folder(kind: str) -> str:
    """A fresh empty folder for ``kind`` (a word: "passes", "dump", "llo"), owned by this process
    until ``remove`` or its exit. Sweeps the folders of ended processes first."""
    sweep()
    root = tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-")
    try:
        # The lock is taken under a temporary name and renamed: a sweep never sees an unlocked .owner.
        fd = os.open(os.path.join(root, _OWNER + ".new"), os.O_WRONLY | os.O_CREAT, 0o600)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without locks: the folder is never judged ended (only removed by us)
                pass
        os.write(fd, str(os.getpid()).encode())
        os.rename(os.path.join(root, _OWNER + ".new"), os.path.join(root, _OWNER))
        os.mkdir(os.path.join(root, _FILES))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    _OWNED[root] = (fd, os.getpid())
    return os.path.join(root, _FILES)


def _root(folder: str) -> str:
    folder = os.path.abspath(folder)
    return os.path.dirname(folder) if os.path.basename(folder) == _FILES else folder


def remove(folder: str) -> None:
    """Remove a folder ``new_folder`` gave (its files and its lock); a folder already gone is fine."""
    root = _root(folder)
    shutil.rmtree(root, ignore_errors=True)
    fd, _ = _OWNED.pop(root, (None, None))
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


@contextlib.contextmanager
def temp_folder(kind: str) -> Iterator[str]:
    """``with temp_folder("llo") as folder:`` a fresh folder, removed when the block ends."""
    folder = new_folder(kind)
    try:
        yield folder
    finally:
        remove(folder)


def owned() -> list[str]:
    """The folders this process holds now (tests; ``--debug``)."""
    return [os.path.join(root, _FILES) for root in _OWNED]


def _owner_gone(root: str) -> bool:
    path = os.path.join(root, _OWNER)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # being made or removed right now, or another user's: not ours to judge
    try:
        if fcntl is not None:
            return _lock(fd)  # the lock is free: its owner has ended
        pid = int(os.read(fd, 32) or 0)
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except OSError:
        return False


def sweep() -> int:
    """Remove every folder of ours whose owner has ended (and pre-lock folders 6 hours old);
    returns how many. Another user's folders (mode 0700) cannot be read and are left alone."""
    removed = 0
    for root in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*")):
        if root in _OWNED or not os.path.isdir(root) or os.path.islink(root):
            continue
        if os.path.exists(os.path.join(root, _OWNER)):
            gone = _owner_gone(root)
        else:
            try:
                gone = (os.path.basename(root).startswith(_LEGACY)
                        and time.time() - os.stat(root).st_mtime > _LEGACY_STALE_S)
            except OSError:
                gone = False
        if gone:
            shutil.rmtree(root, ignore_errors=True)
            removed += not os.path.exists(root)
    return removed


@atexit.register
def _remove_owned() -> None:
    for root, (_, pid) in list(_OWNED.items()):
        if pid == os.getpid():  # a forked child that exits normally leaves its parent's folders be
            remove(root)


class KeptFolder:
    """One folder of compiler dumps kept for the last key asked (a module, its chip and flags):
    the first ``get`` of a key fills a fresh folder, the next ones answer from it; another key's
    folder replaces it (the old one removed first), and the process's exit removes it."""

    def __init__(self, kind: str):
        self.kind = kind
        self.key: object = None
        self.folder: str | None = None
        self.value: object = None
        atexit.register(self.forget)

    def get(self, key, fill):
        """``fill(folder)``'s value for ``key``; what it raised leaves no folder behind."""
        if self.folder is not None and self.key == key and os.path.isdir(self.folder):
            return self.value
        self.forget()
        folder = new_folder(self.kind)
        try:
            value = fill(folder)
        except BaseException:
            remove(folder)
            raise
        self.key, self.folder, self.value = key, folder, value
        return value

    def forget(self) -> None:
        if self.folder is not None:
            remove(self.folder)
        self.key = self.folder = self.value = None

