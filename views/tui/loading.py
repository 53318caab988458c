"""Loading a target in the terminal UI: the lowering, then the compile, in the worker; progress
while they run; cancel (Esc) and reload. Whatever an older load sends back is dropped."""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Input, TabbedContent

from ...base.units import count
from .calls import message_of
from .tabs import LOWERED_TABS, TAB_VIEWS

if TYPE_CHECKING:
    from ...session import Session
    from .host import Host


def seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


class Loader:
    """The loads of the app's session, owned by the app (``app.loader``): the stage in progress
    and its time, the file's time (a save reloads), what a failed load restores."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.loading = False  # a load is current (its worker may be between its two calls)
        self.mtime: float | None = None  # the target file's, as last seen
        self.phase: tuple[str, float] | None = None  # ("lower" or "compile", when it began) while loading
        self.took: list[tuple[str, float]] = []  # (stage, seconds) of the current load, as they end
        self.why = ""  # why this load (a saved file): said with its progress
        self.drawn = ("", "")  # the progress texts last drawn: (status line, overview)
        self.undo: tuple | None = None  # (session, report) the load in flight restores if it fails

    def load(self, fresh: bool = False, why: str = "", undo: tuple | None = None) -> None:
        """(Re)analyse for the app's session: first the lowering (the jaxpr, StableHLO and Mosaic
        tabs fill in), then the compile (the rest). Whatever still runs for an older request (a
        compile, or a diff or compare of the old variant) is cancelled first, and nothing of the
        old target stays on screen. ``why``: said with the progress (a saved file); ``undo``: the
        (session, report) that come back where this load fails (options the worker refuses)."""
        app, remote = self.app, self.app.calls.remote
        if self.loading or remote.busy:
            remote.cancel()  # also voids a load between its two calls
        generation = app.calls.void()
        self.loading = True
        app.report = None
        app.lowered = None
        self.why = why
        self.took = []
        self.phase = ("lower", app.clock())
        app.sub_title = self.title(app.session.chip)
        self._reset_views(self._progress_texts()[1])
        app.status_line.follow()
        self.progress(force=True)
        self.undo = undo
        session, epoch = app.session, remote.epoch
        app.calls.start("load", lambda: self._load(generation, session, fresh, epoch))

    def _load(self, generation: int, session: Session, fresh: bool, epoch: int) -> None:
        """In a thread worker, two calls into the worker: the lowering, shown at once, then the
        compile, which starts from that lowering (the worker keeps it). A cancel in between voids
        the second. The app's _lowered and _show take the answers (tests wrap them)."""
        calls = self.app.calls
        try:
            lowered = calls.remote.call(session, "lowering", fresh, epoch=epoch)
        except Exception as err:  # a failure is shown where the report would be
            calls.deliver(self.failed, generation, message_of(err))
            return
        calls.deliver(self.app._lowered, generation, lowered)
        try:
            report = calls.remote.call(session, "report", False, epoch=epoch)
        except Exception as err:
            calls.deliver(self.failed, generation, message_of(err))
            return
        calls.deliver(self.app._show, generation, report)

    def title(self, chip: str) -> str:
        session = self.app.session
        return f"{session.spec}{' (backward)' if session.backward else ''} on {chip}"

    def _extra(self) -> str:
        session = self.app.session
        return (" with pass dumps" if session.passes else
                " with Mosaic's pass dumps" if session.mosaic_passes else
                " and its time estimate" if session.time else
                " with its buffer assignment" if session.buffers else "")

    def _progress_texts(self) -> tuple[str, str]:
        """(status line, overview) for the stage in progress, with its seconds so far."""
        assert self.phase is not None  # called while loading (load, progress)
        stage, began = self.phase
        spent = f"{int(self.app.clock() - began)} s"
        session = self.app.session
        chip, why = session.chip, f"{self.why}: " if self.why else ""
        if stage == "lower":
            return (f"{why}tracing and lowering for {chip}… {spent} (Esc cancels)",
                    f"{why}compiling {session.spec} for {chip}{self._extra()}: tracing and lowering… {spent}\n"
                    "(the jaxpr, StableHLO and Mosaic tabs fill in first, the rest when the compile is done; Esc cancels)")
        return (f"{why}compiling for {chip}{self._extra()}… {spent}; jaxpr and StableHLO are ready (Esc cancels)",
                f"compiling for {chip}{self._extra()}… {spent}: the HLO, fusions, Pallas and the findings come "
                "when it is done (Esc cancels)")

    def _asked_tabs(self) -> list[str]:
        """The tabs whose key asked for what this compile adds (P, M, T, B): they show its progress
        too, not their idle text ("press T" while T ran)."""
        s = self.app.session
        return [name for name, on in (("passes", s.passes), ("mosaic-passes", s.mosaic_passes), ("bundles", s.time),
                                      ("memory", s.buffers)) if on]

    def progress(self, force: bool = False) -> None:
        """Every half second while loading (and, forced, as each stage begins): the status line
        and the overview say what runs and for how long. A message the status line got since
        (a search, a hint) stays until the next stage."""
        if self.phase is None or not self.app.is_running:
            return
        status, overview = self._progress_texts()
        tabs = self.app.tabs
        if force or status != self.drawn[0]:
            self.app.status_line.progress(status)
            for name in self._asked_tabs():
                tabs[name].progress(status)
        if force or overview != self.drawn[1]:
            tab = tabs["overview"]
            # a tick changes a digit: a layout pass (tens of ms with a large overview) only when
            # the text's length changed, and so perhaps its wrapping
            layout = force or len(overview) != len(self.drawn[1])
            if self.phase[0] == "lower":
                tab.waiting(overview, layout)
            else:
                tab.progress(overview, layout=layout)
        self.drawn = (status, overview)

    def _reset_views(self, message: str) -> None:
        """Nothing of the previous load stays on screen: each tab says what is coming."""
        tabs = self.app.tabs
        tabs["overview"].reset(message)
        for view in TAB_VIEWS[1:]:
            tabs[view.name].reset(view.waiting)

    def _none_coming(self, message: str) -> None:
        """The compile failed or was stopped: the tabs that waited for it say so, not "compiling…"
        (what the lowering showed stays: it is current)."""
        tabs = self.app.tabs
        for view in TAB_VIEWS[1:]:
            if view.waiting.startswith("compiling") and (view.name not in LOWERED_TABS or self.app.lowered is None):
                tabs[view.name].reset(message)
        for name in self._asked_tabs():  # their progress line stops
            tabs[name].progress(message)

    def _stage_ended(self, stage: str) -> None:
        """Note how long the stage in progress took (the UI's wall time: what the user waited)."""
        if self.phase is not None:
            self.took.append((stage, self.app.clock() - self.phase[1]))
        self.phase = None

    def failed(self, generation: int, message: str) -> None:
        app = self.app
        if generation != app.calls.generation:
            return  # an older request, cancelled: its error is no news
        self.loading = False
        self.phase = None
        undo, self.undo = self.undo, None
        if undo is not None:  # options the worker refused: the report they replaced comes back
            app.session, app.lowered, app.report = undo[0], None, undo[1]
            app.status(f"the options were not applied: {message} (o changes them)", "bold red")
            return
        self._none_coming(f"not compiled: {message}")
        if app.lowered is not None:  # the compile failed: the stages lowered so far stay
            app.tabs["overview"].progress(message, "bold red")
            app.tabs["hlo"].show_text(f"// no optimized HLO: {message}")
        else:
            app.tabs["overview"].show_error(message)
        app.status(message, "bold red")

    def lowered(self, generation: int, report) -> None:
        """The lowering is done: the jaxpr, StableHLO and Mosaic tabs fill in; the compile runs."""
        app = self.app
        if generation != app.calls.generation:
            return  # a result for a target or parameters no longer asked for
        app.lowered = report
        self._stage_ended("lowered")
        self.phase = ("compile", app.clock())
        app.tabs["overview"].show_lowered(report)
        for name in LOWERED_TABS:
            app.tabs[name].show(report)
        app.tabs["hlo"].show_text(
            f"// compiling for {report.chip.name}{self._extra()}: the optimized HLO comes when the compile is done\n")
        app.status_line.follow()  # a new stage is news
        self.progress(force=True)

    def compiled(self, generation: int, report) -> None:
        app = self.app
        if generation != app.calls.generation:
            return  # a result for a target or parameters no longer asked for
        self.loading = False
        self.undo = None
        self._stage_ended("compiled")
        app.sub_title = self.title(report.chip.name)
        app.report = report  # the tabs repaint from it (watch_report)
        errors = sum(f.severity == "error" for f in report.findings)
        took = ", ".join(f"{stage} {seconds(s)}" for stage, s in self.took)
        app.status_line.rest(("reloaded: " + self.why + "; " if self.why.endswith(" was saved") else "")
                             + f"{report.chip.name}: {count(len(report.findings), 'finding')} ({count(errors, 'error')})"
                             + (f"; {took}" if took else "") + "; ? for keys", "bold red" if errors else "green")

    def check_file(self) -> None:
        path = self.app.session.source_file()
        if path is None or not path.exists():
            return
        mtime = path.stat().st_mtime
        if self.mtime is not None and mtime != self.mtime:
            self.app.load(fresh=True, why=f"{path.name} was saved")
        self.mtime = mtime

    def cancel(self) -> None:
        """Esc: the search closes, or the Pallas tab's go-to, or whatever runs stops."""
        app = self.app
        search = app.query_one("#search", Input)
        if search.display:
            search.display = False
            app.focus_tab(app.query_one(TabbedContent).active)
            return
        tabs = app.tabs
        if tabs["pallas"].close_goto():
            return
        # a pass diff just asked for may not have reached the worker yet: it is in flight all the same;
        # a load may be between its two calls (lowering done, compile not yet asked)
        if not app.calls.remote.busy and not tabs["passes"].pending and not tabs["mosaic-passes"].pending and not self.loading:
            app.status("nothing is running (Esc cancels a compile, a diff or the fixes in flight)")
            return
        stopped = self._stopped_work()
        app.calls.void()  # whatever comes back now is dropped
        loading, self.loading = self.loading, False
        self.phase = None
        app.stop_runs()
        app.calls.remote.cancel()
        if loading:
            self._none_coming("not compiled: cancelled (r compiles again)")
        if app.report is None and app.lowered is not None:  # what the lowering showed stays: it is current
            tabs["overview"].progress(f"cancelled: {stopped}")
            tabs["hlo"].show_text("// not compiled: cancelled (r compiles again)\n")
        elif app.report is None:
            tabs["overview"].show_error(f"cancelled: {stopped}")
        for name in ("diff", "compare"):
            tabs[name].reset()
        for name in ("passes", "mosaic-passes"):
            tabs[name].cancelled()
        app.status(f"cancelled: {stopped}", "yellow")

    def _stopped_work(self) -> str:
        """What Esc stops, and the key that asks for it again (r reloads: it is not F's or d's)."""
        # a cancelled load's worker may still be winding down: loading says whether one is current
        groups = (self.app.calls.running_groups() - {"load"}) | ({"load"} if self.loading else set())
        said = [what for group, what in (("load", "the compile was stopped (r starts it again)"),
                                         ("fix", "the fixes were stopped (F tries them again)"),
                                         ("diff", "the diff was stopped (d runs it again)"),
                                         ("compare", "the comparison was stopped (c asks again)")) if group in groups]
        tabs = self.app.tabs
        if not said and (tabs["passes"].pending or tabs["mosaic-passes"].pending):
            said = ["the pass's diff was stopped (Enter asks again)"]
        return "; ".join(said) or "the compile was stopped (r starts it again)"
