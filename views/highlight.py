"""Syntax colour for jaxpr, StableHLO/MLIR and HLO text (pygments has no HLO lexer)."""
from __future__ import annotations

from rich.highlighter import RegexHighlighter
from rich.theme import Theme


# The rules, once: the printer's highlighter and the TUI's stage texts are both built from them.
RULES: list[tuple[str, str]] = [
    ("comment", r"(?://|#) .*$"),
    ("string", r"\"[^\"\n]*\""),
    ("type", r"\b(?:pred|[suf]\d+|bf16|c64|c128|f8e\w+)\[[\d,]*\](?:\{[^}\s]*\})?|tensor<[^>]*>|memref<[^>]*>|vector<[^>]*>"),
    ("name", r"%[\w.\-#]+"),
    ("op", r"\b(?:stablehlo|tpu|arith|vector|memref|scf|func|sdy|chlo)\.[\w.]+|(?<== )[a-z][\w\-]*(?=\()"),
    ("keyword", r"\b(?:ENTRY|ROOT|HloModule|fused_computation|lambda|let|in)\b"),
]


class IrHighlighter(RegexHighlighter):
    base_style = "ir."
    highlights = [f"(?P<{role}>{pattern})" for role, pattern in RULES]


THEME = Theme({
    "ir.comment": "dim", "ir.string": "green", "ir.type": "cyan", "ir.name": "yellow",
    "ir.op": "bold magenta", "ir.keyword": "bold blue",
})
