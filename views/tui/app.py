"""`inspector TARGET`: the terminal UI. It opens at once, compiles in a worker process and renders
the same Report the other verbs print. Everything slow (compile, diff, export) runs in workers;
errors show in place. A crash of the UI itself is one line on exit and a traceback in a log file.

The shell is here: the tabs (one per row of the table of views, ``tabs.py``), the keys, and the
model: the session asked for, the Report in ``report`` (setting it repaints every tab), the
lowering while it compiles. Each concern is a part the app owns, with its own state, that reaches
the app through what host.py declares: ``calls`` (the worker and the requests in flight),
``status_line``, ``loader`` (lowering, compile, progress, Esc), ``navigator`` (search, source
links, a finding's evidence), ``diff``, ``passes`` and ``comparing`` (jobs.py), ``fixes`` (F, A),
``variants`` (keys that change the session) and ``baselines`` (o). A key's action here hands it
to its part."""
from __future__ import annotations

import gc
import sys
import time
import traceback
from pathlib import Path

from textual import events
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import DataTable, Header, Input, Static, TabbedContent, TabPane

from ...base.errors import EXIT_FINDINGS, InspectorError
from ...session import Session

from .calls import Calls
from .fix_keys import Fixes
from .footer import KeyFooter
from .host import Host
from .jobs import Comparing, DiffRun, PassDiffs
from .loading import Loader
from .navigation import CONTEXT_ACTIONS, Navigator
from .overview_tab import OverviewTab
from .screens import HelpScreen
from .status_line import StatusLine
from .tabs import LOWERED_TABS, TAB_VIEWS, focus_target, make_tab, tab_title
from .tune_screen import open_tune
from .variants import Baselines, Variants, family_info, time_key_words

ALL_TABS = tuple(v.name for v in TAB_VIEWS)


class UICrash(InspectorError):
    """The UI itself failed (a bug of ours): one line on exit; the traceback is in a log file."""

    exit_code = EXIT_FINDINGS


def crash_log_path():
    from ...compilation.compile_cache import cache_dir

    return cache_dir() / "tui-crash.log"


class InspectorApp(Host):
    CSS_PATH = "app.tcss"
    TITLE = "inspector"
    AUTO_FOCUS = "#findings"
    clock = staticmethod(time.monotonic)  # what stage times are measured with (tests fix it)
    BINDINGS = [
        *(Binding(v.key, v.opens or f"tab('{v.name}')", v.name, show=False) for v in TAB_VIEWS),
        Binding("P", "pass_dumps", "pass dumps", show=False),
        Binding("B", "buffers", "buffer assignment", show=False),
        Binding("M", "mosaic_dumps", "Mosaic pass dumps", show=False),
        Binding("T", "time", "estimate time", show=False),
        Binding("D", "measure", "measure on the TPU", show=False),
        Binding("F", "fixes", "try the fixes", show=False),
        Binding("A", "apply_fix", "apply the finding's fix", show=False),
        Binding("G", "backward", "backward pass", show=False),
        Binding("slash", "search", "search"),
        Binding("n", "find(True)", "next"),
        Binding("N", "find(False)", "previous", show=False),
        Binding("l", "link", "link"),
        Binding("s", "sort", "sort"),
        Binding("b", "back", "back"),
        Binding("d", "diff", "diff"),
        Binding("t", "target", "target"),
        Binding("x", "params", "params"),
        Binding("o", "options", "options", show=False),
        Binding("u", "tune", "tune", show=False),
        Binding("e", "export", "export"),
        Binding("r", "reload", "reload", show=False),
        Binding("escape", "cancel", "cancel", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
    ]
    # the whole report, once the compile is done; setting it repaints the tabs (watch_report).
    # always_update: a new load's report is news even where it equals the last one (and no deep compare)
    report = var(None, always_update=True, init=False)

    def __init__(self, session: Session, watch: bool = True, baseline=None, in_process: bool | None = None):
        """``session.chip``: the chip named, or the one rule's default (default_target.py), as in a pipe;
        ``watch``: a save of the target's file reloads it, as r does (the command line's --watch was
        the only way: a kernel author saves and looks again);
        ``baseline``: a saved baseline (inspector.baseline.record.Baseline) the overview compares with;
        ``in_process``: the worker on a thread of this process, not a child (None: INSPECTOR_WORKER=thread
        says; the tests' fixture worker_in_process)."""
        super().__init__()
        # no animations: the tab underline's glide alone repainted the screen ~17 times per tab
        # switch, most of a switch's CPU while a compile competes for the cores
        self.animation_level = "none"
        self.session = session
        self.watch_file = watch
        self.lowered = None  # the report as far as lowering goes (jaxpr, StableHLO, Mosaic), while it compiles
        self.tabs: dict = {}  # view name -> its tab widget (tabs.py), once mounted
        self.tabs_ready = False  # the tabs after the overview are mounted (just after the first frame)
        self.crash: tuple[BaseException, str] | None = None
        self._early_keys: list[events.Key] = []  # typed before the tabs are mounted: handled once they are
        # the parts, each with its own state (the module docstring)
        self.calls = Calls(self, in_process)
        self.status_line = StatusLine(self)
        self.loader = Loader(self)
        self.navigator = Navigator(self)
        self.diff = DiffRun(self)
        self.passes = PassDiffs(self)
        self.comparing = Comparing(self)
        self.fixes = Fixes(self)
        self.variants = Variants(self)
        self.baselines = Baselines(self, baseline)

    # ------------------------------------------------------------------ running and crashing

    def run(self, *args, **kwargs):
        """As App.run. If the UI itself crashed, raise one line (the CLI prints it and exits
        non-zero); the traceback is in a log."""
        result = super().run(*args, **kwargs)
        if self.crash is not None:
            error, where = self.crash
            raise UICrash(f"the terminal UI crashed: {type(error).__name__}: {error} (traceback in {where})") from error
        return result

    def action_help_quit(self) -> None:  # Textual's ctrl+c where no text is selected
        """Quits, as q does (Textual only hinted that ctrl+q quits, and the hint was easy to miss):
        ctrl+c is a terminal user's reflex. With text selected it copies, as before; the tune
        screen keeps it for stopping a sweep."""
        self.exit()

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
            with TabPane(tab_title(TAB_VIEWS[0]), id="overview"):
                yield OverviewTab()
            for view in TAB_VIEWS[1:]:
                yield TabPane(tab_title(view), id=view.name)
        yield Static("", id="status")
        yield KeyFooter(context_actions=frozenset(CONTEXT_ACTIONS))

    def on_mount(self) -> None:
        self.sub_title = self.loader.title(self.session.chip)
        self.query_one("#search", Input).display = False
        self.set_interval(0.5, self.loader.progress)  # the stage in progress and its seconds, live
        self.set_interval(0.5, self.fixes.progress)  # F: which fix runs, and the time so far
        # d: the time so far (F's line, when it runs too, keeps the status line)
        self.set_interval(0.5, lambda: self.diff.progress(fixes_running=self.fixes.began is not None))
        if self.watch_file:
            self.loader.check_file()  # the file's time now: a save in the first second is one too
            self.set_interval(1.0, self.loader.check_file)
        self.call_after_refresh(self._mount_tabs)

    async def on_event(self, event: events.Event) -> None:  # Textual's hook (pinned textual 8)
        if isinstance(event, events.Key) and not self.tabs_ready and not event.is_forwarded:
            self._early_keys.append(event)  # a key typed ahead at launch: its tab may not be there yet
            return
        await super().on_event(event)

    async def _mount_tabs(self) -> None:
        """The other tabs' widgets, then the first load. This runs on the app's message queue,
        so a key pressed meanwhile is handled once they are there."""
        self.tabs = {"overview": self.query_one(OverviewTab)}
        for view in TAB_VIEWS[1:]:
            self.tabs[view.name] = make_tab(view)
        for view in TAB_VIEWS[1:]:
            await self.query_one(f"#{view.name}", TabPane).mount(self.tabs[view.name])
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
        """The palette (ctrl+p) offers the app's own commands beside Textual's (themes among them).
        Textual's "Keys" (ours lists every key: one entry) and "Screenshot" (it saved into
        ~/Downloads, and failed where there is none) are replaced by ours."""
        yield from (c for c in super().get_system_commands(screen) if c.title not in ("Keys", "Screenshot"))
        yield SystemCommand("Screenshot", "save an SVG of the screen in the current folder", self.save_svg)
        yield SystemCommand("Target chip", "compile for another chip (t)", self.action_target)
        yield SystemCommand("Parameters", "edit the static parameters, --set (x)", self.action_params)
        info = family_info(self.session.chip)  # the time words are the target family's, not libtpu's everywhere
        yield SystemCommand("Tune", f"sweep the parameters, ranked by {info.time_estimate}; Enter applies a row (u)",
                            self.action_tune)
        yield SystemCommand("Export", "write the kernel graph (SVG) and the report (JSON) here (e)", self.action_export)
        yield SystemCommand("Run the diff", "run the function against its reference (d)", self.action_diff)
        yield SystemCommand("Compare", "compare with another chip or parameter set (c)", self.action_compare)
        yield SystemCommand("Buffer assignment", "compile for the largest buffers at the HBM peak: the Memory tab (B)",
                            self.action_buffers)
        yield SystemCommand("Pass dumps", "compile with XLA's pass dumps: the Passes tab (P)", self.action_pass_dumps)
        yield SystemCommand("Estimate time", f"{time_key_words(info)} (T)", self.action_time)
        yield SystemCommand("Mosaic pass dumps", "compile with Mosaic's pass dumps: the Mosaic passes tab (M)",
                            self.action_mosaic_dumps)
        yield SystemCommand("Backward pass", "the function's backward (jax.vjp): flash's backward kernels; again: forward (G)",
                            self.action_backward)
        yield SystemCommand("Reload", "reload the file and re-analyse (r)", self.action_reload)
        yield SystemCommand("Keys", "every key (?)", self.action_help)

    def save_svg(self) -> None:
        """The palette's Screenshot: an SVG of the screen in the current folder (where e writes), named in the status line."""
        from ...base.atomic import write_atomic

        stem = f"inspector-screen-{time.strftime('%Y-%m-%d-%H%M%S')}"
        path = next(p for n in range(1, 100) if not (p := Path.cwd() / f"{stem}{f'-{n}' if n > 1 else ''}.svg").exists())
        try:
            write_atomic(path, self.export_screenshot())
        except (OSError, InspectorError) as err:
            self.status(f"screenshot not saved: {err}", "bold red")
            return
        self.status(f"screenshot saved: {path}", "green")

    def status(self, text: str, style: str = "", of_tab: bool = False) -> None:
        """``of_tab``: the message is about what the current tab shows (status_line.py)."""
        self.status_line.say(text, style, of_tab)

    def watch_report(self, report) -> None:
        """A compiled report: every tab paints from it (the lowered text tabs stay as they are,
        where the user may be reading them)."""
        if report is None:
            return
        for name, tab in self.tabs.items():
            if name not in LOWERED_TABS or self.lowered is None:
                tab.show(report)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self.focus_tab(tab)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        assert event.pane.id is not None  # every pane has its view's name (compose)
        self.focus_tab(event.pane.id)

    def focus_tab(self, tab: str) -> None:
        """Keys go to the tab's main widget: the text, the table, the grid."""
        if not self.tabs_ready:
            return  # a tab clicked in the first frame: its widget comes in a moment
        self.status_line.tab_switched(tab)
        focus_target(self.tabs[tab]).focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(type(self).BINDINGS, family_info(self.session.chip)))

    def on_unmount(self) -> None:
        self.calls.remote.close()
        gc.unfreeze()  # an app run in a longer process (the tests) gives its objects back to the collector

    # ------------------------------------------------------------------ the model, for the parts and the tests

    def load(self, fresh: bool = False, why: str = "", undo: tuple | None = None) -> None:
        """(Re)analyse the session (loading.py); what the parts kept of the old variant goes."""
        self.stop_runs()
        self.diff.forget()
        self.passes.forget()
        self.navigator.forget()
        self.loader.load(fresh, why, undo)

    def change(self, session: Session, why: str = "", undo: tuple | None = None) -> None:
        """Another variant (chip, parameters, options, more dumps): it loads."""
        self.session = session
        self.load(why=why, undo=undo)

    def stop_runs(self) -> None:
        """F's and d's progress lines stop (a load or Esc cancelled them with the rest)."""
        self.fixes.stop()
        self.diff.stop()

    def _lowered(self, generation: int, report) -> None:  # where a load's answers arrive (tests wrap them)
        self.loader.lowered(generation, report)

    def _show(self, generation: int, report) -> None:
        self.loader.compiled(generation, report)

    # read-only views of the parts' state, under the names the tests (and the overview's baseline) read

    @property
    def remote(self):
        return self.calls.remote

    @property
    def _generation(self) -> int:
        return self.calls.generation

    @property
    def _pass_diffs(self) -> dict:
        return self.passes.seen

    @property
    def diff_verdict(self) -> str | None:
        return self.diff.verdict

    @property
    def baseline(self):
        return self.baselines.baseline

    @property
    def tolerances(self) -> dict | None:
        return self.baselines.tolerances

    # ------------------------------------------------------------------ keys: each to its part

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The context's keys: hidden from the footer (and idle) where they do nothing."""
        # the App's is_mounted is a method about a widget (always true here): Textual's own flag
        if action in CONTEXT_ACTIONS and not self._is_mounted:
            return True
        return self.navigator.applies(action)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.navigator.submitted(event)

    def on_text_area_selection_changed(self, event) -> None:
        self.navigator.selection_changed(event)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        table = event.data_table.id
        if table == "findings":
            self.navigator.finding_selected(event)
        elif table == "passes-table":
            self.passes.show(event.cursor_row)
        elif table == "mosaic-passes-table":
            self.passes.show_mosaic(event.cursor_row)

    def action_search(self) -> None:
        self.navigator.search()

    def action_find(self, forward: bool) -> None:
        self.navigator.find(forward)

    def action_link(self) -> None:
        self.navigator.link()

    def action_back(self) -> None:  # type: ignore[override]  # replaces App's (async) one; Textual calls either
        self.navigator.go_back()

    def action_sort(self) -> None:
        self.navigator.sort()

    def action_reload(self) -> None:
        self.load(fresh=True)

    def action_cancel(self) -> None:
        self.loader.cancel()

    def action_diff(self) -> None:
        self.diff.start()

    def action_compare(self) -> None:
        self.comparing.start()

    def action_fixes(self) -> None:
        self.fixes.start()

    def action_apply_fix(self) -> None:
        self.fixes.apply()

    def action_pass_dumps(self) -> None:
        self.variants.more("pass_dumps")

    def action_time(self) -> None:
        self.variants.more("time")

    def action_measure(self) -> None:
        self.variants.more("measure")

    def action_mosaic_dumps(self) -> None:
        self.variants.more("mosaic_dumps")

    def action_buffers(self) -> None:
        self.variants.more("buffers")

    def action_backward(self) -> None:
        self.variants.backward()

    def action_target(self) -> None:
        self.variants.target()

    def action_params(self) -> None:
        self.variants.params()

    def action_options(self) -> None:
        self.baselines.options()

    def action_tune(self) -> None:
        open_tune(self)

    def action_export(self) -> None:
        self.variants.export(self.loader.loading)
