"""Small readers of HLO and StableHLO text: op counts. Analyses that need more live elsewhere."""
from __future__ import annotations

import collections
import re

from .module import logical_lines, split_instruction

# An op starts its line, after an optional "%results = ": attributes such as mhlo.num_replicas do not.
_MLIR_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_]+\.[a-z_][\w.]*)')


def count_hlo_ops(text: str) -> dict[str, int]:
    counts = collections.Counter(i.opcode for i in map(split_instruction, logical_lines(text)) if i)
    return dict(counts.most_common())


def count_mlir_ops(text: str) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        m = _MLIR_OP.match(line)
        if m:
            counts[m[1]] += 1
    return dict(counts.most_common())
