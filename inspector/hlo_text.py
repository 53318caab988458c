"""Small readers of HLO and StableHLO text: op counts. Analyses that need more live elsewhere."""
from __future__ import annotations

import collections
import re

# An op starts its line, after an optional "%results = ": attributes such as mhlo.num_replicas do not.
_MLIR_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_]+\.[a-z_][\w.]*)')
_HLO_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*")


def _skip_shape(rest: str) -> str:
    """Drop the leading shape of an instruction; tuple shapes nest in parentheses and hold spaces."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return rest[i + 1:].lstrip()
        return ""
    return rest.split(" ", 1)[1] if " " in rest else ""


def hlo_opcode(line: str) -> str | None:
    """The opcode of one HLO instruction line, or None for other lines."""
    m = _HLO_INSTR.match(line)
    if not m:
        return None
    rest = _skip_shape(line[m.end():])
    op = rest.split("(", 1)[0].strip()
    return op or None


def count_hlo_ops(text: str) -> dict[str, int]:
    counts = collections.Counter(op for op in map(hlo_opcode, text.splitlines()) if op)
    return dict(counts.most_common())


def count_mlir_ops(text: str) -> dict[str, int]:
    counts = collections.Counter()
    for line in text.splitlines():
        m = _MLIR_OP.match(line)
        if m:
            counts[m[1]] += 1
    return dict(counts.most_common())
