"""The core's one door to ``inspector.views``: Jupyter's HTML for the result types and
``Report.show``. The analyses never import the views; the result types call these functions, and
they load rich (or the printer) only when something is displayed."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import Report


def html(result: Any) -> str:
    """The HTML Jupyter shows for a Report, CheckResult, DiffResult, Compare or TuneResult."""
    from .views.html import html_of

    return html_of(result)


def tune_progress(label: str):
    """The tuner's progress bar on stderr (quiet when stderr is not a terminal)."""
    from .views.tune import TuneProgress

    return TuneProgress(label)


def print_view(report: Report, view: str, *, sort: str, top: int) -> None:
    """Print one view on stdout, as ``inspector show --view VIEW`` does."""
    from .views.printer import make_console, print_view as print_it

    print_it(report, view, make_console(), sort=sort, top=top)
