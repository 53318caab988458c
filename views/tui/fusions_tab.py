"""The fusions tab: a sortable table of kernels, the selected kernel's ops and source lines, and
the materialized intermediates."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from ...base.units import fmt_bytes, fmt_count

from ..fusions import KERNEL_COLUMNS, SORT_KEYS, intermediates_table, table_columns

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ...hlo.fusions import FusionAnalysis
    from ...results.report import Report

SORTS = ("order", "bytes", "flops", "time")


class FusionsTab(Vertical):
    FOCUS = "#fusions-table"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.analysis: FusionAnalysis | None = None
        self.sort = "order"

    def compose(self) -> ComposeResult:
        yield Static("", id="fusions-summary")
        yield DataTable(id="fusions-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="fusions-detail"):
            yield Static("", id="fusions-kernel")
            yield Static("", id="fusions-intermediates")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("#", *(col.label for col in KERNEL_COLUMNS))

    def reset(self, message: str) -> None:
        self.show_analysis(None, message)

    def show(self, report: Report) -> None:
        error = report.stages.compile_error
        self.show_analysis(report.fusions, error.headline if error else "not compiled")

    def show_analysis(self, analysis: FusionAnalysis | None, why_not: str = "") -> None:
        self.analysis = analysis
        summary = self.query_one("#fusions-summary", Static)
        if analysis is None:
            summary.update(Text(f"no kernels: {why_not}", style="yellow"))
            self.query_one(DataTable).clear()
            self.query_one("#fusions-kernel", Static).update("")
            self.query_one("#fusions-intermediates", Static).update("")
            return
        summary.update(Text(f"{len(analysis.kernels)} kernels, HBM {fmt_bytes(analysis.totals['hbm_bytes'])}, sorted by "
                            f"{self.sort} (press s to change); {analysis.agreement.get('note')}"))
        self.query_one("#fusions-intermediates", Static).update(intermediates_table(analysis))
        self._fill()

    def cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        if self.analysis is not None:
            self.show_analysis(self.analysis)

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        assert self.analysis is not None  # called by show_analysis with one
        columns = table_columns(self.analysis)  # with --time or a measurement, their columns too
        if [str(c.label) for c in table.columns.values()][1:] != [c.label for c in columns]:
            table.clear(columns=True)
            table.add_columns("#", *(col.label for col in columns))
        else:
            table.clear()
        kernels = list(enumerate(self.analysis.kernels))
        if sort_key := SORT_KEYS.get(self.sort):
            kernels.sort(key=lambda ik: sort_key(ik[1]))
        for i, k in kernels:
            table.add_row(str(i), *(col.cell(k) for col in columns), key=str(i))
        if kernels:
            self._detail(kernels[0][0])

    def select_kernel(self, name: str) -> str:
        """Put the cursor on the kernel called ``name`` (or whose name starts with it); says which."""
        if self.analysis is None:
            return ""
        names = [k.name for k in self.analysis.kernels]
        index = next((i for i, n in enumerate(names) if n == name), None)
        if index is None:
            index = next((i for i, n in enumerate(names) if n.startswith(name) or name.startswith(n)), None)
        if index is None:
            return f"no kernel named {name}"
        table = self.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(str(index)))
        self._detail(index)
        return f"kernel {names[index]}"

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.analysis is not None and event.row_key is not None and event.row_key.value is not None:
            self._detail(int(event.row_key.value))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        label = str(event.label)
        wanted = {"HBM r+w": "bytes", "flops": "flops", "time": "time", "#": "order"}.get(label)
        if wanted:
            self.sort = wanted
            self.show_analysis(self.analysis)

    def _detail(self, index: int) -> None:
        assert self.analysis is not None  # a kernel of it is shown
        k = self.analysis.kernels[index]
        ops = ", ".join(f"{op} x{n}" for op, n in k.ops.items()) or "-"
        text = Text.assemble((k.name, "bold"), f"  {k.kind}\n", f"ops: {ops}\n",
                             f"sources: {', '.join(k.sources) or k.source or '-'}\n", f"op_name: {k.op_name or '-'}\n",
                             f"reads {fmt_bytes(k.hbm_bytes_read)} from HBM, writes {fmt_bytes(k.hbm_bytes_written)}; "
                             f"{fmt_count(k.flops)} flops, {fmt_count(k.transcendentals)} transcendentals"
                             + (f"; XLA estimates {fmt_count(k.compiler_cycles)} cycles" if k.compiler_cycles else "")
                             + (f"\nmade by pass {k.made_by} (the Passes tab has its diff)" if k.made_by else "")
                             + (f"\n{k.note}" if k.note else ""))
        self.query_one("#fusions-kernel", Static).update(text)
