"""A finding: something the user should know, with how bad it is and where the evidence is."""
from __future__ import annotations

import dataclasses

SEVERITIES = ("error", "warning", "info")


@dataclasses.dataclass
class Finding:
    severity: str  # error | warning | info
    code: str  # stable identifier, e.g. compile-vmem-oom, block-out-of-bounds
    message: str
    kernel: str | None = None
    operand: str | None = None
    view: str | None = None  # the view that shows the evidence
    data: dict | None = None


def by_severity(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))
