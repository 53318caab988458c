"""The fixes in the terminal UI: F asks the worker for `inspector fix` on this chip (each change
compiled, timed and checked; slow the first time, then from the cache) and the overview shows each
fix under the finding it answers; A applies the top fix of the selected finding (a block size as
a param, anything else at trace time: the file is never edited) and compiles again."""
from __future__ import annotations

import dataclasses

from textual import work

from .app_base import AppBase
from ...session import Session


def clock_time(seconds: float) -> str:
    """1:24 (minutes and seconds), as a clock on the wall reads."""
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


class Fixing(AppBase):
    """The App's fix keys: mixed into InspectorApp (``self`` is the app)."""

    def action_fixes(self) -> None:
        if self.report is None:
            self.status("F tries the fixes once the compile is done", "yellow")
            return
        if not self.report.family.can.fix:
            self.status("fixes are compiled for a TPU: t picks one", "yellow")
            return
        if self.report.fixes is not None:
            self.status(self._fixes_said(self.report.fixes))
            return
        if "fix" in self._running_groups():  # a second run would queue behind the first: minutes more
            self._fix_progress()
            return
        self.remote.forget_news()
        self._fix_began = self.clock()
        self._fix_progress()
        self.run_fixes(self._generation, self.session)

    def _fix_progress(self) -> None:
        """Every half second while F runs (minutes): which fix, of how many, and the time so far."""
        if self._fix_began is None or not self.is_running:
            return
        where = self.remote.news() or "trying the fixes: each compiled, timed and run in interpret mode"
        # "trying fix 3 of 9, 1:24: <the change>": the count and the time first, where 80 columns show them
        head, _, rest = where.partition(": ")
        spent = clock_time(self.clock() - self._fix_began)
        self.status(f"{head}, {spent}" + (f": {rest}" if rest else "") + " (Esc cancels)", "yellow")

    @work(thread=True, exclusive=True, group="fix")
    def run_fixes(self, generation: int, session: Session) -> None:
        self._answer(generation, lambda: self.remote.call(session, "fix"), self._show_fixes, self._fixes_failed)

    def _fixes_failed(self, message: str) -> None:
        self._fix_began = None
        self.status(f"fix: {message}", "bold red")

    def _show_fixes(self, result) -> None:
        took, self._fix_began = (self.clock() - self._fix_began if self._fix_began is not None else None), None
        if self.report is None:
            return
        self.report = dataclasses.replace(self.report, fixes=result)  # the overview repaints with them
        self.status(self._fixes_said(result, took), "green" if result.best else "yellow")

    @staticmethod
    def _fixes_said(result, took: float | None = None) -> str:
        recommended = sum(1 for f in result.fixes if f.recommended)
        spent = f" in {clock_time(took)}" if took is not None else ""
        return (f"{len(result.fixes)} fixes tried{spent}, {recommended} recommended: under the findings they answer; "
                "A applies the selected finding's top fix")

    def action_apply_fix(self) -> None:
        report = self.report
        if report is not None and report.fixes is None and "fix" in self._running_groups():
            self._fix_progress()  # they are being tried: A works once they are shown
            return
        if report is None or report.fixes is None:
            self.status("F tries the fixes first; then A applies the selected finding's top fix", "yellow")
            return
        finding = self.tabs["overview"].selected_finding()
        fixes = report.fixes
        chip = str(((finding.data or {}).get("chip") if finding else None) or fixes.chips[0])
        answers = fixes.answers.get(f"{finding.code}@{chip}", []) if finding is not None else []
        if not answers:
            self.status("no fix answers this finding (the fix verb lists every fix tried)", "yellow")
            return
        change = fixes.fixes[answers[0]].change
        self.session = self.session.with_change(change)
        self.load(why=f"fix applied: {change.label} (the file is unchanged; `inspector fix --patch` writes it)")
