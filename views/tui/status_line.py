"""The terminal UI's status line: a message of its own, or the progress of the load in flight,
or (after a tab switch away from a message about the old tab) the last load's summary."""
from __future__ import annotations

from rich.text import Text
from textual.app import App
from textual.widgets import Static, TabbedContent


class StatusLine:
    """The line under the tabs (``#status``), owned by the app: what it shows and why."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.is_progress = False  # it shows the load's progress (no message of another's since)
        self.tab: str | None = None  # the tab whose message it shows
        self.resting: tuple[str, str] = ("", "")  # (text, style) it shows on a tab switch: the last load's summary

    def say(self, text: str, style: str = "", of_tab: bool = False) -> None:
        """``of_tab``: the message is about what the current tab shows (a line's source, a match, a
        comparison): another tab puts the last load's summary back (``tab_switched``)."""
        self.is_progress = False  # a message of its own: the progress ticker leaves it
        self.tab = self.app.query_one(TabbedContent).active if of_tab else None
        self._draw(text, style)

    def rest(self, text: str, style: str) -> None:
        """The last load's summary: said now, and again after a tab switch."""
        self.resting = (text, style)
        self.say(text, style)

    def follow(self) -> None:
        """A new stage of the load is news: the line shows its progress again."""
        self.is_progress = True

    def progress(self, text: str) -> None:
        """The load's progress, unless a message came since (a search, a hint: it stays until the next stage)."""
        if self.is_progress:
            self._draw(text, "yellow")

    def tab_switched(self, tab: str) -> None:
        if not self.is_progress and self.tab not in (None, tab):
            # a message about another tab ("stablehlo line 4 ...", "compare: B = ...") would mislead here
            self.say(*self.resting)

    def _draw(self, text: str, style: str) -> None:
        # one line, always (app.tcss): no layout pass for it (a cursor move updates it)
        self.app.query_one("#status", Static).update(Text(text, style=style), layout=False)
