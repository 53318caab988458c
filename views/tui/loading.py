"""Loading a target in the terminal UI: the lowering, then the compile, in the worker process;
progress while they run; cancel and reload. Whatever an older load sends back is dropped."""
from __future__ import annotations

from concurrent.futures import CancelledError

from rich.text import Text
from textual import work
from textual.widgets import Input, Static, TabbedContent

from .app_base import AppBase
from ...base.errors import InspectorError
from ...session import Session
from ...base.units import count
from .tabs import LOWERED_TABS, TAB_VIEWS


def seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def message_of(err: BaseException) -> str:
    if type(err).__name__ == "BrokenProcessPool" or isinstance(err, CancelledError):
        return "cancelled"
    return str(err) if isinstance(err, InspectorError) else f"{type(err).__name__}: {err}"


class Loading(AppBase):
    """The App's loading: mixed into InspectorApp (``self`` is the app)."""

    def load(self, fresh: bool = False, why: str = "", undo: tuple | None = None) -> None:
        """(Re)analyse for the current session: first the lowering (the jaxpr, StableHLO and Mosaic
        tabs fill in), then the compile (the rest). Whatever still runs for an older request (a
        compile, or a diff or compare of the old variant) is cancelled first, and nothing of the
        old target stays on screen. ``why``: said with the progress (a saved file); ``undo``: the
        (session, report) that come back where this load fails (options the worker refuses)."""
        if self._loading or self.remote.busy:
            self.remote.cancel()  # also voids a load between its two calls
        self._generation += 1
        self._loading = True
        self._fix_began = self._diff_began = None  # a run of F or d is cancelled with the rest
        self.report = None
        self.lowered = None
        self._back = None
        self._why = why
        self._took = []
        self._phase = ("lower", self.clock())
        self.sub_title = self._title(self.session.chip)
        self._reset_views(self._progress_texts()[1])
        self._status_is_progress = True
        self._progress(force=True)
        self._undo = undo
        self._load(self._generation, self.session, fresh, self.remote.epoch)

    @work(thread=True, group="load")
    def _load(self, generation: int, session: Session, fresh: bool, epoch: int) -> None:
        """Two calls into the worker process: the lowering, shown at once, then the compile, which
        starts from that lowering (the worker keeps it). A cancel in between voids the second."""
        try:
            lowered = self.remote.call(session, "lowering", fresh, epoch=epoch)
        except Exception as err:  # a failure is shown where the report would be
            self._deliver(self._failed, generation, message_of(err))
            return
        self._deliver(self._lowered, generation, lowered)
        try:
            report = self.remote.call(session, "report", False, epoch=epoch)
        except Exception as err:
            self._deliver(self._failed, generation, message_of(err))
            return
        self._deliver(self._show, generation, report)

    def _title(self, chip: str) -> str:
        return f"{self.session.spec}{' (backward)' if self.session.backward else ''} on {chip}"

    def _extra(self) -> str:
        return (" with pass dumps" if self.session.passes else
                " with Mosaic's pass dumps" if self.session.mosaic_passes else
                " and its time estimate" if self.session.time else
                " with its buffer assignment" if self.session.buffers else "")

    def _progress_texts(self) -> tuple[str, str]:
        """(status line, overview) for the stage in progress, with its seconds so far."""
        assert self._phase is not None  # called while loading (load, _progress)
        stage, began = self._phase
        spent = f"{int(self.clock() - began)} s"
        chip, why = self.session.chip, f"{self._why}: " if self._why else ""
        if stage == "lower":
            return (f"{why}tracing and lowering for {chip}… {spent} (Esc cancels)",
                    f"{why}compiling {self.session.spec} for {chip}{self._extra()}: tracing and lowering… {spent}\n"
                    "(the jaxpr, StableHLO and Mosaic tabs fill in first, the rest when the compile is done; Esc cancels)")
        return (f"{why}compiling for {chip}{self._extra()}… {spent}; jaxpr and StableHLO are ready (Esc cancels)",
                f"compiling for {chip}{self._extra()}… {spent}: the HLO, fusions, Pallas and the findings come "
                "when it is done (Esc cancels)")

    def _asked_tabs(self) -> list[str]:
        """The tabs whose key asked for what this compile adds (P, M, T, B): they show its progress
        too, not their idle text ("press T" while T ran)."""
        s = self.session
        return [name for name, on in (("passes", s.passes), ("mosaic-passes", s.mosaic_passes), ("bundles", s.time),
                                      ("memory", s.buffers)) if on]

    def _progress(self, force: bool = False) -> None:
        """Every half second while loading (and, forced, as each stage begins): the status line
        and the overview say what runs and for how long. A message the status line got since
        (a search, a hint) stays until the next stage."""
        if self._phase is None or not self.is_running:
            return
        status, overview = self._progress_texts()
        if self._status_is_progress and (force or status != self._drawn[0]):
            self.query_one("#status", Static).update(Text(status, style="yellow"), layout=False)
        if force or status != self._drawn[0]:
            for name in self._asked_tabs():
                self.tabs[name].progress(status)
        if force or overview != self._drawn[1]:
            tab = self.tabs["overview"]
            # a tick changes a digit: a layout pass (tens of ms with a large overview) only when
            # the text's length changed, and so perhaps its wrapping
            layout = force or len(overview) != len(self._drawn[1])
            if self._phase[0] == "lower":
                tab.waiting(overview, layout)
            else:
                tab.progress(overview, layout=layout)
        self._drawn = (status, overview)

    def _reset_views(self, message: str) -> None:
        """Nothing of the previous load stays on screen: each tab says what is coming."""
        self.diff_verdict = None
        self.tabs["overview"].reset(message)
        for view in TAB_VIEWS[1:]:
            self.tabs[view.name].reset(view.waiting)
        self._pass_diffs = {}

    def _none_coming(self, message: str) -> None:
        """The compile failed or was stopped: the tabs that waited for it say so, not "compiling…"
        (what the lowering showed stays: it is current)."""
        for view in TAB_VIEWS[1:]:
            if view.waiting.startswith("compiling") and (view.name not in LOWERED_TABS or self.lowered is None):
                self.tabs[view.name].reset(message)
        for name in self._asked_tabs():  # their progress line stops
            self.tabs[name].progress(message)

    def _stage_ended(self, stage: str) -> None:
        """Note how long the stage in progress took (the UI's wall time: what the user waited)."""
        if self._phase is not None:
            self._took.append((stage, self.clock() - self._phase[1]))
        self._phase = None

    def _took_text(self) -> str:
        return ", ".join(f"{stage} {seconds(s)}" for stage, s in self._took)

    def _failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return  # an older request, cancelled: its error is no news
        self._loading = False
        self._phase = None
        undo, self._undo = self._undo, None
        if undo is not None:  # options the worker refused: the report they replaced comes back
            self.session, self.lowered, self.report = undo[0], None, undo[1]
            self.status(f"the options were not applied: {message} (o changes them)", "bold red")
            return
        self._none_coming(f"not compiled: {message}")
        if self.lowered is not None:  # the compile failed: the stages lowered so far stay
            self.tabs["overview"].progress(message, "bold red")
            self.tabs["hlo"].show_text(f"// no optimized HLO: {message}")
        else:
            self.tabs["overview"].show_error(message)
        self.status(message, "bold red")

    def _lowered(self, generation: int, report) -> None:
        """The lowering is done: the jaxpr, StableHLO and Mosaic tabs fill in; the compile runs."""
        if generation != self._generation:
            return  # a result for a target or parameters no longer asked for
        self.lowered = report
        self._stage_ended("lowered")
        self._phase = ("compile", self.clock())
        self.tabs["overview"].show_lowered(report)
        for name in LOWERED_TABS:
            self.tabs[name].show(report)
        self.tabs["hlo"].show_text(
            f"// compiling for {report.chip.name}{self._extra()}: the optimized HLO comes when the compile is done\n")
        self._status_is_progress = True  # a new stage is news
        self._progress(force=True)

    def _show(self, generation: int, report) -> None:
        if generation != self._generation:
            return  # a result for a target or parameters no longer asked for
        self._loading = False
        self._undo = None
        self._stage_ended("compiled")
        self.sub_title = self._title(report.chip.name)
        self.report = report  # the tabs repaint from it (watch_report)
        errors = sum(f.severity == "error" for f in report.findings)
        took = self._took_text()
        self._resting = (("reloaded: " + self._why + "; " if self._why.endswith(" was saved") else "")
                         + f"{report.chip.name}: {count(len(report.findings), 'finding')} ({count(errors, 'error')})"
                         + (f"; {took}" if took else "") + "; ? for keys", "bold red" if errors else "green")
        self.status(*self._resting)

    def _check_file(self) -> None:
        path = self.session.source_file()
        if path is None or not path.exists():
            return
        mtime = path.stat().st_mtime
        if self._mtime is not None and mtime != self._mtime:
            self.load(fresh=True, why=f"{path.name} was saved")
        self._mtime = mtime

    def action_reload(self) -> None:
        self.load(fresh=True)

    def action_cancel(self) -> None:
        search = self.query_one("#search", Input)
        if search.display:
            search.display = False
            self._focus_tab(self.query_one(TabbedContent).active)
            return
        if self.tabs["pallas"].close_goto():
            return
        # a pass diff just asked for may not have reached the worker yet: it is in flight all the same;
        # a load may be between its two calls (lowering done, compile not yet asked)
        if (not self.remote.busy and not self.tabs["passes"].pending and not self.tabs["mosaic-passes"].pending
                and not self._loading):
            self.status("nothing is running (Esc cancels a compile, a diff or the fixes in flight)")
            return
        stopped = self._stopped_work()
        self._generation += 1  # whatever comes back now is dropped
        loading, self._loading = self._loading, False
        self._phase = None
        self._fix_began = self._diff_began = None
        self.remote.cancel()
        if loading:
            self._none_coming("not compiled: cancelled (r compiles again)")
        if self.report is None and self.lowered is not None:  # what the lowering showed stays: it is current
            self.tabs["overview"].progress(f"cancelled: {stopped}")
            self.tabs["hlo"].show_text("// not compiled: cancelled (r compiles again)\n")
        elif self.report is None:
            self.tabs["overview"].show_error(f"cancelled: {stopped}")
        self.tabs["diff"].reset()
        self.tabs["compare"].reset()
        self.tabs["passes"].cancelled()
        self.tabs["mosaic-passes"].cancelled()
        self.status(f"cancelled: {stopped}", "yellow")

    def _running_groups(self) -> set[str]:
        """The worker groups with a worker in flight ("load", "fix", "diff", ...)."""
        return {w.group for w in self.workers if not w.is_finished}

    def _stopped_work(self) -> str:
        """What Esc stops, and the key that asks for it again (r reloads: it is not F's or d's)."""
        # a cancelled load's worker may still be winding down: _loading says whether one is current
        groups = (self._running_groups() - {"load"}) | ({"load"} if self._loading else set())
        said = [what for group, what in (("load", "the compile was stopped (r starts it again)"),
                                         ("fix", "the fixes were stopped (F tries them again)"),
                                         ("diff", "the diff was stopped (d runs it again)"),
                                         ("compare", "the comparison was stopped (c asks again)")) if group in groups]
        if not said and (self.tabs["passes"].pending or self.tabs["mosaic-passes"].pending):
            said = ["the pass's diff was stopped (Enter asks again)"]
        return "; ".join(said) or "the compile was stopped (r starts it again)"
