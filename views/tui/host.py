"""What the parts of the terminal UI may use of their app: its model (the session, the Report on
screen, the lowering while it compiles, the tabs) and its services (the status line, a load, a tab
switch, the worker's calls). Declarations only, for the type checker: InspectorApp (app.py) implements
them; each part (loading.py, navigation.py, jobs.py, fix_keys.py, variants.py, tune_screen.py)
is an object the app owns, with its own state, and reaches the others only through the app."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import App

if TYPE_CHECKING:
    from ...results.report import Report
    from ...session import Session
    from .calls import Calls
    from .status_line import StatusLine


class Host(App):
    """The app as its parts see it (``part.app``). No state and no code here."""

    session: Session  # the variant asked for: a key that changes it loads again (load)
    report: Report | None  # a reactive attribute (app.py): setting it repaints the tabs
    lowered: Report | None  # the report as far as lowering goes (jaxpr, StableHLO, Mosaic), while it compiles
    tabs: dict[str, Any]  # view name -> its tab widget; the tabs are of several classes (tabs.py)
    tabs_ready: bool

    calls: Calls  # the worker process and the requests in flight to it (calls.py)
    status_line: StatusLine  # the line under the tabs (status_line.py)

    if TYPE_CHECKING:  # defined in app.py
        @staticmethod
        def clock() -> float: ...
        def status(self, text: str, style: str = "", of_tab: bool = False) -> None: ...
        def action_tab(self, tab: str) -> None: ...
        def focus_tab(self, tab: str) -> None: ...
        def load(self, fresh: bool = False, why: str = "", undo: tuple | None = None) -> None: ...
        def change(self, session: Session, why: str = "", undo: tuple | None = None) -> None: ...
        def stop_runs(self) -> None: ...
        def _show(self, generation: int, report: Report) -> None: ...
        def _lowered(self, generation: int, report: Report) -> None: ...
