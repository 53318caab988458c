"""StableHLO with each op's source line, as the jaxpr has them.

jax prints a lowered module's locations (``as_text(debug_info=True)``) as ``loc(#locN)`` on every
op and a table of aliases at the end: names (``"jit(f)/dot_general"(#loc3)``), call sites
(``callsite(#callee at #caller)``) and file positions (``"f.py":17:8``). Here each op keeps its
text and gains ``// file.py:17`` (the innermost frame, as jax records user frames), and the alias
table goes, so the module reads as it did and a view can link it to the jaxpr and HLO lines."""
from __future__ import annotations

import re

from ..base.user_code import short_path

_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_TRAILING_LOC = re.compile(r"\s+loc\(((?:[^()\"]|\"[^\"]*\"|\((?:[^()\"]|\"[^\"]*\")*\))*)\)(\s*\{?)\s*$")
_ARG_LOC = re.compile(r" loc\((?:\"[^\"]*\"|unknown|#loc\d*)\)")
_FILE = re.compile(r'^"([^"]+)":(\d+)(?::\d+)?')
_NAMED = re.compile(r'^"([^"]*)"\((.*)\)$')


def _split_callsite(inner: str) -> tuple[str, str] | None:
    """``A at B`` at the top level of a callsite's parentheses."""
    depth, quoted = 0, False
    for i, ch in enumerate(inner):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and inner.startswith(" at ", i):
            return inner[:i], inner[i + 4:]
    return None


class _Resolver:
    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.memo: dict[str, str | None] = {}

    def __call__(self, expr: str, depth: int = 0) -> str | None:
        expr = expr.strip()
        if depth > 64:  # an alias cycle would be a malformed module: no source, not a hang
            return None
        if expr in self.memo:
            return self.memo[expr]
        found = None
        if expr.startswith("#loc"):
            found = self(self.aliases.get(expr, "unknown"), depth + 1)
        elif m := _FILE.match(expr):
            found = f"{short_path(m[1])}:{m[2]}"
        elif expr.startswith("callsite(") and expr.endswith(")"):
            parts = _split_callsite(expr[len("callsite("):-1])
            if parts:  # the callee first: the innermost frame
                found = self(parts[0], depth + 1) or self(parts[1], depth + 1)
        elif expr.startswith("fused[") and expr.endswith("]"):
            for part in expr[len("fused["):-1].split(", "):
                if found := self(part, depth + 1):
                    break
        elif m := _NAMED.match(expr):
            # "jit(f)" alone is where f was called (the caller's frame, a notebook cell or the
            # inspector itself), not a line of f: no source, as the jaxpr has none there
            if not (m[1].startswith("jit(") and "/" not in m[1]):
                found = self(m[2], depth + 1)
        self.memo[expr] = found
        return found


def with_sources(debug_text: str) -> str:
    """The module as ``as_text()`` prints it, each op followed by ``// file:line`` where known."""
    lines = debug_text.splitlines()
    aliases = {m[1]: m[2] for line in lines if line.startswith("#loc") and (m := _ALIAS.match(line))}
    resolve = _Resolver(aliases)
    out = []
    for line in lines:
        if line.startswith("#loc") and _ALIAS.match(line):
            continue
        m = _TRAILING_LOC.search(line)
        source = None
        if m:
            source = resolve(m[1])
            line = line[:m.start()] + m[2].rstrip()
        line = _ARG_LOC.sub("", line)
        out.append(f"{line}  // {source}" if source else line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + "\n"
