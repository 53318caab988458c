"""The collectives tab: every collective of the compiled program in schedule order, bytes per
device, mesh axes, ICI time and overlap, with totals by kind and by axis (the printer's
collectives view, every row)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


from ..collectives import collectives_view

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...report import Report

PLACEHOLDER = "compiling… (the collectives come with the optimized HLO)"


class CollectivesTab(VerticalScroll):
    def compose(self):
        yield Static(Text(PLACEHOLDER), id="collectives-body")

    def reset(self, message: str = PLACEHOLDER) -> None:
        self.query_one("#collectives-body", Static).update(Text(message))

    def show(self, report: Report) -> None:
        error = report.stages.compile_error
        self.query_one("#collectives-body", Static).update(
            collectives_view(report.collectives, top=0, reason=error.headline if error else "not compiled"))
