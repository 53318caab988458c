"""The tuning table: for each input shape, the best parameters per chip, as JSON that kernel code
loads at run time (the way serving projects keep theirs). A rerun with another shape adds it;
a shape and chip swept again are replaced; the file is written whole or not at all.

    {"schema": 1, "kernel": "samples/matmul.py:tiled",
     "entries": {"bf16[1024,1792] bf16[1792,4608]": {
         "tpu-v5e": {"params": {"bm": 512, ...}, "estimated_seconds": 0.00031, "estimate_source": "libtpu",
                     "device_kind": "TPU v5 lite", "candidates": 64, "ranked": 40,
                     "versions": {"jax": "0.10.2", "libtpu": "0.0.42.1", ...}, "tuned": "2026-12-01T12:00:00Z"}}}}

``lookup`` is all kernel code needs (json only; copy it if you would rather not import the
inspector at run time).
"""
from __future__ import annotations

import contextlib
import time

from ..base import json_text
from ..base.atomic import check_not_read_only, check_writable, our_output, read_regular, write_atomic
from ..base.chips import get_chip
from ..base.errors import OutputError, UsageError
from ..base.specs import hlo_type

SCHEMA = 1
MAX_BYTES = 64 << 20  # a table holds a few hundred bytes per shape and chip: a larger file is not one


def shape_key(*arrays) -> str:
    """The table's key for these inputs (arrays or ShapeDtypeStructs): "bf16[1024,1792] bf16[1792,4608]"."""
    return " ".join(hlo_type(str(a.dtype), tuple(a.shape)) for a in arrays)


def lookup(path: str, shape: str, chip: str, default: dict | None = None) -> dict | None:
    """The tuned parameters for ``shape`` (``shape_key(*inputs)``) on ``chip`` (a name such as
    "tpu-v5e", or jax's device kind such as "TPU v5 lite"), or ``default`` when the table has none.

        params = lookup("matmul_tuning.json", shape_key(a, b), jax.devices()[0].device_kind, {"bm": 256})
    """
    try:
        with open(path) as f:
            table = json_text.loads(f.read())
    except (OSError, ValueError):
        return default
    try:  # a table edited by hand into another structure is no table: the default, never a crash at run time
        chips = (table.get("entries") or {}).get(shape) or {}
        entry = chips.get(chip) or next((e for e in chips.values() if e.get("device_kind") == chip), None)
        return dict(entry["params"]) if entry and "params" in entry else default
    except (AttributeError, TypeError, ValueError):
        return default


def read_table(path: str, kernel: str | None = None) -> dict:
    """The table at ``path``, or a new one when there is no file; a file that is not a tuning
    table, or is another kernel's (``kernel``: the spec about to be written), is refused (it
    would be overwritten, or mixed with this kernel's parameters)."""
    try:
        data = read_regular(path, MAX_BYTES)  # /dev/zero, a pipe, a huge file: refused before reading
    except OutputError as err:
        raise UsageError(f"--table {err}") from err
    except OSError as err:
        raise UsageError(f"--table {path}: cannot read it: {err.strerror or err}") from err
    if data is None:
        return {"schema": SCHEMA, "kernel": None, "entries": {}}
    try:
        text = data.decode("utf-8")
        table = json_text.loads(text) if text.strip() else {"schema": SCHEMA, "kernel": None, "entries": {}}
    except ValueError as err:  # UnicodeDecodeError included
        raise UsageError(f"--table {path} is not JSON ({_one_line(err)}): give a new file or a tuning table") from err
    if not _is_table(table):
        raise UsageError(f"--table {path} is not a tuning table of this version: give a new file")
    if kernel and table.get("kernel") and _kernel_id(table["kernel"]) != _kernel_id(kernel):
        raise UsageError(f"--table {path} holds the tuning of {table['kernel']}, not {kernel}: give each kernel "
                         "its own table")
    return table


def check_table(path: str, kernel: str) -> None:
    """Before a sweep: the table can be written (its folder, not a folder itself, not read-only)
    and is a tuning table of this kernel, or no file yet; else a UsageError now, not after the sweep."""
    if our_output(path) is not None:  # read, it is what we print; renamed over, what we print after is lost
        raise UsageError(f"--table {path} is this command's own output: give the table a file name "
                         "(--json prints the results)")
    check_writable(path)
    check_not_read_only(path)
    read_table(path, kernel)


def _is_table(table) -> bool:
    """The structure ``update_table`` writes: {shape: {chip: {params: {...}, ...}}}."""
    if not isinstance(table, dict) or table.get("schema") != SCHEMA or not isinstance(table.get("entries"), dict):
        return False
    return all(isinstance(chips, dict) and all(isinstance(e, dict) and isinstance(e.get("params", {}), dict)
                                               for e in chips.values())
               for chips in table["entries"].values())


def _kernel_id(spec: str) -> tuple[str, str]:
    """A kernel as the file's name and the function: the same whichever folder the sweep ran from."""
    import os

    where, _, func = str(spec).rpartition(":")
    return os.path.basename(where), func


def _one_line(err: Exception) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__


def update_table(path: str, result) -> str:
    """Add (or replace) each swept shape's best per chip; returns the path written. A chip swept
    again without a ranked candidate loses its old entry (it no longer holds). The read and the
    write hold a lock on the folder, so two sweeps writing one table both land."""
    with _folder_lock(path):
        table = read_table(path, result.target)
        table["kernel"] = table.get("kernel") or result.target
        tuned = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for shape in result.shapes:
            chips = table["entries"].setdefault(shape.shape, {})
            for ranking in shape.chips:
                best = ranking.best
                if best is None:
                    chips.pop(ranking.chip, None)
                    continue
                chips[ranking.chip] = {
                    "params": {**result.fixed, **best.params},
                    "estimated_seconds": best.estimated_seconds,
                    "estimate_source": best.estimate_source,
                    "estimate_kind": best.estimate_kind,  # "floor" on a GPU: a lower bound, not libtpu's estimate
                    "device_kind": get_chip(ranking.chip).device_kind,
                    "candidates": len(ranking.rows),
                    "ranked": ranking.count("ranked"),
                    "default_ratio": ranking.default_ratio,
                    "versions": {k: result.versions.get(k) for k in ("jax", "jaxlib", "libtpu", "inspector")},
                    "tuned": tuned,
                }
            if not chips:
                table["entries"].pop(shape.shape, None)
        return str(write_atomic(path, json_text.dumps(table, indent=2) + "\n"))


@contextlib.contextmanager
def _folder_lock(path: str):
    """An exclusive flock on the table's folder (the file itself is replaced by a rename, so a
    lock on it would not hold); nothing is left behind. Where locks do not work, no lock."""
    import os

    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing drops the lock
