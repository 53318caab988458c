"""Table helpers shared by the printers: cells that never parse as markup, and the findings table."""
from __future__ import annotations

from typing import Callable

from rich.table import Table
from rich.text import Text

from ..base.findings import Finding
from ..base.units import fmt_bytes

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def add_row(table: Table, *cells) -> None:
    """Add a row; strings become Text, so user data such as "s0[j * 4 + k]" is never read as markup."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def findings_table(findings: list[Finding], more: Callable[[Finding], list[Text]] | None = None) -> Table | Text:
    """Each finding, its compiler allocations, and ``more``'s lines under it (the fixes that answer it)."""
    if not findings:
        return Text("no findings", style="green")
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, style="dim")
    table.add_column()
    for f in findings:
        add_row(table, Text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")), f.code, f.message)
        for line in allocation_lines(f) + (more(f) if more is not None else []):
            add_row(table, "", "", line)
    return table


def allocation_lines(f: Finding, limit: int = 5) -> list[Text]:
    """A VMEM out-of-memory compile's largest allocations, as the compiler listed them."""
    allocations = ((f.data or {}).get("allocations") or []) if f.code == "compile-vmem-oom" else []
    lines = []
    for a in allocations[:limit]:
        what = " ".join(str(x) for x in (a.get("role") or "allocation", a.get("operand_index")) if x is not None)
        window = f", window {a['window_shape']}" if a.get("window_shape") else ""
        buffers = f" x {a['buffering']} buffers" if a.get("buffering") else ""
        lines.append(Text(f"{fmt_bytes(a.get('size_bytes'))}: {what}{window}{buffers}", style="dim"))
    return lines
