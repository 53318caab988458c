"""The terminal UI's tabs, made from the table of views (``inspector.results.view_table``): one tab per
row, with the row's key and title. Every tab has the same interface: ``reset(message)`` (a new
load began; ``message`` says what is coming) and ``show(report)`` (paint from the Report). A row
without a tab class of its own gets ``RenderedTab``: the printer's rendering of that view in a
scrolling pane, so a new view needs no TUI code."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from ...results.view_table import VIEWS, View
from ..printer import RenderOptions, render_view

if TYPE_CHECKING:
    from ...results.report import Report

TAB_VIEWS: tuple[View, ...] = VIEWS  # every view has a tab, in the table's order (keys 1-8 first)
TEXT_TABS: tuple[str, ...] = tuple(v.name for v in VIEWS if v.tab == "stage_text:StageText")
# shown as soon as the function is lowered (the rest needs the compile)
LOWERED_TABS: tuple[str, ...] = tuple(v.name for v in VIEWS if v.stage_text and not v.needs.compile)


def tab_title(view: View) -> str:
    return f"{view.key} {view.title}"


class RenderedTab(VerticalScroll):
    """A view as the printer renders it (every row: ``top`` 0), with the hints a person at the
    keyboard can act on."""

    def __init__(self, view: View):
        super().__init__()
        self.view = view

    def compose(self):
        yield Static(Text(self.view.waiting), id=f"{self.view.name}-body")

    def reset(self, message: str) -> None:
        self.query_one(Static).update(Text(message))

    def progress(self, text: str) -> None:
        """While the compile its key asked for runs (B: the Memory tab): what runs and for how long."""
        self.query_one(Static).update(Text(text, style="yellow"))

    def show(self, report: Report) -> None:
        rendered = render_view(report, self.view.name, RenderOptions(top=0, colour=True, interactive=True))
        parts = rendered if isinstance(rendered, list) else [rendered]
        self.query_one(Static).update(Group(*(Text(p) if isinstance(p, str) else p for p in parts)))


def make_tab(view: View) -> Widget:
    """The tab widget for a row: its own class (made by ``for_view(view)`` where it has one), or
    a RenderedTab."""
    if view.tab is None:
        return RenderedTab(view)
    module, name = view.tab.split(":")
    cls = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return cls.for_view(view) if hasattr(cls, "for_view") else cls()


def focus_target(tab: Widget) -> Widget:
    """The widget inside a tab that takes its keys (a table, the text; else the tab itself)."""
    selector = getattr(tab, "FOCUS", None)
    return tab.query_one(selector) if selector else tab
