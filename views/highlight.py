"""Syntax colour for jaxpr, StableHLO/MLIR and HLO text (pygments has no HLO lexer)."""
from __future__ import annotations

from rich.highlighter import RegexHighlighter
from rich.theme import Theme


class IrHighlighter(RegexHighlighter):
    base_style = "ir."
    highlights = [
        r"(?P<comment>(//|#) .*$)",
        r"(?P<string>\"[^\"\n]*\")",
        r"(?P<type>\b(?:pred|[suf]\d+|bf16|c64|c128|f8e\w+)\[[\d,]*\](?:\{[^}\s]*\})?)",
        r"(?P<type>tensor<[^>]*>|memref<[^>]*>|vector<[^>]*>)",
        r"(?P<name>%[\w.\-#]+)",
        r"(?P<op>\b(?:stablehlo|tpu|arith|vector|memref|scf|func|sdy|chlo)\.[\w.]+)",
        r"(?P<op>(?<== )(?:[a-z][\w\-]*)(?=\())",
        r"(?P<keyword>\b(?:ENTRY|ROOT|HloModule|fused_computation|lambda|let|in)\b)",
    ]


THEME = Theme({
    "ir.comment": "dim", "ir.string": "green", "ir.type": "cyan", "ir.name": "yellow",
    "ir.op": "bold magenta", "ir.keyword": "bold blue",
})
