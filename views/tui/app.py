"""`inspector TARGET`: the terminal UI. It opens at once, compiles in a worker process and renders
the same Report the other verbs print. Everything slow (compile, diff, export) runs in workers;
errors show in place. A crash of the UI itself is one line on exit and a traceback in a log file."""
from __future__ import annotations

import gc
import sys
import time
import traceback
from concurrent.futures import CancelledError

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.widgets import DataTable, Header, Input, Static, TabbedContent, TabPane

from ...chips import CHIPS
from ...errors import EXIT_FINDINGS, InspectorError
from ...findings import Finding
from ...units import count
from ...remote import Remote
from ...session import Session
from ...target import parse_value

from ..pallas import unread_calls
from ..printer import stage_text
from .collectives_tab import CollectivesTab
from .compare_tab import CompareTab
from .diff_tab import DiffTab
from .footer import KeyFooter
from .fusions_tab import FusionsTab
from .memory_tab import MemoryTab
from .overview_tab import OverviewTab
from .pallas_tab import PallasTab
from .passes_tab import NO_DUMPS, PassesTab
from .screens import CompareScreen, HelpScreen, ParamsScreen, TargetScreen
from .stage_text import StageText

TABS = ("overview", "jaxpr", "stablehlo", "hlo", "fusions", "pallas", "diff", "mosaic")  # keys 1-8
MORE_TABS = {"9": "memory", "0": "collectives", "p": "passes"}  # keys after 1-8; compare: c
ALL_TABS = TABS + tuple(MORE_TABS.values()) + ("compare",)
TEXT_TABS = ("jaxpr", "stablehlo", "hlo", "mosaic")
TAB_TITLES = {"jaxpr": "2 Jaxpr", "stablehlo": "3 StableHLO", "hlo": "4 HLO", "fusions": "5 Fusions",
              "pallas": "6 Pallas", "diff": "7 Diff", "mosaic": "8 Mosaic", "memory": "9 Memory",
              "collectives": "0 Collectives", "passes": "p Passes", "compare": "c Compare"}  # after the overview
CONTEXT_ACTIONS = ("link", "find", "sort", "back")  # shown in the footer only where they apply: check_action
TARGETS = [c.name for c in CHIPS if c.kind != "gpu" and c.name != "gpu"]


class UICrash(InspectorError):
    """The UI itself failed (a bug of ours): one line on exit; the traceback is in a log file."""

    exit_code = EXIT_FINDINGS


def seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def crash_log_path():
    from ...compile_cache import cache_dir

    return cache_dir() / "tui-crash.log"


def _message(err: BaseException) -> str:
    if type(err).__name__ == "BrokenProcessPool" or isinstance(err, CancelledError):
        return "cancelled"
    return str(err) if isinstance(err, InspectorError) else f"{type(err).__name__}: {err}"


class InspectorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "inspector"
    AUTO_FOCUS = "#findings"
    clock = staticmethod(time.monotonic)  # what stage times are measured with (tests fix it)
    BINDINGS = [
        *(Binding(str(i + 1), f"tab('{t}')", t, show=False) for i, t in enumerate(TABS)),
        *(Binding(key, f"tab('{t}')", t, show=False) for key, t in MORE_TABS.items()),
        Binding("P", "pass_dumps", "pass dumps", show=False),
        Binding("B", "buffers", "buffer assignment", show=False),
        Binding("c", "compare", "compare", show=False),
        Binding("slash", "search", "search"),
        Binding("n", "find(True)", "next"),
        Binding("N", "find(False)", "previous", show=False),
        Binding("l", "link", "link"),
        Binding("s", "sort", "sort"),
        Binding("b", "back", "back"),
        Binding("d", "diff", "diff"),
        Binding("t", "target", "target"),
        Binding("x", "params", "params"),
        Binding("e", "export", "export"),
        Binding("r", "reload", "reload", show=False),
        Binding("escape", "cancel", "cancel", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, session: Session, watch: bool = False, choose_chip: bool = False):
        """``choose_chip``: the user named no chip, so open on the one the file suggests (a TPU
        for Pallas TPU kernels, or the last one used for the file)."""
        super().__init__()
        # no animations: the tab underline's glide alone repainted the screen ~17 times per tab
        # switch, most of a switch's CPU while a compile competes for the cores
        self.animation_level = "none"
        if choose_chip:
            session = session.with_chip(session.suggested_chip())
        self.session = session
        self.watch_file = watch
        self.report = None  # the whole report, once the compile is done
        self.lowered = None  # the report as far as lowering goes (jaxpr, StableHLO, Mosaic), while it compiles
        self.diff_verdict: str | None = None
        self.last_search = ""
        self.crash: tuple[BaseException, str] | None = None
        self._mtime = None
        self._generation = 0  # bumped by every load: results of an older one are dropped
        self._loading = False
        self._back: tuple[str, int] | None = None  # (tab, finding row) to return to after a jump
        self._pending_status: str | None = None  # shown when the jump's selection event arrives
        self._pass_diffs: dict = {}  # step index -> PassDiff, for the current compile
        self._phase: tuple[str, float] | None = None  # ("lower" or "compile", when it began) while loading
        self._took: list[tuple[str, float]] = []  # (stage, seconds) of the current load, as they end
        self._why = ""  # why this load (a saved file): said with its progress
        self._status_is_progress = False  # the status line shows the progress (no message of another's since)
        self._drawn = ("", "")  # the progress texts last drawn: (status line, overview)
        self.tabs_ready = False  # the tabs after the overview are mounted (just after the first frame)
        self._early_keys: list[events.Key] = []  # typed before that: handled once they are
        self.remote = Remote()  # the core runs in a child process: the UI keeps the GIL to itself

    # ------------------------------------------------------------------ running and crashing

    def run(self, *args, **kwargs):
        """As App.run. If the UI itself crashed, raise one line (the CLI prints it and exits
        non-zero); the traceback is in a log."""
        result = super().run(*args, **kwargs)
        if self.crash is not None:
            error, where = self.crash
            raise UICrash(f"the terminal UI crashed: {type(error).__name__}: {error} (traceback in {where})") from error
        return result

    def _handle_exception(self, error: Exception) -> None:  # Textual's hook (pinned textual 8)
        """Instead of ~1,800 lines of rich traceback over the terminal: write it to a log file,
        stop the worker, exit with a non-zero code; run() turns it into one line."""
        cause = getattr(error, "error", None) if type(error).__name__ == "WorkerFailed" else None
        cause = cause if isinstance(cause, BaseException) else error  # a worker's error: its own traceback
        where = crash_log_path()
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            with open(where, "a") as log:
                log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} inspector {' '.join(sys.argv[1:])}\n")
                log.write("".join(traceback.format_exception(cause)))
            where = str(where)
        except OSError as err:
            where = f"nowhere: could not write {where}: {err}"
        if self.crash is None:
            self.crash = (cause, where)
        self._return_code = 1
        if self._exception is None:  # what run_test re-raises, so tests still see the error
            self._exception = error
            self._exception_event.set()
        self._close_messages_no_wait()

    def compose(self) -> ComposeResult:
        # The first frame has the overview only: the other tabs' panes are empty until
        # _mount_tabs fills them right after it (the screen shows ~0.1 s sooner).
        yield Header()
        yield Input(placeholder="search (Enter finds, n / N next / previous, Esc closes)", id="search")
        with TabbedContent(id="tabs", initial="overview"):
            with TabPane("1 Overview", id="overview"):
                yield OverviewTab()
            for tab, title in TAB_TITLES.items():
                yield TabPane(title, id=tab)
        yield Static("", id="status")
        yield KeyFooter(context_actions=frozenset(CONTEXT_ACTIONS))

    def on_mount(self) -> None:
        self.sub_title = f"{self.session.spec} on {self.session.chip}"
        self.query_one("#search", Input).display = False
        self.set_interval(0.5, self._progress)  # the stage in progress and its seconds, live
        if self.watch_file:
            self.set_interval(1.0, self._check_file)
        self.call_after_refresh(self._mount_tabs)

    async def on_event(self, event: events.Event) -> None:  # Textual's hook (pinned textual 8)
        if isinstance(event, events.Key) and not self.tabs_ready and not event.is_forwarded:
            self._early_keys.append(event)  # a key typed ahead at launch: its tab may not be there yet
            return
        await super().on_event(event)

    async def _mount_tabs(self) -> None:
        """The other tabs' widgets, then the first load. This runs on the app's message queue,
        so a key pressed meanwhile is handled once they are there."""
        widgets = {"fusions": FusionsTab, "pallas": PallasTab, "diff": DiffTab, "memory": MemoryTab,
                   "collectives": CollectivesTab, "passes": PassesTab, "compare": CompareTab}
        mounting = [self.query_one(f"#{tab}", TabPane).mount(StageText(tab) if tab in TEXT_TABS else widgets[tab]())
                    for tab in TAB_TITLES]
        for mounted in mounting:
            await mounted
        self.tabs_ready = True
        self.load()
        for key in self._early_keys:
            self.post_message(events.Key(key.key, key.character))
        self._early_keys.clear()
        # What exists now (the widgets, styles, modules) lives as long as the app: out of the
        # garbage collector's full passes, which otherwise walk it all every few seconds
        # (~100k objects: 100-200 ms pauses while a compile competes for the CPU).
        self.call_after_refresh(gc.freeze)

    def get_system_commands(self, screen):
        """The palette (ctrl+p) offers the app's own commands beside Textual's (themes among them)."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Target chip", "compile for another chip (t)", self.action_target)
        yield SystemCommand("Parameters", "edit the static parameters, --set (x)", self.action_params)
        yield SystemCommand("Export", "write the kernel graph (SVG) and the report (JSON) here (e)", self.action_export)
        yield SystemCommand("Run the diff", "run the function against its reference (d)", self.action_diff)
        yield SystemCommand("Compare", "compare with another chip or parameter set (c)", self.action_compare)
        yield SystemCommand("Buffer assignment", "compile for the largest buffers at the HBM peak: the Memory tab (B)",
                            self.action_buffers)
        yield SystemCommand("Pass dumps", "compile with XLA's pass dumps: the Passes tab (P)", self.action_pass_dumps)
        yield SystemCommand("Reload", "reload the file and re-analyse (r)", self.action_reload)
        yield SystemCommand("Keys", "every key (?)", self.action_help)

    # ------------------------------------------------------------------ loading

    def status(self, text: str, style: str = "") -> None:
        self._status_is_progress = False  # a message of its own: the progress ticker leaves it
        # one line, always (app.tcss): no layout pass for it (a cursor move updates it)
        self.query_one("#status", Static).update(Text(text, style=style), layout=False)

    def load(self, fresh: bool = False, why: str = "") -> None:
        """(Re)analyse for the current session: first the lowering (the jaxpr, StableHLO and Mosaic
        tabs fill in), then the compile (the rest). Whatever still runs for an older request (a
        compile, or a diff or compare of the old variant) is cancelled first, and nothing of the
        old target stays on screen. ``why``: said with the progress (a saved file)."""
        if self._loading or self.remote.busy:
            self.remote.cancel()  # also voids a load between its two calls
        self._generation += 1
        self._loading = True
        self.report = None
        self.lowered = None
        self._back = None
        self._why = why
        self._took = []
        self._phase = ("lower", self.clock())
        self.sub_title = f"{self.session.spec} on {self.session.chip}"
        self._reset_views(self._progress_texts()[1])
        self._status_is_progress = True
        self._progress(force=True)
        self._load(self._generation, self.session, fresh, self.remote.epoch)

    @work(thread=True, group="load")
    def _load(self, generation: int, session: Session, fresh: bool, epoch: int) -> None:
        """Two calls into the worker process: the lowering, shown at once, then the compile, which
        starts from that lowering (the worker keeps it). A cancel in between voids the second."""
        try:
            lowered = self.remote.call(session, "lowering", fresh, epoch=epoch)
        except Exception as err:  # a failure is shown where the report would be
            self._deliver(self._failed, generation, _message(err))
            return
        self._deliver(self._lowered, generation, lowered)
        try:
            report = self.remote.call(session, "report", False, epoch=epoch)
        except Exception as err:
            self._deliver(self._failed, generation, _message(err))
            return
        self._deliver(self._show, generation, report)

    def _extra(self) -> str:
        return (" with pass dumps" if self.session.passes else
                " with its buffer assignment" if self.session.buffers else "")

    def _progress_texts(self) -> tuple[str, str]:
        """(status line, overview) for the stage in progress, with its seconds so far."""
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

    def _progress(self, force: bool = False) -> None:
        """Every half second while loading (and, forced, as each stage begins): the status line
        and the overview say what runs and for how long. A message the status line got since
        (a search, a hint) stays until the next stage."""
        if self._phase is None or not self.is_running:
            return
        status, overview = self._progress_texts()
        if self._status_is_progress and (force or status != self._drawn[0]):
            self.query_one("#status", Static).update(Text(status, style="yellow"), layout=False)
        if force or overview != self._drawn[1]:
            tab = self.query_one(OverviewTab)
            # a tick changes a digit: a layout pass (tens of ms with a large overview) only when
            # the text's length changed, and so perhaps its wrapping
            layout = force or len(overview) != len(self._drawn[1])
            if self._phase[0] == "lower":
                tab.waiting(overview, layout)
            else:
                tab.progress(overview, layout=layout)
        self._drawn = (status, overview)

    def _reset_views(self, message: str) -> None:
        self.query_one(OverviewTab).reset(message)
        for text in self.query(StageText):
            text.show("")
        self.query_one(FusionsTab).show(None, "compiling…")
        self.query_one(PallasTab).show([], empty="compiling… (the Pallas analysis comes with the compile)")
        self.diff_verdict = None
        self.query_one(DiffTab).reset()
        self.query_one(MemoryTab).reset()
        self.query_one(CollectivesTab).reset()
        self.query_one(PassesTab).show(None, "compiling with pass dumps…" if self.session.passes else
                                       NO_DUMPS)
        self.query_one(CompareTab).reset()
        self._pass_diffs = {}

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
        if self.lowered is not None:  # the compile failed: the stages lowered so far stay
            self.query_one(OverviewTab).progress(message, "bold red")
            self.query_one("#text-hlo", StageText).show(f"// no optimized HLO: {message}")
        else:
            self.query_one(OverviewTab).show_error(message)
        self.status(message, "bold red")

    def _lowered(self, generation: int, report) -> None:
        """The lowering is done: the jaxpr, StableHLO and Mosaic tabs fill in; the compile runs."""
        if generation != self._generation:
            return  # a result for a target or parameters no longer asked for
        self.lowered = report
        self._stage_ended("lowered")
        self._phase = ("compile", self.clock())
        s = report.stages
        self.query_one(OverviewTab).show_lowered(report)
        self.query_one("#text-jaxpr", StageText).show(s.jaxpr or "")
        self.query_one("#text-stablehlo", StageText).show(s.stablehlo or "")
        self.query_one("#text-mosaic", StageText).show(stage_text(report, "mosaic"))
        self.query_one("#text-hlo", StageText).show(
            f"// compiling for {report.chip.name}{self._extra()}: the optimized HLO comes when the compile is done\n")
        self._status_is_progress = True  # a new stage is news
        self._progress(force=True)

    def _show(self, generation: int, report) -> None:
        if generation != self._generation:
            return  # a result for a target or parameters no longer asked for
        self._loading = False
        self._stage_ended("compiled")
        self.report = report
        self.sub_title = f"{self.session.spec} on {report.chip.name}"
        self.query_one(OverviewTab).show(report, self.diff_verdict)
        s = report.stages
        frames = report.fusions.frames if report.fusions else {}
        if self.lowered is None:  # else they are on screen since the lowering, where the user may be reading
            self.query_one("#text-jaxpr", StageText).show(s.jaxpr or "")
            self.query_one("#text-stablehlo", StageText).show(s.stablehlo or "")
            self.query_one("#text-mosaic", StageText).show(stage_text(report, "mosaic"))
        why = s.compile_error.headline if s.compile_error else "not compiled"
        self.query_one("#text-hlo", StageText).show(s.hlo or f"// no optimized HLO: {why}", frames)
        self.query_one(FusionsTab).show(report.fusions, why)
        self.query_one(PallasTab).show(report.pallas, self._compiler_vmem(report), unread_calls(report.findings))
        self.query_one(MemoryTab).show(report)
        self.query_one(CollectivesTab).show(report)
        if report.passes is not None:
            self.query_one(PassesTab).show(report.passes)
        elif self.session.passes:
            self.query_one(PassesTab).show(None, f"no pass dumps: {why}")
        errors = sum(f.severity == "error" for f in report.findings)
        took = self._took_text()
        self.status(f"{report.chip.name}: {count(len(report.findings), 'finding')} ({count(errors, 'error')})"
                    + (f"; {took}" if took else "") + "; ? for keys", "bold red" if errors else "green")

    @staticmethod
    def _compiler_vmem(report) -> dict[str, dict[str, int]]:
        """Per Pallas kernel, the compiler's own VMEM figure on this chip: the scoped VMEM its
        custom call uses, or what it needed when the compile ran out."""
        found: dict[str, dict[str, int]] = {}
        chip = report.chip.name
        names = [k.call.name for k in report.pallas or []]
        for kernel in report.fusions.kernels if report.fusions else []:
            if kernel.compiler_scoped_vmem_bytes and kernel.kind.startswith("custom-call"):
                for name in names:
                    if name in (kernel.op_name or "") or kernel.name.startswith(name):
                        figures = found.setdefault(name, {})
                        figures[chip] = max(figures.get(chip, 0), kernel.compiler_scoped_vmem_bytes)
        error = report.stages.compile_error
        if error is not None and error.vmem is not None:
            for name in names:
                if error.vmem.kernel is None or error.vmem.kernel.startswith(name) or name in (error.vmem.op_name or ""):
                    found.setdefault(name, {})[chip] = error.vmem.used_bytes
        return found

    def _check_file(self) -> None:
        path = self.session.source_file()
        if path is None or not path.exists():
            return
        mtime = path.stat().st_mtime
        if self._mtime is not None and mtime != self._mtime:
            self.load(fresh=True, why=f"{path.name} changed")
        self._mtime = mtime

    # ------------------------------------------------------------------ actions

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._focus_tab(tab)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._focus_tab(event.pane.id)

    def _focus_tab(self, tab: str) -> None:
        """Keys go to the tab's main widget: the text, the table, the grid."""
        if not self.tabs_ready:
            return  # a tab clicked in the first frame: its widget comes in a moment
        widget = {"overview": "#findings", "fusions": "#fusions-table", "pallas": "PallasTab", "diff": "DiffTab",
                  "memory": "MemoryTab", "collectives": "CollectivesTab", "passes": "#passes-table",
                  "compare": "CompareTab"}.get(tab, f"#text-{tab}")
        self.query_one(widget).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The context's keys: hidden from the footer (and idle) where they do nothing."""
        if action in CONTEXT_ACTIONS and not self.is_mounted:
            return True
        if action == "link":
            return self._active_text() is not None
        if action == "find":
            return self._active_text() is not None and bool(self.last_search)
        if action == "sort":
            return self.query_one(TabbedContent).active == "fusions"
        if action == "back":
            return self._back is not None
        return True

    def _active_text(self) -> StageText | None:
        active = self.query_one(TabbedContent).active
        return self.query_one(f"#text-{active}", StageText) if active in TEXT_TABS and self.tabs_ready else None

    def action_search(self) -> None:
        if self._active_text() is None:
            self.status("/ searches the text tabs (2 Jaxpr, 3 StableHLO, 4 HLO, 8 Mosaic)", "yellow")
            return
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.last_search = event.value
            self.refresh_bindings()
            event.input.display = False
            self._focus_tab(self.query_one(TabbedContent).active)
            self.action_find(True)

    def action_find(self, forward: bool) -> None:
        text = self._active_text()
        if text is None or not self.last_search:
            return
        before = text.selection
        found = text.find(self.last_search, forward)
        if found:
            where = self._line_source(text)
            message = f"/{self.last_search}: match {found[0]:,} of {found[1]:,} (n next, N previous)" + (
                f"; {where}" if where else "")
            self.status(message)
            if text.selection != before:  # the selection event that follows would say the line's source alone
                self._pending_status = message
        else:
            self.status(f"/{self.last_search}: not found in {text.stage}", "yellow")
        text.focus()

    def on_text_area_selection_changed(self, event) -> None:
        text = event.text_area
        if self._pending_status is not None:  # a jump (l, Enter on a finding) said where it went
            self.status(self._pending_status)
            self._pending_status = None
            return
        where = self._line_source(text)
        if where:
            self.status(where)

    def _line_source(self, text) -> str:
        """Where the line under the cursor comes from, and how many lines of the other stages do."""
        if not isinstance(text, StageText) or text.stage == "mosaic":
            return ""
        source = text.source_of(text.cursor_location[0])
        if not source:
            return ""
        others = [f"{t.stage} {len(t.rows_with_source(source))}" for t in self.query(StageText)
                  if t is not text and t.stage != "mosaic"]
        return (f"{text.stage} line {text.cursor_location[0] + 1} comes from {source}; lines from it: "
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
        stages = ("jaxpr", "stablehlo", "hlo")
        at = stages.index(text.stage) + 1 if text.stage in stages else 0
        order = [t for t in stages[at:] + stages[:at] if t != text.stage] + [text.stage]  # the next stage first
        for stage in order:
            rows = self.query_one(f"#text-{stage}", StageText).rows_with_source(source)
            if stage == text.stage:  # the last resort: this stage's next line from there, never this one
                here = text.cursor_location[0]
                rows = [r for r in rows if r > here] + [r for r in rows if r < here]
            if rows:
                self.action_tab(stage)
                target = self.query_one(f"#text-{stage}", StageText)
                self._pending_status = f"{stage} line {rows[0] + 1}: from {source}"
                target.go_to_row(rows[0])
                target.focus()
                self.status(self._pending_status)
                return
        self.status(f"no other stage has a line from {source}", "yellow")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "findings" and self.report is not None:
            row = int(event.row_key.value)
            self.show_evidence(self.query_one(OverviewTab).findings[row], row)
        elif event.data_table.id == "passes-table":
            self.show_pass_diff(event.cursor_row)

    def show_evidence(self, finding: Finding, row: int | None = None) -> None:
        """Enter on a finding: its view, at the thing it names (Pallas: the kernel, grid step and
        operand; Fusions: the kernel; HLO: the line). b comes back."""
        view = finding.view if finding.view in ALL_TABS else "overview"
        kernels = [k.call.name for k in (self.report.pallas or [])] if self.report else []
        if view == "overview" and finding.kernel and any(finding.kernel.startswith(n) for n in kernels):
            view = "pallas"  # a compile that ran out of VMEM in a Pallas kernel: its budget is there
        if view == "overview":
            self.status(f"{finding.code}: the evidence is the message itself (below the table)")
            return
        self._back = ("overview", row or 0)
        self.refresh_bindings()
        self.action_tab(view)
        where = ""
        if view == "pallas":
            where = self.query_one(PallasTab).show_finding(finding)
        elif view == "fusions" and finding.kernel:
            where = self.query_one(FusionsTab).select_kernel(finding.kernel)
        elif view in TEXT_TABS:
            text = self.query_one(f"#text-{view}", StageText)
            needle = finding.kernel or ("custom-call" if finding.code == "pallas-interpreted" else "")
            hits = text.matches(needle) if needle else []
            if hits:
                where = f"line {hits[0][0] + 1}"
                self._pending_status = f"{finding.code}: {view} {where} (b goes back)"
                text.go_to_row(hits[0][0])
        self.status(f"{finding.code}: {where or view} (b goes back)")

    def action_back(self) -> None:
        if self._back is None:
            return
        tab, row = self._back
        self._back = None
        self.refresh_bindings()
        self.action_tab(tab)
        table = self.query_one("#findings", DataTable)
        if row < table.row_count:
            table.move_cursor(row=row)

    def action_sort(self) -> None:
        if self.query_one(TabbedContent).active == "fusions":
            self.query_one(FusionsTab).cycle_sort()

    def action_diff(self) -> None:
        self.action_tab("diff")
        self.query_one(DiffTab).running()
        self.run_diff(self._generation, self.session)

    @work(thread=True, exclusive=True, group="diff")
    def run_diff(self, generation: int, session: Session) -> None:
        self._answer(generation, lambda: self.remote.call(session, "diff"), self._show_diff,
                     lambda m: self.query_one(DiffTab).show_error(m))

    def _show_diff(self, result) -> None:
        self.query_one(DiffTab).show(result)
        self.diff_verdict = "ok" if result.ok else "WRONG (see the Diff tab)"
        self.query_one(OverviewTab).show_diff(self.diff_verdict)

    # ------------------------------------------------------------------ passes

    def action_pass_dumps(self) -> None:
        """Compile again with XLA's pass dumps: the Passes tab fills in, kernels name their pass."""
        if self.session.passes and self.report is not None and self.report.passes is not None:
            self.action_tab("passes")
            self.status("already compiled with pass dumps: Enter on a step shows its diff")
            return
        self.session = self.session.with_passes(True)
        self.load()
        self.action_tab("passes")

    def show_pass_diff(self, row: int) -> None:
        tab = self.query_one(PassesTab)
        step = tab.step_at(row)
        if step is None:
            return
        if step.index in self._pass_diffs:
            tab.show_diff(self._pass_diffs[step.index])
            self.status(f"{step.label}: its diff")
            return
        tab.diff_message(f"{step.label}: compiling with pass dumps for its diff… (Esc cancels)", "yellow")
        self.status(f"{step.label}: compiling with pass dumps for its diff…", "yellow")
        self._pass_diff(self._generation, self.session, step.index, step.label)

    @work(thread=True, exclusive=True, group="passes")
    def _pass_diff(self, generation: int, session: Session, index: int, label: str) -> None:
        self._answer(generation, lambda: self.remote.call(session, "pass_diff", str(index)),
                     lambda diff: self._show_pass_diff(index, label, diff),
                     lambda m: self.query_one(PassesTab).diff_message(m, "bold red"))

    def _show_pass_diff(self, index: int, label: str, diff) -> None:
        self._pass_diffs[index] = diff
        self.query_one(PassesTab).show_diff(diff)
        self.status(f"{label}: its diff" + (f" (+{diff.added} -{diff.removed} lines)" if diff else ""))

    def action_buffers(self) -> None:
        """Compile again asking for the compiler's buffer assignment: the Memory tab's largest
        buffers live at the peak (the compile cache keeps it for next time)."""
        if self.session.buffers and self.report is not None:
            self.action_tab("memory")
            self.status("already compiled with the buffer assignment")
            return
        self.session = self.session.with_buffers(True)
        self.load()
        self.action_tab("memory")

    # ------------------------------------------------------------------ compare

    def action_compare(self) -> None:
        if self.report is None:
            self.status("compare needs this variant compiled first (wait, or r)", "yellow")
            return

        def picked(what: str | None) -> None:
            if what == "chip":
                self.push_screen(TargetScreen(TARGETS, self.session.chip), chip_chosen)
            elif what == "params":
                signature = self.session.keyword_params()
                self.push_screen(ParamsScreen(self.report.target.params, self.report.target.param_choices,
                                              signature[0] if signature else None, parse_value), params_chosen)

        def chip_chosen(chip: str | None) -> None:
            if chip and chip != self.session.chip:
                self.start_compare(self.session.with_chip(chip), f"on {chip}")
            elif chip:
                self.status(f"{chip} is this variant's chip: pick another to compare", "yellow")

        def params_chosen(params: dict | None) -> None:
            if params:
                self.start_compare(self.session.with_params(params),
                                   "with " + " ".join(f"{k}={v}" for k, v in params.items()))

        self.push_screen(CompareScreen(), picked)

    def start_compare(self, other: Session, what: str) -> None:
        other = other.with_passes(False)  # side B as `inspector compare` builds it
        self.action_tab("compare")
        self.query_one(CompareTab).running(f"{other.spec} {what}")
        self.status(f"compiling {other.spec} {what} to compare…", "yellow")
        self.run_compare(self._generation, self.report, other)

    @work(thread=True, exclusive=True, group="compare")
    def run_compare(self, generation: int, report_a, other: Session) -> None:
        from ...compare import compare_reports

        self._answer(generation, lambda: compare_reports(report_a, self.remote.call(other, "report", False)),
                     self._show_compare, lambda m: self.query_one(CompareTab).show_error(m))

    def _show_compare(self, result) -> None:
        self.query_one(CompareTab).show(result)
        self.status(f"compare: B = {result.b.label}; " + ("ok" if result.ok else "an error finding on one side"),
                    "green" if result.ok else "bold red")

    def action_target(self) -> None:
        def chosen(chip: str | None) -> None:
            if chip and chip != self.session.chip:
                self.session = self.session.with_chip(chip)
                self.session.remember_chip()
                self.load()

        self.push_screen(TargetScreen(TARGETS, self.session.chip), chosen)

    def action_params(self) -> None:
        known = self.report or self.lowered  # the lowering knows the parameters: no need to wait for the compile
        if known is None:
            self.status("the parameters can be edited once the function is traced (its own are known then)",
                        "yellow")
            return
        signature = self.session.keyword_params()

        def chosen(params: dict | None) -> None:
            if params:
                self.session = self.session.with_params(params)
                self.load()

        self.push_screen(ParamsScreen(known.target.params, known.target.param_choices,
                                      signature[0] if signature else None, parse_value), chosen)

    def action_export(self) -> None:
        if self.report is not None:
            self.export(self.report)
        else:  # the export needs the compiled program: say so rather than do nothing
            self.status("e exports once the compile is done" if self._loading else
                        "nothing to export: the compile did not finish (r reloads)", "yellow")

    @work(thread=True, group="export")
    def export(self, report) -> None:
        try:
            written = self.session.export(report)
        except Exception as err:
            self._deliver(self.notify, _message(err), severity="error")
            return
        self._deliver(self.notify, "wrote " + ", ".join(written))

    def action_reload(self) -> None:
        self.load(fresh=True)

    def action_cancel(self) -> None:
        search = self.query_one("#search", Input)
        if search.display:
            search.display = False
            self._focus_tab(self.query_one(TabbedContent).active)
            return
        if self.query_one(PallasTab).close_goto():
            return
        # a pass diff just asked for may not have reached the worker yet: it is in flight all the same;
        # a load may be between its two calls (lowering done, compile not yet asked)
        if not self.remote.busy and not self.query_one(PassesTab).pending and not self._loading:
            self.status("nothing is running (Esc cancels a compile or a diff in flight)")
            return
        self._generation += 1  # whatever comes back now is dropped
        self._loading = False
        self._phase = None
        self.remote.cancel()
        if self.report is None and self.lowered is not None:  # what the lowering showed stays: it is current
            self.query_one(OverviewTab).progress("cancelled: the compile was stopped (r starts it again)")
            self.query_one("#text-hlo", StageText).show("// not compiled: cancelled (r compiles again)\n")
        elif self.report is None:
            self.query_one(OverviewTab).show_error("cancelled: the compile was stopped (r starts it again)")
        self.query_one(DiffTab).reset()
        self.query_one(CompareTab).reset()
        self.query_one(PassesTab).cancelled()
        self.status("cancelled: the compile was stopped (r starts it again)", "yellow")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def _answer(self, generation: int, ask, show, show_error) -> None:
        """In a worker thread: ``ask()`` (a call into the worker process), then ``show(result)`` or
        ``show_error(message)`` on the UI thread, unless a newer request has been made since."""
        def if_current(fn, *args) -> None:
            # checked on the UI thread: an Esc pressed while this answer was on its way drops it
            if generation == self._generation:
                fn(*args)

        try:
            result = ask()
        except Exception as err:
            self._deliver(if_current, show_error, _message(err))
            return
        self._deliver(if_current, show, result)

    def _deliver(self, fn, *args, **kwargs) -> None:
        """From a worker thread: ``fn`` on the UI thread, unless the app is shutting down by then
        (its widgets are going away; a result that arrives then is no news)."""
        def deliver():
            if self.is_running:
                fn(*args, **kwargs)

        try:
            self.call_from_thread(deliver)
        except RuntimeError:  # the event loop has already stopped
            pass

    def on_unmount(self) -> None:
        self.remote.close()
        gc.unfreeze()  # an app run in a longer process (the tests) gives its objects back to the collector
