"""What `inspector doctor` found, as plain data: one Check per thing tried. The doctor verb
(commands/doctor.py) makes it and its view (views/doctor.py) draws it; the record sits below both
so the view never imports the command.
"""
from __future__ import annotations

import dataclasses

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"


@dataclasses.dataclass
class Check:
    name: str
    state: str  # ok | warn | fail | info
    detail: str


@dataclasses.dataclass
class Checkup:
    checks: list[Check]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.state == FAIL]

    def to_dict(self) -> dict:
        return {"ok": not self.failed, "checks": [dataclasses.asdict(c) for c in self.checks]}
