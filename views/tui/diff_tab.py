"""The diff tab: runs on demand (d), then shows the error summary and the error map."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


from ..diff import diff_view

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...run import DiffResult

IDLE = "press d to run the function and its reference and compare them"


class DiffTab(VerticalScroll):
    def compose(self):
        yield Static(Text(IDLE), id="diff-body")

    def reset(self, message: str = "") -> None:
        """Its own idle text: the diff runs on request (d), not with the compile."""
        self.query_one("#diff-body", Static).update(Text(IDLE))

    def running(self, text: str = "running the kernel and the reference… (Esc cancels)") -> None:
        self.query_one("#diff-body", Static).update(Text(text))

    def show(self, report) -> None:
        """The report alone has no diff: the tab keeps what it shows until d runs one."""

    def show_result(self, result: DiffResult) -> None:
        self.query_one("#diff-body", Static).update(diff_view(result))

    def show_error(self, message: str) -> None:
        self.query_one("#diff-body", Static).update(Text(message, style="bold red"))
