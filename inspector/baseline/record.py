"""A baseline: per target (its spec and --set values), chip and kernel, the figures the inspector
computes without a TPU, with the versions that made them. Plain strict JSON, keys sorted, one
figure a line, so that a saved baseline diffs well in review.

A kernel is keyed by what survives an edit: its kind, its name without XLA's numbering
(``matmul.1`` -> ``matmul``) and the source line it comes from (``matmul.py:53``); two kernels of
one key get ``#2``, ``#3`` in schedule order."""
from __future__ import annotations

import dataclasses
import json
import os
import re
from importlib import metadata
from typing import Any

from ..base import json_text
from ..base.atomic import read_regular, write_atomic
from ..base.errors import UsageError

from .figures import FIGURES, NUMERIC, PROGRAM, SCHEMA, stem, target_label  # noqa: F401  (the record's names)


def versions() -> dict[str, str | None]:
    from ..base.version import __version__

    found: dict[str, str | None] = {"inspector": __version__}
    for dist in ("jax", "jaxlib", "libtpu"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def kernel_keys(kernels: list[tuple[str, str, str | None]]) -> list[str]:
    """One key per (kind, name, source) in schedule order: ``kind stem source``, ``#N`` on repeats."""
    seen: dict[str, int] = {}
    keys = []
    for kind, name, source in kernels:
        base = f"{kind} {stem(name)} {source or '-'}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return keys


def time_figure(seconds: float | None, kind: str | None, high: float | None) -> dict | None:
    if seconds is None:
        return None
    return {"seconds": seconds, "kind": kind or "estimate", "high_seconds": high}


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A baseline document and where it came from (a file, or this run)."""

    data: dict
    path: str | None = None

    @property
    def targets(self) -> dict[str, dict]:
        return self.data["targets"]

    @property
    def chips(self) -> list[str]:
        return list(self.data["chips"])

    @property
    def versions(self) -> dict:
        return self.data["versions"]

    @property
    def time(self) -> bool:
        return bool(self.data.get("time"))

    def text(self) -> str:
        return json_text.dumps(self.data, indent=2, sort_keys=True) + "\n"


def new_baseline(chips: list[str], time: bool, targets: dict[str, dict], time_budget: float | None = None) -> Baseline:
    return Baseline({"schema": SCHEMA, "versions": versions(), "chips": list(chips), "time": time,
                     "time_budget_s": time_budget, "targets": targets})


_OURS = re.compile(rb'"schema":\s*"inspector-baseline/')


def written_by_us(head: bytes) -> bool:
    """Whether a file's first bytes are a baseline's (its keys sorted: "schema" comes after the
    chips, near the top), or nothing at all: an empty file holds nothing to lose."""
    return not head.strip() or _OURS.search(head) is not None


def save(baseline: Baseline, path: str) -> str:
    """Write it whole or not at all (a temporary file renamed over the old)."""
    return str(write_atomic(path, baseline.text()))


def _strict(raw: bytes) -> Any:
    """RFC 8259 JSON only: NaN, Infinity and a key given twice are refused (json takes them)."""
    def constant(word: str) -> Any:
        raise ValueError(f"{word} is not JSON (a figure is a finite number)")

    def pairs(items: list[tuple[str, Any]]) -> dict:
        found = dict(items)
        if len(found) != len(items):
            twice = next(k for i, (k, _) in enumerate(items) if k in dict(items[:i]))
            raise ValueError(f"key {twice!r} given twice")
        return found

    return json.loads(raw.decode("utf-8-sig"), parse_constant=constant, object_pairs_hook=pairs)  # a BOM an editor added: fine


def load(path: str | os.PathLike) -> Baseline:
    """A saved baseline, checked whole (schema.py); a UsageError naming the first bad field otherwise."""
    from .schema import Bad, check

    path = os.fspath(path)
    redo = f"make one with `inspector baseline save {path} TARGET...`"
    if not os.path.exists(path):
        raise UsageError(f"baseline {path}: no such file: {redo}")
    if os.path.isdir(path):
        raise UsageError(f"baseline {path} is a folder: give the baseline's JSON file")
    try:
        raw = read_regular(path, 256 << 20)
    except OSError as err:
        raise UsageError(f"baseline {path}: cannot read it ({err.strerror or err})") from None
    except UsageError as err:  # a device, a pipe, a file over the limit
        raise UsageError(f"baseline {err}") from None
    if raw is None:
        raise UsageError(f"baseline {path}: no such file: {redo}")
    try:
        data = _strict(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise UsageError(f"baseline {path}: not JSON ({_one_line(err)}): {redo}, or restore it from version control") from None
    try:
        check(data)
    except Bad as err:
        raise UsageError(f"baseline {path}: not an inspector baseline: {_one_line(err)}: {redo}, or restore it from "
                         "version control") from None
    return Baseline(data, path)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:297] + "..."
