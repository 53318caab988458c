"""The passes tab: every step of XLA's pass pipeline (the printer's columns), and the diff of the
one under the cursor on Enter. The report has the steps only from a compile with pass dumps:
P asks for one."""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static


from ..passes import PASS_COLUMNS, diff_text, pass_cells, passes_title

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...hlo.passes import PassDiff, PassLog
    from ...results.report import Report
    from .app_base import AppBase

NO_DUMPS = ("press P to compile with pass dumps (XLA's pass-by-pass dumps, without the compile cache): "
            "the steps of the pipeline, then Enter shows a step's diff")


class PassesTab(Vertical):
    FOCUS = "#passes-table"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pass_log: PassLog | None = None
        self.pending = False  # a step's diff is being compiled

    def compose(self):
        yield Static(Text(NO_DUMPS), id="passes-title")
        yield DataTable(id="passes-table", cursor_type="row")
        with VerticalScroll(id="passes-diff-scroll"):
            yield Static("", id="passes-diff")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for header, right in PASS_COLUMNS:
            table.add_column(Text(header, justify="right" if right else "left"), key=header)
        self.show_log(None)

    def reset(self, message: str) -> None:
        self.show_log(None, "compiling with pass dumps…" if cast("AppBase", self.app).session.passes else NO_DUMPS)

    def progress(self, text: str) -> None:
        """While P's compile runs: what runs and for how long (the loading ticker), in place of the title."""
        self.query_one("#passes-title", Static).update(Text(text, style="yellow"))

    def show(self, report: Report) -> None:
        if report.passes is not None:
            self.show_log(report.passes)
        elif cast("AppBase", self.app).session.passes:
            error = report.stages.compile_error
            self.show_log(None, f"no pass dumps: {error.headline if error else 'not compiled'}")

    def show_log(self, log: PassLog | None, message: str = NO_DUMPS) -> None:
        self.pass_log = log
        table = self.query_one(DataTable)
        table.clear()
        steps = log.steps if log else []
        for s in steps:
            table.add_row(*pass_cells(s), key=str(s.index))
        if log is None:
            title = Text(message, style="dim" if message == NO_DUMPS else "yellow")
        elif not steps:
            title = Text(f"{log.module}: the compile wrote no pass dumps", style="yellow")
        else:
            title = Text.assemble((passes_title(log), "bold"), "; Enter shows a step's diff")
        self.query_one("#passes-title", Static).update(title)
        table.display = bool(steps)
        self.query_one("#passes-diff-scroll").display = bool(steps)
        self.query_one("#passes-diff", Static).update(Text(log.note, style="dim") if log and steps else "")

    def step_at(self, row: int):
        return self.pass_log.steps[row] if self.pass_log and 0 <= row < len(self.pass_log.steps) else None

    def show_diff(self, diff: PassDiff | None) -> None:
        self.pending = False
        self.query_one("#passes-diff", Static).update(
            diff_text(diff, colour=True) if diff else Text("no diff: the compile wrote no dumps for it", style="yellow"))
        self.query_one("#passes-diff-scroll").scroll_home(animate=False)

    def diff_message(self, message: str, style: str = "") -> None:
        self.pending = style == "yellow"
        self.query_one("#passes-diff", Static).update(Text(message, style=style))

    def cancelled(self) -> None:
        """Esc: a diff in flight is dropped; Enter asks again."""
        if self.pending:
            self.diff_message("cancelled: Enter on a step asks for its diff again")
