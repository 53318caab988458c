"""`inspector doctor`'s table: one line per check."""
from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..base.checkup import Checkup
from .cells import add_row

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "dim"}


def doctor_view(found: Checkup) -> Group:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("", "check", "found"):
        table.add_column(col, overflow="fold")
    for c in found.checks:
        add_row(table, Text(c.state, style=_STYLE[c.state]), c.name, c.detail)
    failed = found.failed
    verdict = (Text(f"{len(failed)} check{'s' * (len(failed) > 1)} failed: " + ", ".join(c.name for c in failed),
                    style="bold red") if failed else Text("everything asked for works", style="green"))
    return Group(table, verdict)
