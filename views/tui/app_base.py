"""What the parts of the terminal UI's app share, for the type checker: the state InspectorApp
keeps (made in its ``__init__``) and the methods its mixins (``Loading``, ``Navigation``,
``Jobs``) call on the app and on each other. Declarations only: nothing here runs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from textual.app import App

if TYPE_CHECKING:
    from ...hlo.passes import PassDiff
    from ...remote import Remote
    from ...results.report import Report
    from ...session import Session


class AppBase(App):
    """The base of InspectorApp and of its mixins (``self`` is the app in all of them)."""

    report: Report | None  # a reactive attribute (app.py): setting it repaints the tabs
    session: Session
    watch_file: bool
    lowered: Report | None
    diff_verdict: str | None
    baseline: Any  # a saved baseline (inspector.baseline.record.Baseline) the overview compares with, or None
    tolerance: str | None  # its --tolerance, as the options screen took it
    tolerances: dict | None
    tabs: dict[str, Any]  # view name -> its tab widget; the tabs are of several classes (tabs.py)
    tabs_ready: bool
    last_search: str
    remote: Remote
    _mtime: float | None
    _generation: int
    _loading: bool
    _back: tuple[str, int] | None
    _pending_status: str | None
    _link_from: str | None = None  # the tab l went to the bundles from (l on a bundle goes back there)
    _pass_diffs: dict[int, PassDiff | None]
    _phase: tuple[str, float] | None
    _took: list[tuple[str, float]]
    _why: str
    _status_is_progress: bool
    _resting: tuple[str, str]  # the last load's summary (text, style): the status line after a tab switch
    _drawn: tuple[str, str]
    _undo: tuple | None  # (session, report) a failed load restores (the options screen's)
    _fix_began: float | None  # when F's run began (its progress line counts from it), while it runs
    _diff_began: float | None  # the same for d's diff

    if TYPE_CHECKING:  # defined in app.py and the mixins
        @staticmethod
        def clock() -> float: ...
        def status(self, text: str, style: str = "", of_tab: bool = False) -> None: ...
        def action_tab(self, tab: str) -> None: ...
        def _focus_tab(self, tab: str) -> None: ...
        def _title(self, chip: str) -> str: ...
        def load(self, fresh: bool = False, why: str = "", undo: tuple | None = None) -> None: ...
        def show_pass_diff(self, row: int) -> None: ...
        def show_mosaic_pass_diff(self, row: int) -> None: ...
        def _fix_progress(self) -> None: ...
        def _running_groups(self) -> set[str]: ...
        def _deliver(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None: ...
        def _answer(self, generation: int, ask: Callable[[], Any], show: Callable[[Any], None],
                    show_error: Callable[[str], None]) -> None: ...
