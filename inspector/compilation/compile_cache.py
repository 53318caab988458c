"""On-disk cache of compile results, so a second run of the same target skips the compile.

An entry may only be served when nothing that shapes the compiler's output changed. The key is:

- the lowered module *with its locations* (``as_text(debug_info=True)``): the cached HLO names
  source files and lines in its metadata, so the same function moved down three lines or copied
  to another file is another entry;
- the chip, the host machine (the CPU compiler tunes for the host's instruction set);
- every environment variable that reaches XLA or libtpu (``XLA_*``, ``LIBTPU_*``, ``TPU_*`` but
  the logging ones): ``LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib=...`` changes the verdict;
- the jax, jaxlib, libtpu and inspector versions and the entry schema.

Entries are checked when read: one that is not what this version writes (truncated, another
structure, another key) is a miss and is overwritten by the next store. Compile failures are never
stored (they are cheap to reproduce and a flag change may fix them). Writes go to a temporary file
that is renamed into place and removed on every path, so a failed store leaves nothing behind.
"""
from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import platform
import re
import stat
import tempfile
import time
from pathlib import Path

from ..base import json_text
from ..base.atomic import write_atomic
from ..base.errors import OutputError
from ..hlo.module import entry_is_whole
from ..base.units import fmt_bytes
from ..base.version import __version__

SCHEMA = 2  # bump when the stored result's structure or meaning changes
REFRESH = "refresh"  # use_cache value: do not read, but store the fresh result (--no-cache)

_ENV_PREFIXES = ("XLA_", "LIBTPU_", "TPU_")
# Variables with those prefixes that only steer logging or the TPU probe, never the compiled code.
_ENV_IGNORED = {"TPU_LOG_DIR", "TPU_STDERR_LOG_LEVEL", "TPU_MIN_LOG_LEVEL", "TPU_VMODULE",
                "TPU_MAX_LOG_SIZE_MB", "TPU_SKIP_MDS_QUERY", "TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID",
                "TPU_ACCELERATOR_TYPE",
                # set by libtpu itself when it starts (a runtime host-buffer size): a process that
                # started it before computing the key would otherwise miss what another stored
                "TPU_PREMAPPED_BUFFER_SIZE"}
_ENTRY = re.compile(r"^[0-9a-f]{64}\.json$")
_STALE_TMP_S = 600  # a temporary file this old belongs to a store that was killed


def cache_dir() -> Path:
    root = os.environ.get("INSPECTOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jax-inspector")
    return Path(root)


def enabled() -> bool:
    """Off with INSPECTOR_NO_CACHE=1, and while XLA is asked to dump passes (a cache hit would
    skip the compile and write no dump)."""
    if os.environ.get("INSPECTOR_NO_CACHE", "") not in ("", "0"):
        return False
    return "--xla_dump_to" not in os.environ.get("XLA_FLAGS", "")


def dist_version(dist: str) -> str:
    from importlib import metadata  # only for a key: ~15 ms the terminal UI's first paint does without

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def own_version() -> str:
    return f"{dist_version('jax-inspector')}/{__version__}"


def compiler_environment() -> dict[str, str]:
    """The environment variables that reach XLA or libtpu and may change what they produce."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED}


def _host() -> str:
    """The CPU compiler specialises for the host's instruction set: the machine and its flags."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return f"{platform.machine()}:{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def key_parts(module_text: str, chip: str) -> dict[str, str]:
    """Everything the key is made of, by name (tests and `--debug` can say what differs)."""
    return {
        "schema": str(SCHEMA),
        "versions": ";".join(f"{d}={dist_version(d)}" for d in ("jax", "jaxlib", "libtpu")) + f";inspector={own_version()}",
        "chip": chip,
        "host": _host() if chip in ("cpu", "gpu") else platform.machine(),
        "environment": json.dumps(compiler_environment()),
        "module": module_text,
    }


def key(module_text: str, chip: str) -> str:
    h = hashlib.sha256()
    for name, part in key_parts(module_text, chip).items():
        h.update(name.encode() + b"=" + part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def hlo_is_whole(text: str) -> bool:
    """What the analyses need of a cached HLO text, checked without parsing it all: a module
    header, an ENTRY computation header the parser reads, and that computation's ROOT and closing
    brace. A text that fails this would be served as "hlo ops 0" with failed analyses."""
    return text.startswith("HloModule ") and entry_is_whole(text)


def _valid_result(result) -> bool:
    """What this version stores: optimized HLO text, XLA's cost (name -> float) and memory
    (name -> int) dicts, no error (failures are not stored), and the compile's seconds."""
    if not isinstance(result, dict) or set(result) - {"buffers", "seconds", "kernel_dumps"} != {"hlo", "cost", "memory", "error"}:
        return False
    if not isinstance(result.get("seconds", 0.0), (int, float)):  # what the compiler took (the estimate's hard stops)
        return False
    if not isinstance(result.get("buffers", {}), (dict, type(None))):  # the buffer assignment (--view memory)
        return False
    dumps = result.get("kernel_dumps", {})  # XLA:GPU's thunk sequence and PTX, by file
    if not isinstance(dumps, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in dumps.items()):
        return False
    if not isinstance(result["hlo"], str) or not hlo_is_whole(result["hlo"]) or result["error"] is not None:
        return False
    for name, kind in (("cost", (int, float)), ("memory", int)):
        table = result[name]
        if table is not None and not (isinstance(table, dict) and all(
                isinstance(k, str) and isinstance(v, kind) and not isinstance(v, bool) for k, v in table.items())):
            return False
    return True


def load(k: str) -> dict | None:
    """The stored result for key ``k``, or None: missing, unreadable or not what we write."""
    path = cache_dir() / f"{k}.json"
    try:
        entry = json_text.loads(read_regular(path))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("key") != k:
        return None
    result = entry.get("result")
    return result if _valid_result(result) else None


def read_regular(path: Path) -> str:
    """The text of a regular file; anything else in its place (a pipe, a link to /dev/zero) would
    block or never end, so it is a miss (OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read().decode("utf-8")
    finally:
        os.close(fd)


def store(k: str, result: dict) -> bool:
    """Store a successful result; True when it was written. A cache that cannot be written only
    costs time, so errors are swallowed, and the temporary file is removed on every path."""
    if not _valid_result(result):
        return False
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(directory)
        write_atomic(directory / f"{k}.json", json_text.dumps({"schema": SCHEMA, "key": k, "result": result}), own=True)
        return True
    except (OSError, OutputError, ValueError, TypeError):
        return False


def load_entry(k: str, kind: str, schema: int):
    """The result another cache keeps beside the compiles (a tune row, a fix trial) under key
    ``k``, or None: missing, unreadable, or not of that ``kind`` and ``schema``."""
    try:
        entry = json_text.loads(read_regular(cache_dir() / f"{k}.json"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != schema or entry.get("key") != k or entry.get("kind") != kind:
        return None
    return entry.get("result")


def store_entry(k: str, kind: str, schema: int, result) -> bool:
    """Keep such a result, written whole or not at all; a cache that cannot be written only costs time."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / f"{k}.json", json_text.dumps({"schema": schema, "key": k, "kind": kind, "result": result}),
                     own=True)
        return True
    except (OSError, OutputError, ValueError, TypeError):
        return False


def _temp_files(directory: Path) -> list[Path]:
    # Ours (.KEY.xxxx.tmp), and the tmp*.tmp an older version left behind.
    return [p for p in directory.glob("*.tmp") if p.name.startswith((".", "tmp")) and p.is_file()]


def _remove_stale_tmp(directory: Path) -> None:
    now = time.time()
    for p in _temp_files(directory):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_S:
                p.unlink()
        except OSError:
            pass


def _entries(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if _ENTRY.match(p.name) and p.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []


@dataclasses.dataclass(frozen=True, kw_only=True)
class CacheInfo:
    path: str
    exists: bool
    entries: int
    bytes: int  # entries and temporary files together
    temp_files: int
    problem: str | None = None  # one line when nothing can be stored there (every run compiles again)


_FULL_BYTES = 16 << 20  # less free than this: an entry of a large program (HLO of MBs) cannot be stored


def problem(directory: Path | None = None) -> str | None:
    """Why entries cannot be stored in the cache folder, as one line (what to do included), or
    None when they can: the path is a file, a parent of it is a file, the folder is read-only, or
    its disk is full. Found by trying: a small file is written and removed."""
    directory = directory or cache_dir()
    fix = "set INSPECTOR_CACHE_DIR to a writable folder"
    if directory.exists() and not directory.is_dir():
        return f"compile cache {directory} is a file, not a folder: nothing is cached; remove it or {fix}"
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"compile cache {directory} cannot be made: {existing} is a file; nothing is cached ({fix})"
    try:
        free = os.statvfs(existing).f_bavail * os.statvfs(existing).f_frsize
    except OSError:
        free = None
    try:
        _probe_write(existing)
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"compile cache {directory}: its disk is full: nothing is cached, every run compiles again (free space, or {fix})"
        what = "is read-only" if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else f"cannot be written ({err.strerror or err})"
        where = directory if existing == directory else f"{directory} (its folder {existing})"
        return f"compile cache {where} {what}: nothing is cached, every run compiles again (chmod u+w it, or {fix})"
    if free is not None and free < _FULL_BYTES:
        return (f"compile cache {directory}: its disk is full ({fmt_bytes(free)} free): entries of large programs cannot "
                f"be stored, every run compiles them again (free space, or {fix})")
    return None


def _probe_write(directory: Path) -> None:
    """Write and remove one small file in ``directory``; raises the OSError a store would meet."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=".probe.", suffix=".tmp")
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def info() -> CacheInfo:
    directory = cache_dir()
    files = _entries(directory)
    temps = _temp_files(directory) if directory.is_dir() else []
    size = 0
    for p in files + temps:
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return CacheInfo(path=str(directory), exists=directory.is_dir(), entries=len(files), bytes=size, temp_files=len(temps),
                     problem=problem(directory))


def clear() -> CacheInfo:
    """Remove every entry and temporary file; only our own files, never the folder's other
    contents (INSPECTOR_CACHE_DIR may point anywhere). Returns what was removed. A cache path
    that is a file is not a cache: NotADirectoryError (nothing is removed)."""
    directory = cache_dir()
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "it is a file, not a folder; nothing was removed", str(directory))
    before = info()
    for p in _entries(directory) + (_temp_files(directory) if directory.is_dir() else []):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    return before
