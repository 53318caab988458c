"""The core's one door to ``inspector.views``: Jupyter's HTML for the result types and
``Report.show``. The analyses never import the views; the result types call these functions, and
they load rich (or the printer) only when something is displayed.

The views render the result types (Report, CheckResult, DiffResult, Compare, TuneResult) and so
sit above them; the result types reach down to this door. So that no import goes back up, this
module names its renderers as the view table does (``"module:function"`` inside
``inspector.views``) and loads them by name when called, and passes the results through untyped."""
from __future__ import annotations

import importlib
from typing import Any

HTML = "html:html_of"  # (result) -> the HTML Jupyter shows
TUNE_PROGRESS = "tune:TuneProgress"  # (label) -> the tuner's progress bar
PRINT_VIEW = "printer:print_view"  # (report, view, console, sort=, top=) -> None
CONSOLE = "printer:make_console"  # () -> the console `show` prints on


def _load(name: str) -> Any:
    module, attribute = name.split(":")
    return getattr(importlib.import_module(f"inspector.views.{module}"), attribute)


def html(result: Any) -> str:
    """The HTML Jupyter shows for a Report, CheckResult, DiffResult, Compare or TuneResult."""
    return _load(HTML)(result)


def tune_progress(label: str):
    """The tuner's progress bar on stderr (quiet when stderr is not a terminal)."""
    return _load(TUNE_PROGRESS)(label)


def print_view(report: Any, view: str, *, sort: str, top: int) -> None:
    """Print one view of a Report on stdout, as ``inspector show --view VIEW`` does."""
    _load(PRINT_VIEW)(report, view, _load(CONSOLE)(), sort=sort, top=top)
