"""The fixes in the terminal UI: F asks the worker for `inspector fix` on this chip (each change
compiled, timed and checked; slow the first time, then from the cache) and the overview shows each
fix under the finding it answers; A applies the top fix of the selected finding (a block size as
a param, anything else at trace time: the file is never edited) and compiles again."""
from __future__ import annotations

import dataclasses

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .host import Host


def clock_time(seconds: float) -> str:
    """1:24 (minutes and seconds), as a clock on the wall reads."""
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


class Fixes:
    """F and A, owned by the app: when F's run began (its progress line counts from it), while it runs."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.began: float | None = None

    def stop(self) -> None:
        self.began = None

    def start(self) -> None:
        app = self.app
        if app.report is None:
            app.status("F tries the fixes once the compile is done", "yellow")
            return
        if not app.report.family.can.fix:
            app.status("fixes are compiled for a TPU: t picks one", "yellow")
            return
        if app.report.fixes is not None:
            app.status(self._said(app.report.fixes))
            return
        if "fix" in app.calls.running_groups():  # a second run would queue behind the first: minutes more
            self.progress()
            return
        app.calls.remote.forget_news()
        self.began = app.clock()
        self.progress()
        session = app.session
        app.calls.ask("fix", lambda: app.calls.remote.call(session, "fix"), self._show, self._failed)

    def progress(self) -> None:
        """Every half second while F runs (minutes): which fix, of how many, and the time so far."""
        if self.began is None or not self.app.is_running:
            return
        where = self.app.calls.remote.news() or "trying the fixes: each compiled, timed and run in interpret mode"
        # "trying fix 3 of 9, 1:24: <the change>": the count and the time first, where 80 columns show them
        head, _, rest = where.partition(": ")
        spent = clock_time(self.app.clock() - self.began)
        self.app.status(f"{head}, {spent}" + (f": {rest}" if rest else "") + " (Esc cancels)", "yellow")

    def _failed(self, message: str) -> None:
        self.began = None
        self.app.status(f"fix: {message}", "bold red")

    def _show(self, result) -> None:
        app = self.app
        took, self.began = (app.clock() - self.began if self.began is not None else None), None
        if app.report is None:
            return
        app.report = dataclasses.replace(app.report, fixes=result)  # the overview repaints with them
        app.status(self._said(result, took), "green" if result.best else "yellow")

    @staticmethod
    def _said(result, took: float | None = None) -> str:
        recommended = sum(1 for f in result.fixes if f.recommended)
        spent = f" in {clock_time(took)}" if took is not None else ""
        return (f"{len(result.fixes)} fixes tried{spent}, {recommended} recommended: under the findings they answer; "
                "A applies the selected finding's top fix")

    def apply(self) -> None:
        app = self.app
        report = app.report
        if report is not None and report.fixes is None and "fix" in app.calls.running_groups():
            self.progress()  # they are being tried: A works once they are shown
            return
        if report is None or report.fixes is None:
            app.status("F tries the fixes first; then A applies the selected finding's top fix", "yellow")
            return
        finding = app.tabs["overview"].selected_finding()
        fixes = report.fixes
        chip = str(((finding.data or {}).get("chip") if finding else None) or fixes.chips[0])
        answers = fixes.answers.get(f"{finding.code}@{chip}", []) if finding is not None else []
        if not answers:
            app.status("no fix answers this finding (the fix verb lists every fix tried)", "yellow")
            return
        change = fixes.fixes[answers[0]].change
        app.change(app.session.with_change(change),
                   why=f"fix applied: {change.label} (the file is unchanged; `inspector fix --patch` writes it)")
