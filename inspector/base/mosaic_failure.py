"""A failed Pallas TPU kernel, explained, as plain data: which kernel, the source line, the rule it
broke and the fix. ``inspector.mosaic.explain`` makes it from what the capture kept; it travels in
the Stages (``CompileError.mosaic``), so the record sits below the compile path that stores it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .findings import CODES, Finding
from .units import fmt_bytes, fmt_bytes_range

UNKNOWN_KIND = "unknown"  # the kind of a message no row of inspector.mosaic.error_kinds recognises


@dataclasses.dataclass(kw_only=True)
class MosaicFailure:
    """One failed kernel: where, which rule, what to do. Plain data (it travels in Stages)."""

    kind: str  # an ErrorKind name ("unknown" when no row of the table recognised the message)
    code: str  # the finding code
    title: str
    kernel: str | None  # the pallas_call's name
    source: str | None  # file:line of the failing operation (or of the pallas_call: see source_of)
    source_of: str  # "op" (the compiler's location), "eqn" (the equation jax was lowering), "pallas_call", "none"
    op: str | None  # the MLIR operation the compiler names
    compiler: str  # the compiler's own words, without the location line
    error_code: str | None  # E2003 and the like
    rule: str | None
    fix: str | None
    details: dict = dataclasses.field(default_factory=dict)  # what the message and the kernel say (dim, primitive, ...)
    frames: list[str] = dataclasses.field(default_factory=list)  # file:line function, innermost first
    pallas_call: str | None = None  # file:line of the pallas_call
    seen: str = ""  # the versions and chips the kind was seen with

    @property
    def headline(self) -> str:
        where = " ".join(p for p in (f"in {self.kernel}" if self.kernel else "", f"at {self.source}" if self.source else "") if p)
        if self.kind == UNKNOWN_KIND:
            return f"Mosaic error {where}: {_first_line(self.compiler)}".replace("  ", " ")
        code = f" ({self.error_code})" if self.error_code else ""
        return f"{self.title}{code} {where}".rstrip()

    def finding(self, chip: str, view: str = "mosaic", data: dict | None = None, message: str | None = None) -> Finding:
        """The finding: the headline, the rule and the fix; ``data`` names the source line
        (``source``), the kernel, the rule and fix, the compiler's words, and what the message
        captured. ``data`` and ``message`` given: the VMEM finding's own, extended."""
        body = message or f"{chip}: {self.headline}"
        if self.kind == UNKNOWN_KIND:
            text = body + ("" if self.source else " (no source line in the message)")
        else:
            text = f"{body}. Rule: {self.rule} Fix: {self.fix}"
        declared = CODES[self.code].fields if self.code in CODES else ()
        fields: dict[str, Any] = {"chip": chip, "kind": self.kind, "kernel": self.kernel, "source": self.source,
                  "source_of": self.source_of, "op": self.op, "rule": self.rule, "fix": self.fix,
                  "compiler": self.compiler, "error_code": self.error_code, "pallas_call": self.pallas_call,
                  "frames": list(self.frames), "seen": self.seen}
        fields.update({k: v for k, v in self.details.items() if k in declared and k not in fields})
        fields["details"] = {k: v for k, v in self.details.items() if k not in fields}
        return Finding("error", self.code, text, kernel=self.kernel, view=view, data={**fields, **(data or {})})


def _first_line(text: str) -> str:
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    return line if len(line) <= 300 else line[:297] + "..."


def vmem_note(data: dict) -> str:
    if "estimate_bytes" not in data:
        return ""
    estimate = fmt_bytes_range(data.get("estimate_certain_bytes"), data["estimate_bytes"])
    return (f"; the inspector's estimate: {estimate} of {fmt_bytes(data['estimate_limit_bytes'])} "
            f"({data['estimate_limit_source']})")
