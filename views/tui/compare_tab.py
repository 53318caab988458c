"""The compare tab: this variant (A) against another chip or parameter set (B), as `inspector
compare` prints it (c picks B)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


from ..compare import compare_view

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...verbs.comparison import Compare

IDLE = "press c to compare this variant with another target chip or parameter set"


class CompareTab(VerticalScroll):
    def compose(self):
        yield Static(Text(IDLE), id="compare-body")

    def reset(self, message: str = "") -> None:
        """Its own idle text: a comparison runs on request (c), not with the compile."""
        self.query_one("#compare-body", Static).update(Text(IDLE))

    def running(self, what: str) -> None:
        self.query_one("#compare-body", Static).update(Text(f"compiling {what} to compare… (Esc cancels)"))

    def show(self, report) -> None:
        """The report alone has no comparison: the tab keeps what it shows until c runs one."""

    def show_result(self, result: Compare) -> None:
        self.query_one("#compare-body", Static).update(compare_view(result, top=20))

    def show_error(self, message: str) -> None:
        self.query_one("#compare-body", Static).update(Text(message, style="bold red"))
