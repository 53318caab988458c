"""Moving around the terminal UI: search the text tabs, follow a source line across stages (l),
a finding's evidence (Enter) and back (b), the fusions' sort."""
from __future__ import annotations

import re

from typing import TYPE_CHECKING

from textual.widgets import DataTable, Input, TabbedContent

from ...base.findings import Finding
from .stage_text import StageText
from .tabs import TAB_VIEWS, TEXT_TABS

if TYPE_CHECKING:
    from .host import Host

ALL_TABS = tuple(v.name for v in TAB_VIEWS)

CONTEXT_ACTIONS = ("link", "find", "sort", "back")  # shown in the footer only where they apply: check_action


_OP_KIND = re.compile(r'"?\b([a-z_][a-z0-9_]*\.[a-z0-9_.]+)"?[\s(<{]')


def _op_kind(op: str | None) -> str | None:
    """The kind of an MLIR op's text, e.g. tpu.vector_load (generic or pretty form)."""
    m = _OP_KIND.search(op.split(" = ", 1)[-1] + " ") if op else None
    return m[1] if m else None


def failing_op_row(text: StageText, data: dict, kernel: str | None) -> int | None:
    """The row of the Mosaic text where a Mosaic error's failing op is: a line of the kernel from
    the error's source line, of the op's kind where one is (the text is the module as Pallas
    handed it over; Mosaic may have renamed the op since, vector.load -> tpu.vector_load, so the
    kind's last word counts too). None when the text has no line from that source."""
    source = data.get("source")
    rows = text.rows_with_source(source) if source else []
    header = text.matches(f"// ===== {kernel} ") if kernel else []
    if header:  # that kernel's own lines, where the text has several kernels
        start = header[0][0]
        following = [r for r, _ in text.matches("// ===== ") if r > start]
        rows = [r for r in rows if start < r < (following[0] if following else text.document.line_count)] or rows
    if not rows:
        return None
    kind = _op_kind(data.get("op"))
    kinds = {r: _op_kind(text.document.get_line(r)) or "" for r in rows}
    if kind:
        last_word = kind.rsplit(".", 1)[-1].rsplit("_", 1)[-1]
        for wanted in (lambda k: k == kind, lambda k: k.rsplit(".", 1)[-1].endswith(last_word)):
            found = [r for r in rows if wanted(kinds[r])]
            if found:
                return found[0]
    return rows[0]


def failing_eqn_row(jaxpr: StageText, mosaic: StageText, data: dict, kernel: str | None) -> int | None:
    """For a Mosaic error whose kernel never became a Mosaic module (Pallas failed to lower it):
    the jaxpr's row of the equation it was lowering (its primitive, at the error's source line).
    None when the Mosaic text has the kernel, or the jaxpr no line from that source."""
    source = data.get("source")
    if not source or data.get("source_of") != "eqn" or (kernel and mosaic.matches(f"// ===== {kernel} ")):
        return None
    rows = jaxpr.rows_with_source(source)
    primitive = data.get("primitive")
    named = [r for r in rows if primitive and f"= {primitive}" in jaxpr.document.get_line(r)]
    found = named or rows
    return found[0] if found else None


class Navigator:
    """Moving around, owned by the app (``app.navigator``): the last search, where b goes back to,
    the message a jump's selection event says, the tab l went to the bundles from."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.last_search = ""
        self.back: tuple[str, int] | None = None  # (tab, finding row) to return to after a jump
        self.pending_status: str | None = None  # shown when the jump's selection event arrives
        self.link_from: str | None = None  # the tab l went to the bundles from (l on a bundle goes back there)

    def forget(self) -> None:
        """A new load: b has nowhere to go back to."""
        self.back = None

    def applies(self, action: str) -> bool:
        """Whether a context's key does something here (the footer hides it where not)."""
        if action == "link":
            return self._active_text() is not None
        if action == "find":
            return self._active_text() is not None and bool(self.last_search)
        if action == "sort":
            return self.app.query_one(TabbedContent).active == "fusions"
        return self.back is not None if action == "back" else True

    def _active_text(self) -> StageText | None:
        """The searchable, linked text of the tab on screen: a stage's text, or the bundle listing."""
        active = self.app.query_one(TabbedContent).active
        if not self.app.tabs_ready:
            return None
        if active == "bundles":
            listing = self.app.tabs["bundles"].listing
            return listing if listing.display else None
        return self.app.tabs[active] if active in TEXT_TABS else None

    def search(self) -> None:
        if self._active_text() is None:
            self.app.status("/ searches the text tabs (2 Jaxpr, 3 StableHLO, 4 HLO, 8 Mosaic) and the bundle listing "
                            "(v Bundles, once T has estimated)", "yellow")
            return
        search = self.app.query_one("#search", Input)
        search.display = True
        search.focus()

    def submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.last_search = event.value
            self.app.refresh_bindings()
            event.input.display = False
            self.app.focus_tab(self.app.query_one(TabbedContent).active)
            self.find(True)

    def find(self, forward: bool) -> None:
        text = self._active_text()
        if text is None or not self.last_search:
            return
        before = text.selection
        found = text.find(self.last_search, forward)
        if found:
            where = self._line_source(text)
            message = f"/{self.last_search}: match {found[0]:,} of {found[1]:,} (n next, N previous)" + (
                f"; {where}" if where else "")
            self.app.status(message, of_tab=True)
            if text.selection != before:  # the selection event that follows would say the line's source alone
                self.pending_status = message
        else:
            self.app.status(f"/{self.last_search}: not found in {text.stage}", "yellow", of_tab=True)
        text.focus()

    def selection_changed(self, event) -> None:
        text = event.text_area
        if self.pending_status is not None:  # a jump (l, Enter on a finding) said where it went
            self.app.status(self.pending_status, of_tab=True)
            self.pending_status = None
            return
        where = self._line_source(text)
        if where:
            self.app.status(where, of_tab=True)

    def _line_source(self, text) -> str:
        """Where the line under the cursor comes from, and how many lines of the other stages (and
        bundles) do."""
        if not isinstance(text, StageText):
            return ""
        row = text.cursor_location[0]
        source = text.source_of(row)
        if not source:
            return ""
        others = [f"{t.stage} {len(t.rows_with_source(source))}" for t in (self.app.tabs[name] for name in TEXT_TABS)
                  if t is not text]
        if text.stage == "bundles":
            listing = self.app.tabs["bundles"].listing
            here = f"bundle {text.document.get_line(row).split(' ', 1)[0]} comes from {source}"
            return f"{here}; bundles from it: {len(listing.rows_with_source(source)):,}; {', '.join(others)} (l goes there)"
        if self.app.tabs["bundles"].listing.display:
            others.append(f"bundles {self.app.tabs['bundles'].bundles_from(source):,}")
        return (f"{text.stage} line {row + 1} comes from {source}; lines from it: "
                f"{', '.join(others)} (l jumps there)")

    def link(self) -> None:
        """A kernel line (jaxpr, Mosaic) with bundles: its first bundle, and from a bundle back to
        the stage l came from (else the jaxpr, else the Mosaic text). Any other line: the next
        stage's first line from the same source line (jaxpr, StableHLO, HLO, Mosaic and round)."""
        text = self._active_text()
        if text is None:
            return
        source = text.source_of(text.cursor_location[0])
        if not source:
            self.app.status("this line has no source location", "yellow")
            return
        if text.stage != "bundles":
            where = self.app.tabs["bundles"].go_to_source(source) if self.app.tabs["bundles"].listing.display else None
            if where:
                self.link_from = text.stage
                self.last_search = source  # n and N step through the line's other bundles
                self.app.refresh_bindings()
                self.app.action_tab("bundles")
                self._jumped(self.app.tabs["bundles"].listing, f"bundles: {where} (n, N: the others; l comes back)")
                return
        stages = ("jaxpr", "stablehlo", "hlo", "mosaic")
        if text.stage == "bundles":
            order = list(dict.fromkeys(s for s in (self.link_from, "jaxpr", "mosaic", "stablehlo", "hlo") if s))
        else:
            at = stages.index(text.stage) + 1
            order = [t for t in stages[at:] + stages[:at] if t != text.stage] + [text.stage]  # the next stage first
        for stage in order:
            rows = self.app.tabs[stage].rows_with_source(source)
            if stage == text.stage:  # the last resort: this stage's next line from there, never this one
                here = text.cursor_location[0]
                rows = [r for r in rows if r > here] + [r for r in rows if r < here]
            if rows:
                self.app.action_tab(stage)
                target = self.app.tabs[stage]
                target.go_to_row(rows[0])
                self._jumped(target, f"{stage} line {rows[0] + 1}: from {source}")
                return
        self.app.status(f"no other stage has a line from {source}", "yellow")

    def _jumped(self, target: StageText, message: str) -> None:
        self.pending_status = message  # the selection event that follows says it (not the line's source alone)
        target.focus()
        self.app.status(message)

    def finding_selected(self, event: DataTable.RowSelected) -> None:
        if self.app.report is not None:
            assert event.row_key.value is not None  # the findings' rows are keyed by their index
            row = int(event.row_key.value)
            self.show_evidence(self.app.tabs["overview"].findings[row], row)

    def show_evidence(self, finding: Finding, row: int | None = None) -> None:
        """Enter on a finding: its view, at the thing it names (Pallas: the kernel, grid step and
        operand; Fusions: the kernel; HLO: the line). b comes back."""
        view = finding.view if finding.view in ALL_TABS else "overview"
        kernels = [k.call.name for k in (self.app.report.pallas or [])] if self.app.report else []
        if view == "overview" and finding.kernel and any(finding.kernel.startswith(n) for n in kernels):
            view = "pallas"  # a compile that ran out of VMEM in a Pallas kernel: its budget is there
        if view == "overview":
            self.app.status(f"{finding.code}: the evidence is the message itself (below the table)")
            return
        data = finding.data or {}
        eqn = failing_eqn_row(self.app.tabs["jaxpr"], self.app.tabs["mosaic"], data, finding.kernel) if view == "mosaic" else None
        if eqn is not None:  # Pallas failed to lower the kernel: no Mosaic op, the jaxpr equation it was on
            view = "jaxpr"
        self.back = ("overview", row or 0)
        self.app.refresh_bindings()
        self.app.action_tab(view)
        where = ""
        if view == "pallas":
            where = self.app.tabs["pallas"].show_finding(finding)
        elif view == "fusions" and finding.kernel:
            where = self.app.tabs["fusions"].select_kernel(finding.kernel)
        elif eqn is not None:
            where = (f"jaxpr line {eqn + 1}, the equation Pallas failed to lower, from {data['source']} "
                     "(no Mosaic module: its lowering failed)")
            self.pending_status = f"{finding.code}: {where} (b goes back)"
            self.app.tabs["jaxpr"].go_to_row(eqn)
        elif view in TEXT_TABS:
            text = self.app.tabs[view]
            # a Mosaic error names the failing op and its source line: the op's line in the text
            row = failing_op_row(text, data, finding.kernel) if view == "mosaic" else None
            needles = [data.get("op"), finding.kernel, "custom-call" if finding.code == "pallas-interpreted" else None]
            hits: list[tuple[int, int]] = [(row, 0)] if row is not None else next(
                (h for n in needles if n and (h := text.matches(n))), [])
            if hits:
                op = f" ({_op_kind(data.get('op'))} failed)" if row is not None and _op_kind(data.get("op")) else ""
                where = f"line {hits[0][0] + 1}" + (f", from {data['source']}" if data.get("source") else "") + op
                self.pending_status = f"{finding.code}: {view} {where} (b goes back)"
                text.go_to_row(hits[0][0])
            elif data.get("source"):
                where = f"the source line is {data['source']}"
        self.app.status(f"{finding.code}: {where or view} (b goes back)")

    def go_back(self) -> None:
        if self.back is None:
            return
        tab, row = self.back
        self.back = None
        self.app.refresh_bindings()
        self.app.action_tab(tab)
        table = self.app.query_one("#findings", DataTable)
        if row < table.row_count:
            table.move_cursor(row=row)

    def sort(self) -> None:
        if self.app.query_one(TabbedContent).active == "fusions":
            self.app.tabs["fusions"].cycle_sort()
