"""MLIR source locations, as Mosaic prints them, turned into the user's file and line.

Seen with jax 0.10.2 and libtpu 0.0.42.1:
- in a compile error, inline: ``at location: loc("get:"("get/get"(callsite("k"("/x.py":73:17 to :43)
  at "k"("/x.py":73:17 to :43)))))``; the first file location is the innermost frame (a callsite
  reads ``callsite(callee at caller)``);
- in a module printed with its debug info (``--xla_mosaic_enable_dump_debug_info``, or the
  module's ``get_asm(enable_debug_info=True)``), each op ends with ``loc(#loc12)`` and the aliases
  are defined after the module: ``#loc12 = loc("swap:"(#loc7))``, ``#loc7 = loc("/x.py":56:12 to :38)``.

Everything here is text in, plain data out; a location it cannot read is simply no location. In
hlo/, the compiler texts' layer, beside ``mlir_sources``: the jax boundary reads a kernel's lines
with it as the kernel lowers, and ``inspector.mosaic`` reads errors and pass dumps with it.
"""
from __future__ import annotations

import dataclasses
import os
import re

from ..base.user_code import short_path

_FILE_LOC = re.compile(r'(?:"([^"\n]*)"\()?"([^"\n]+)":(\d+):(\d+)')  # optional "function"( then "file":line:col
_ALIAS_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$", re.M)
_ALIAS_REF = re.compile(r"#loc\d*\b")
_OP_LOC = re.compile(r"\sloc\((#loc\d*)\)\s*$")
_SHORT_LOC = re.compile(r" ?loc\((?:#loc\d*|unknown)\)")
_AT_LOCATION = re.compile(r"at location: (loc\(.*\))\s*$", re.M)
_INSPECTOR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Frame:
    file: str  # as short as the working directory allows
    line: int
    column: int
    function: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _library(path: str) -> bool:
    p = path.replace(os.sep, "/")
    return "/site-packages/jax/" in p or "/site-packages/jaxlib/" in p or "/jax/_src/" in p or p.startswith(_INSPECTOR_DIR)


def frames_in(text: str) -> list[Frame]:
    """Every file location in one location text, in the order printed (innermost frame first),
    library frames (jax's own, the inspector's) left out."""
    found = []
    for m in _FILE_LOC.finditer(text):
        if _library(m[2]):
            continue
        found.append(Frame(short_path(m[2]), int(m[3]), int(m[4]), m[1] or None))
    return found


def error_location(message: str) -> list[Frame]:
    """The frames of the ``at location: loc(...)`` line of a Mosaic compile error (none when absent)."""
    m = _AT_LOCATION.search(message)
    return frames_in(m[1]) if m else []


def strip_error_location(message: str) -> str:
    """The message without its ``at location:`` line (as jax's own MosaicError prints it)."""
    return _AT_LOCATION.sub("", message).replace("\n\n\n", "\n\n")


class LocationTable:
    """The ``#locN = loc(...)`` aliases of a module printed with its debug info, resolved on
    demand to the user's frames (aliases nest: a name location wraps another alias)."""

    def __init__(self, text: str):
        self._raw = {m[1]: m[2] for m in _ALIAS_DEF.finditer(text)}
        self._resolved: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._raw)

    def expand(self, alias: str, depth: int = 0) -> str:
        """The alias's location text with every alias inside it expanded."""
        if alias in self._resolved:
            return self._resolved[alias]
        raw = self._raw.get(alias, "")
        text = raw if depth > 64 else _ALIAS_REF.sub(lambda m: self.expand(m[0], depth + 1) if m[0] != alias else "", raw)
        self._resolved[alias] = text
        return text

    def frames(self, alias: str | None) -> list[Frame]:
        return frames_in(self.expand(alias)) if alias else []

    def source(self, alias: str | None) -> str | None:
        """file:line of the innermost user frame, or None (``loc(unknown)``, a name only)."""
        found = self.frames(alias)
        return found[0].where if found else None


def op_alias(line: str) -> str | None:
    """The ``#locN`` an op's line ends with."""
    m = _OP_LOC.search(line)
    return m[1] if m else None


def source_lines(module_text: str) -> list[str]:
    """The distinct file:line of a module's operations (printed with debug info), in order."""
    table = LocationTable(module_text)
    seen: dict[str, None] = {}
    for line in module_text.splitlines():
        if line.startswith("#loc"):
            continue
        alias = op_alias(line)
        where = table.source(alias) if alias else None
        if where is None:  # an inline location (a module printed without aliases)
            inline = frames_in(line[line.rfind(" loc(") :]) if " loc(" in line else []
            where = inline[0].where if inline else None
        if where:
            seen.setdefault(where)
    return list(seen)


def strip_locations(text: str) -> str:
    """A module without its locations: the ``loc(...)`` at the end of each op and the alias
    table (what a diff between two passes should not show)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#loc"):
            continue
        line = _SHORT_LOC.sub("", line)
        at = line.rfind(" loc(")
        if at >= 0 and line.rstrip().endswith(")"):
            line = line[:at].rstrip()
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)
