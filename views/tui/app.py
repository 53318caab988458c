"""`inspector TARGET`: the terminal UI. It opens at once, compiles in a worker thread and renders
the same Report the other verbs print. Everything slow (compile, diff, export) runs in workers;
errors show in place."""
from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent, TabPane

from ...chips import CHIPS
from ...errors import InspectorError
from ...remote import Remote
from ...session import Session

from .diff_tab import DiffTab
from .fusions_tab import FusionsTab
from .overview_tab import OverviewTab
from .pallas_tab import PallasTab
from .screens import HelpScreen, ParamsScreen, TargetScreen
from .stage_text import StageText

TABS = ("overview", "jaxpr", "stablehlo", "hlo", "fusions", "pallas", "diff")
TEXT_TABS = ("jaxpr", "stablehlo", "hlo")
TARGETS = [c.name for c in CHIPS if c.kind != "gpu" and c.name != "gpu"]


def _message(err: BaseException) -> str:
    if type(err).__name__ == "BrokenProcessPool":
        return "cancelled"
    return str(err) if isinstance(err, InspectorError) else f"{type(err).__name__}: {err}"


class InspectorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "inspector"
    AUTO_FOCUS = "#findings"
    BINDINGS = [
        *(Binding(str(i + 1), f"tab('{t}')", t, show=i < 7) for i, t in enumerate(TABS)),
        Binding("slash", "search", "search"),
        Binding("n", "find(True)", "next", show=False),
        Binding("N", "find(False)", "previous", show=False),
        Binding("l", "link", "link", show=False),
        Binding("s", "sort", "sort", show=False),
        Binding("d", "diff", "diff"),
        Binding("t", "target", "target"),
        Binding("x", "params", "params"),
        Binding("e", "export", "export"),
        Binding("r", "reload", "reload", show=False),
        Binding("escape", "cancel", "cancel", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, session: Session, watch: bool = False):
        super().__init__()
        self.session = session
        self.watch_file = watch
        self.report = None
        self.diff_verdict: str | None = None
        self.last_search = ""
        self._mtime = None
        self.remote = Remote()  # the core runs in a child process: the UI keeps the GIL to itself

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="search (Enter finds, n / N next / previous, Esc closes)", id="search")
        with TabbedContent(id="tabs", initial="overview"):
            with TabPane("Overview", id="overview"):
                yield OverviewTab()
            for stage, title in (("jaxpr", "Jaxpr"), ("stablehlo", "StableHLO"), ("hlo", "HLO")):
                with TabPane(title, id=stage):
                    yield StageText(stage)
            with TabPane("Fusions", id="fusions"):
                yield FusionsTab()
            with TabPane("Pallas", id="pallas"):
                yield PallasTab()
            with TabPane("Diff", id="diff"):
                yield DiffTab()
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{self.session.spec} on {self.session.chip}"
        self.query_one("#search", Input).display = False
        self.load()
        if self.watch_file:
            self.set_interval(1.0, self._check_file)

    # ------------------------------------------------------------------ loading

    def status(self, text: str, style: str = "") -> None:
        self.query_one("#status", Static).update(Text(text, style=style))

    @work(thread=True, exclusive=True, group="load")
    def load(self, fresh: bool = False) -> None:
        self.call_from_thread(self.status, f"compiling {self.session.spec} for {self.session.chip}…", "yellow")
        try:
            report = self.remote.call(self.session, "report", fresh)
        except Exception as err:  # a failure is shown where the report would be
            self.call_from_thread(self._failed, _message(err))
            return
        self.call_from_thread(self._show, report)

    def _failed(self, message: str) -> None:
        self.query_one(OverviewTab).show_error(message)
        self.status(message, "bold red")

    def _show(self, report) -> None:
        self.report = report
        self.sub_title = f"{self.session.spec} on {report.chip.name}"
        self.query_one(OverviewTab).show(report, self.diff_verdict)
        s = report.stages
        frames = report.fusions.frames if report.fusions else {}
        self.query_one("#text-jaxpr", StageText).show(s.jaxpr or "")
        self.query_one("#text-stablehlo", StageText).show(s.stablehlo or "")
        why = s.compile_error.headline if s.compile_error else "not compiled"
        self.query_one("#text-hlo", StageText).show(s.hlo or f"// no optimized HLO: {why}", frames)
        self.query_one(FusionsTab).show(report.fusions, why)
        self.query_one(PallasTab).show(report.pallas)
        errors = sum(f.severity == "error" for f in report.findings)
        self.status(f"{report.chip.name}: {len(report.findings)} findings ({errors} errors); ? for keys",
                    "bold red" if errors else "green")

    def _check_file(self) -> None:
        path = self.session.source_file()
        if path is None or not path.exists():
            return
        mtime = path.stat().st_mtime
        if self._mtime is not None and mtime != self._mtime:
            self.status(f"{path} changed: re-analysing…", "yellow")
            self.load(fresh=True)
        self._mtime = mtime

    # ------------------------------------------------------------------ actions

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._focus_tab(tab)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._focus_tab(event.pane.id)

    def _focus_tab(self, tab: str) -> None:
        """Keys go to the tab's main widget: the text, the table, the grid."""
        widget = {"overview": "#findings", "fusions": "#fusions-table", "pallas": "PallasTab", "diff": "DiffTab"}.get(
            tab, f"#text-{tab}")
        self.query_one(widget).focus()

    def _active_text(self) -> StageText | None:
        active = self.query_one(TabbedContent).active
        return self.query_one(f"#text-{active}", StageText) if active in TEXT_TABS else None

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.last_search = event.value
            event.input.display = False
            self._focus_tab(self.query_one(TabbedContent).active)
            self.action_find(True)

    def action_find(self, forward: bool) -> None:
        text = self._active_text()
        if text is None or not self.last_search:
            return
        found = text.find(self.last_search, forward)
        self.status(f"/{self.last_search}: " + ("found" if found else "not found"), "" if found else "yellow")
        text.focus()

    def on_text_area_selection_changed(self, event) -> None:
        text = event.text_area
        if isinstance(text, StageText):
            source = text.source_of(text.cursor_location[0])
            if source:
                others = [f"{t.stage} {len(t.rows_with_source(source))}" for t in self.query(StageText) if t is not text]
                self.status(f"{text.stage} line {text.cursor_location[0] + 1} comes from {source}; lines from it: "
                            f"{', '.join(others)} (l jumps there)")

    def action_link(self) -> None:
        """Jump to the next stage's first line that comes from the same source line."""
        text = self._active_text()
        if text is None:
            return
        source = text.source_of(text.cursor_location[0])
        if not source:
            self.status("this line has no source location", "yellow")
            return
        order = [t for t in TEXT_TABS if t != text.stage] + [text.stage]
        for stage in order:
            rows = self.query_one(f"#text-{stage}", StageText).rows_with_source(source)
            if rows:
                self.action_tab(stage)
                target = self.query_one(f"#text-{stage}", StageText)
                target.go_to_row(rows[0])
                target.focus()
                self.status(f"{stage} line {rows[0] + 1}: from {source}")
                return
        self.status(f"no other stage has a line from {source}", "yellow")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "findings" and self.report is not None:
            finding = self.report.findings[int(event.row_key.value)]
            self.action_tab(finding.view if finding.view in TABS else "overview")

    def action_sort(self) -> None:
        if self.query_one(TabbedContent).active == "fusions":
            self.query_one(FusionsTab).cycle_sort()

    def action_diff(self) -> None:
        self.action_tab("diff")
        self.query_one(DiffTab).running()
        self.run_diff()

    @work(thread=True, exclusive=True, group="diff")
    def run_diff(self) -> None:
        try:
            result = self.remote.call(self.session, "diff")
        except Exception as err:
            self.call_from_thread(self.query_one(DiffTab).show_error, _message(err))
            return
        self.call_from_thread(self._show_diff, result)

    def _show_diff(self, result) -> None:
        self.query_one(DiffTab).show(result)
        self.diff_verdict = "ok" if result.ok else "WRONG (see the Diff tab)"
        if self.report is not None:
            self.query_one(OverviewTab).show(self.report, self.diff_verdict)

    def action_target(self) -> None:
        def chosen(chip: str | None) -> None:
            if chip and chip != self.session.chip:
                self.session = self.session.with_chip(chip)
                self.load()

        self.push_screen(TargetScreen(TARGETS, self.session.chip), chosen)

    def action_params(self) -> None:
        if self.report is None:
            return

        def chosen(params: dict | None) -> None:
            if params:
                self.session = self.session.with_params(params)
                self.load()

        self.push_screen(ParamsScreen(self.report.target.params, self.report.target.param_choices), chosen)

    def action_export(self) -> None:
        if self.report is not None:
            self.export()

    @work(thread=True, group="export")
    def export(self) -> None:
        try:
            written = self.session.export(self.report)
        except Exception as err:
            self.call_from_thread(self.notify, _message(err), severity="error")
            return
        self.call_from_thread(self.notify, "wrote " + ", ".join(written))

    def action_reload(self) -> None:
        self.load(fresh=True)

    def action_cancel(self) -> None:
        search = self.query_one("#search", Input)
        if search.display:
            search.display = False
            self._focus_tab(self.query_one(TabbedContent).active)
            return
        self.workers.cancel_group(self, "load")
        self.workers.cancel_group(self, "diff")
        self.remote.cancel()
        self.status("cancelled: the compile was stopped (r starts it again)", "yellow")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def on_unmount(self) -> None:
        self.remote.close()
