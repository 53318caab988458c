"""The overview tab: the function, inputs, target and key figures, and every finding, most
severe first; Enter on a finding jumps to the tab that shows its evidence."""
from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ...report import Report

from ..cells import SEVERITY_STYLE
from ..printer import overview


class OverviewTab(VerticalScroll):
    def compose(self):
        yield Static(Text("compiling… (the other tabs fill in when it is done; Esc cancels)"), id="overview-panel")
        yield DataTable(id="findings", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("severity", "code", "message", "view")

    def show(self, report: Report, diff_verdict: str | None = None) -> None:
        panel = overview(report, timings=False, findings=False)
        extra = Text(f"diff: {diff_verdict}") if diff_verdict else Text("diff: not run (press d)", style="dim")
        self.query_one("#overview-panel", Static).update(panel)
        table = self.query_one(DataTable)
        table.clear()
        for i, f in enumerate(report.findings):
            table.add_row(Text(f.severity, style=SEVERITY_STYLE[f.severity]), f.code, Text(f.message), f.view or "", key=str(i))
        table.border_title = f"{len(report.findings)} findings (Enter jumps to the view)" if report.findings else "no findings"
        self.query_one("#overview-panel", Static).border_subtitle = extra.plain

    def show_error(self, message: str) -> None:
        self.query_one("#overview-panel", Static).update(Text(message, style="bold red"))
