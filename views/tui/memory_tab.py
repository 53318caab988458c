"""The memory tab: HBM per device (XLA's memory analysis) against the chip's capacity, and the
largest buffers live at the peak when the compile gave its buffer assignment (the printer's
memory view, as it is)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


from ..memory import memory_view

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...report import Report

PLACEHOLDER = "compiling… (the memory figures come with the compile)"
ASK_BUFFERS = "press B to compile with the compiler's buffer assignment: the largest buffers live at the peak"


class MemoryTab(VerticalScroll):
    def compose(self):
        yield Static(Text(PLACEHOLDER), id="memory-body")

    def reset(self, message: str = PLACEHOLDER) -> None:
        self.query_one("#memory-body", Static).update(Text(message))

    def show(self, report: Report) -> None:
        error = report.stages.compile_error
        view = memory_view(report.memory, error.headline if error else "not compiled")
        if report.memory is not None and not report.memory.largest:
            view = Group(view, Text(ASK_BUFFERS, style="bold"))
        self.query_one("#memory-body", Static).update(view)
