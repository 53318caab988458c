"""What the terminal UI runs on request in the worker, each cancellable (Esc): the diff (d), a
pass's diff (Enter in the Passes and Mosaic passes tabs: P and M compile with the dumps), a
comparison (c). Each is an object the app owns, with its own state."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.chips import CHIPS
from ...compilation.static_params import parse_value
from .fix_keys import clock_time
from .screens import CompareScreen, ParamsScreen, TargetScreen
from ...families import family_of

if TYPE_CHECKING:
    from ...session import Session
    from .host import Host

# the CPU and every chip compiled for here without one (the TPUs by libtpu, the GPUs by XLA:GPU)
TARGETS = ["cpu"] + [c.name for c in CHIPS if family_of(c).info.can.compile]


def _compared(report_a, report_b):
    from ...verbs.comparison import compare_reports  # in the worker thread, as the compile it waited for

    return compare_reports(report_a, report_b)


class DiffRun:
    """d: the function against its reference; when the run began (its progress counts from it)
    and its verdict (the overview shows it)."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.began: float | None = None  # while d runs: when it began
        self.verdict: str | None = None

    def start(self) -> None:
        app = self.app
        app.action_tab("diff")
        if "diff" in app.calls.running_groups():  # a second run would queue behind the first
            app.status("the diff is running (Esc cancels)", "yellow")
            return
        self.began = app.clock()
        self.progress()
        session = app.session
        app.calls.ask("diff", lambda: app.calls.remote.call(session, "diff"), self._show, self._failed)

    def stop(self) -> None:
        self.began = None

    def forget(self) -> None:
        """A new load: no verdict for the new variant yet."""
        self.verdict = None

    def progress(self, fixes_running: bool = False) -> None:
        """Every half second while d runs (a minute, jax's compiles of both sides): the time so far,
        on the Diff tab and the status line, as the compile's progress says it (F's line, when
        ``fixes_running``, keeps the status line: no flicker between the two)."""
        if self.began is None or not self.app.is_running:
            return
        text = f"running the diff, {clock_time(self.app.clock() - self.began)}: the kernel and the reference (Esc cancels)"
        self.app.tabs["diff"].running(text)
        if not fixes_running:
            self.app.status(text, "yellow")

    def _took(self) -> str:
        took, self.began = self.began, None
        return f" in {clock_time(self.app.clock() - took)}" if took is not None else ""

    def _failed(self, message: str) -> None:
        self.app.status(f"diff failed{self._took()}: {message}", "bold red")
        self.app.tabs["diff"].show_error(message)

    def _show(self, result) -> None:
        tabs = self.app.tabs
        tabs["diff"].show_result(result)
        self.verdict = "ok" if result.ok else "WRONG (see the Diff tab)"
        tabs["overview"].show_diff(self.verdict)
        self.app.status(f"diff{self._took()}: {self.verdict}", "green" if result.ok else "bold red")


class PassDiffs:
    """Enter on a pass: its diff, asked of the worker once per compile (XLA's, by step index;
    Mosaic's are kept by its tab)."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.seen: dict = {}  # step index -> PassDiff, for the current compile

    def forget(self) -> None:
        self.seen = {}

    def show(self, row: int) -> None:
        app = self.app
        tab = app.tabs["passes"]
        step = tab.step_at(row)
        if step is None:
            return
        index, label = step.index, step.label
        if index in self.seen:
            tab.show_diff(self.seen[index])
            app.status(f"{label}: its diff")
            return
        tab.diff_message(f"{label}: compiling with pass dumps for its diff… (Esc cancels)", "yellow")
        app.status(f"{label}: compiling with pass dumps for its diff…", "yellow")
        session = app.session
        app.calls.ask("passes", lambda: app.calls.remote.call(session, "pass_diff", str(index)),
                      lambda diff: self._show(index, label, diff), lambda m: tab.diff_message(m, "bold red"))

    def _show(self, index: int, label: str, diff) -> None:
        self.seen[index] = diff
        self.app.tabs["passes"].show_diff(diff)
        self.app.status(f"{label}: its diff" + (f" (+{diff.added} -{diff.removed} lines)" if diff else ""))

    def show_mosaic(self, row: int) -> None:
        """Enter on a Mosaic pass: its diff (the first compiles with Mosaic's dumps, which the worker
        keeps for the module: the other passes' diffs are read at once)."""
        app = self.app
        tab = app.tabs["mosaic-passes"]
        at = tab.pass_at(row)
        if at is None:
            return
        kernel, k, p = at
        label, index = f"{k.kernel}: {p.label}", p.index
        if (kernel, index) in tab.diffs:
            tab.show_diff(kernel, index, tab.diffs[(kernel, index)])
            app.status(f"{label}: its diff")
            return
        tab.diff_message(f"{label}: compiling with Mosaic's pass dumps for its diff… (Esc cancels)", "yellow")
        app.status(f"{label}: compiling with Mosaic's pass dumps for its diff…", "yellow")
        session, name = app.session, k.kernel
        app.calls.ask("mosaic-passes",
                      lambda: app.calls.remote.call(session, "mosaic_pass_diff", name, str(index), kernel),
                      lambda diff: self._show_mosaic(kernel, index, label, diff),
                      lambda m: tab.diff_message(m, "bold red"))

    def _show_mosaic(self, kernel: int, index: int, label: str, diff) -> None:
        self.app.tabs["mosaic-passes"].show_diff(kernel, index, diff)
        self.app.status(f"{label}: its diff" + (f" (+{diff.added} -{diff.removed} lines)" if diff else ""))


class Comparing:
    """c: this variant against another chip or parameter set, side by side in the Compare tab."""

    def __init__(self, app: Host) -> None:
        self.app = app

    def start(self) -> None:
        app = self.app
        if app.report is None:
            app.status("compare needs this variant compiled first (wait, or r)", "yellow")
            return

        def picked(what: str | None) -> None:
            if what == "chip":
                app.push_screen(TargetScreen(TARGETS, app.session.chip), chip_chosen)
            elif what == "params":
                if app.report is None:  # a reload began while the choice was open (a saved file)
                    app.status("compare needs this variant compiled first (wait, or r)", "yellow")
                    return
                signature = app.session.keyword_params()
                app.push_screen(ParamsScreen(app.report.target.params, app.report.target.param_choices,
                                             signature[0] if signature else None, parse_value), params_chosen)

        def chip_chosen(chip: str | None) -> None:
            if chip and chip != app.session.chip:
                self.against(app.session.with_chip(chip), f"on {chip}")
            elif chip:
                app.status(f"{chip} is this variant's chip: pick another to compare", "yellow")

        def params_chosen(params: dict | None) -> None:
            if params:
                self.against(app.session.with_params(params),
                             "with " + " ".join(f"{k}={v}" for k, v in params.items()))

        app.push_screen(CompareScreen(), picked)

    def against(self, other: Session, what: str) -> None:
        app = self.app
        other = other.with_passes(False)  # side B as `inspector compare` builds it
        app.action_tab("compare")
        app.tabs["compare"].running(f"{other.spec} {what}")
        app.status(f"compiling {other.spec} {what} to compare…", "yellow")
        report_a = app.report
        app.calls.ask("compare", lambda: _compared(report_a, app.calls.remote.call(other, "report", False)),
                      self._show, lambda m: app.tabs["compare"].show_error(m))

    def _show(self, result) -> None:
        self.app.tabs["compare"].show_result(result)
        self.app.status(f"compare: B = {result.b.label}; " + ("ok" if result.ok else "an error finding on one side"),
                        "green" if result.ok else "bold red", of_tab=True)
