"""The overview tab: the function, inputs, target and key figures, the diff verdict, and every
finding, most severe first, with the selected finding's whole message in a pane below; Enter on a
finding jumps to its evidence."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from ...base.findings import Finding
from ...base.units import count

from ..cells import SEVERITY_STYLE, allocation_lines
from ..fix import fix_lines
from ..printer import overview

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...base.fix_model import FixResult
    from ...results.report import Report

PLACEHOLDER = "compiling… (the other tabs fill in when it is done; Esc cancels)"


def first_line(message: str, width: int = 200) -> str:
    line = message.splitlines()[0] if message else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def finding_detail(f: Finding, fixes: FixResult | None = None):
    """Everything a finding says: the whole message, the compiler's figures when it gave them
    (the printer's findings table), the fixes that answer it (after F), and where its evidence is."""
    where = ", ".join(f"{k} {v}" for k, v in (("kernel", f.kernel), ("operand", f.operand)) if v)
    head = Text.assemble((f.severity, SEVERITY_STYLE.get(f.severity, "")), " ", (f.code, "bold"),
                         f"  ({where})" if where else "")
    answers = fix_lines(f, fixes)
    if answers:
        answers.append(Text("A applies the first (compiles again; the file is unchanged)", style="dim"))
    # after F the fixes come first: the pane is a few lines at 80x24, and they are the news
    body = Group(*answers, Text(f.message), *allocation_lines(f))
    if f.view and f.view != "overview":
        hint = Text(f"Enter: show the evidence ({f.view}); b comes back", style="dim")
    elif f.kernel:
        hint = Text(f"Enter: the kernel {f.kernel} where the Pallas tab has it; b comes back", style="dim")
    else:
        hint = Text("the evidence is the message itself", style="dim")
    return Group(head, body, hint)


class OverviewTab(Vertical):
    FOCUS = "#findings"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.findings: list[Finding] = []
        self.fixes: FixResult | None = None  # after F: the fixes shown under the findings they answer
        self.diff_verdict: str | None = None
        self._width = 0  # what the messages were cut to

    def compose(self):
        with VerticalScroll(id="overview-scroll"):
            # with --baseline, what moved leads: the scroll shows its top at first sight
            yield Static("", id="overview-baseline")
            yield Static("", id="overview-diff")
            yield Static(Text(PLACEHOLDER), id="overview-panel")
        yield Static("", id="findings-title")
        yield DataTable(id="findings", cursor_type="row")
        yield Static("", id="finding-detail")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("severity", "code", "message")
        self._show_findings([])

    def show(self, report: Report) -> None:
        self.query_one("#overview-panel", Static).update(overview(report, timings=False, findings=False))
        self.show_diff(self.diff_verdict)
        self.fixes = report.fixes
        self._show_findings(report.findings)
        self.show_baseline(report)

    def show_baseline(self, report: Report) -> None:
        """With --baseline FILE: this target on this chip against the file's figures (what moved)."""
        baseline = getattr(self.app, "baseline", None)
        shown = self.query_one("#overview-baseline", Static)
        shown.display = baseline is not None  # an empty Static is still a blank line, at the top
        if baseline is None:
            shown.update("")
            return
        from ...baseline.work import against_report
        from ..baseline import baseline_panel

        app: Any = self.app  # InspectorApp, whose session names the target
        session = app.session
        try:
            found = against_report(baseline, report, session.spec, list(session.sets), getattr(app, "tolerances", None))
        except Exception as err:  # a file that passed the loader's checks but not the comparison's: said, not a crash
            found = f"baseline {baseline.path}: cannot compare with it ({type(err).__name__}: {err}); o sets another"
        self.query_one("#overview-baseline", Static).update(baseline_panel(found, baseline.path))

    def show_lowered(self, report: Report) -> None:
        """The lowering is done, the compile runs: the function, inputs, target and the stages so
        far; the findings (they need the compile) are announced where they will be (``progress``)."""
        self.query_one("#overview-panel", Static).update(overview(report, timings=False, findings=False))
        self.show_diff(None)

    def waiting(self, text: str, layout: bool = True) -> None:
        """Before the lowering is done: what runs, in place of the overview."""
        self.query_one("#overview-panel", Static).update(Text(text), layout=layout)

    def progress(self, text: str, style: str = "yellow", layout: bool = True) -> None:
        """While the compile runs: what it is at and for how long, where the findings will be."""
        self.query_one("#findings-title", Static).update(Text(text, style=style), layout=layout)

    def show_diff(self, verdict: str | None) -> None:
        self.diff_verdict = verdict
        text = (Text.assemble(("diff: ", "bold"), (verdict, "bold red" if verdict.startswith("WRONG") else "green"))
                if verdict else Text("diff: not run (press d to run the function against its reference)", style="dim"))
        self.query_one("#overview-diff", Static).update(text)

    def _show_findings(self, findings: list[Finding]) -> None:
        self.findings = list(findings)
        table = self.query_one(DataTable)
        table.clear()
        # the table fits the screen (no sideways scrolling): the whole message is in the pane below
        width = self._width = self._message_width()
        for i, f in enumerate(self.findings):
            # after F: the finding's own message, its top fix's number beside it (the fix itself is in the pane below)
            answers = fix_lines(f, self.fixes)
            fix = "  " + " ".join(answers[0].plain.split()[:2]) if answers else ""  # "  fix #1"
            message = Text(first_line(f.message, width - len(fix)))
            message.append(fix, style="green")
            table.add_row(Text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")), f.code, message, key=str(i))
        errors = sum(f.severity == "error" for f in self.findings)
        title = (Text.assemble((count(len(self.findings), "finding"), "bold"), f" ({count(errors, 'error')})" if errors else "",
                               "; Enter shows the evidence", style="")
                 if self.findings else Text("no findings", style="green"))
        self.query_one("#findings-title", Static).update(title)
        table.display = bool(self.findings)
        self.query_one("#finding-detail", Static).display = bool(self.findings)
        if self.findings:
            self.show_detail(0)

    def on_resize(self, event) -> None:
        """The messages are cut to the width: a wider or narrower terminal cuts them again (the row stays)."""
        if not self.findings or self._width == self._message_width():
            return
        row = self.query_one(DataTable).cursor_row
        self._show_findings(self.findings)
        self.query_one(DataTable).move_cursor(row=row)

    def _message_width(self) -> int:
        codes = max((len(f.code) for f in self.findings), default=4)
        return max(20, (self.app.size.width or 100) - codes - 16)

    def show_detail(self, index: int) -> None:
        if 0 <= index < len(self.findings):
            self.query_one("#finding-detail", Static).update(finding_detail(self.findings[index], self.fixes))

    def selected_finding(self) -> Finding | None:
        """The finding under the table's cursor (A applies its top fix)."""
        row = self.query_one(DataTable).cursor_row
        return self.findings[row] if 0 <= row < len(self.findings) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value is not None:
            self.show_detail(int(event.row_key.value))

    def reset(self, message: str = PLACEHOLDER) -> None:
        """Before a new compile: nothing of the previous target stays on screen."""
        self.query_one("#overview-panel", Static).update(Text(message))
        self.query_one("#overview-diff", Static).update("")
        self.query_one("#overview-baseline", Static).update("")
        self.query_one("#overview-baseline", Static).display = False
        self.diff_verdict = None
        self.fixes = None
        self._show_findings([])
        self.query_one("#findings-title", Static).update("")

    def show_error(self, message: str) -> None:
        self.query_one("#overview-panel", Static).update(Text(message, style="bold red"))

