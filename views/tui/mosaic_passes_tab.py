"""The Mosaic passes tab: each pass Mosaic ran on a Pallas kernel (what it changed, ops by kind),
stepped through as the Passes tab steps through XLA's: Enter on a pass shows its diff below the
list (the worker compiles once more with Mosaic's dumps and keeps them: the next diffs are read).
Below the list until then: the relayouts per source line. ``[`` and ``]`` switch kernels; M
compiles with the dumps."""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.console import Group, RenderableType
from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from ..mosaic_passes import MOSAIC_PASS_COLUMNS, kernel_title, mosaic_pass_cells, relayouts_table
from ..passes import diff_text

if TYPE_CHECKING:  # types only: the UI paints before the analyses are imported
    from ...hlo.passes import PassDiff
    from ...mosaic.dumps import KernelPasses, MosaicPass
    from ...mosaic.passes import MosaicPasses
    from ...results.report import Report
    from .app_base import AppBase

COMPILING = "compiling with Mosaic's pass dumps…"


class MosaicPassesTab(Vertical):
    FOCUS = "#mosaic-passes-table"
    BINDINGS = [
        Binding("left_square_bracket", "kernel(-1)", "kernel", show=False),
        Binding("right_square_bracket", "kernel(1)", "kernel"),
    ]
    DEFAULT_CSS = """
    MosaicPassesTab { height: 1fr; }
    #mosaic-passes-title { height: auto; padding: 0 1; background: $boost; }
    #mosaic-passes-table { height: auto; max-height: 50%; }
    #mosaic-passes-detail-scroll { height: 1fr; border-top: solid $primary; }
    #mosaic-passes-detail { padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.result: MosaicPasses | None = None
        self.kernel = 0
        self.diffs: dict[tuple[int, int], PassDiff | None] = {}  # (kernel, pass) -> its diff, for this result
        self.pending = False  # a pass's diff is being compiled

    def compose(self):
        yield Static("", id="mosaic-passes-title")
        yield DataTable(id="mosaic-passes-table", cursor_type="row")
        with VerticalScroll(id="mosaic-passes-detail-scroll"):
            yield Static("", id="mosaic-passes-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for header, right in MOSAIC_PASS_COLUMNS:
            table.add_column(Text(header, justify="right" if right else "left"), key=header)
        self._message("")

    def reset(self, message: str) -> None:
        self._message(COMPILING if cast("AppBase", self.app).session.mosaic_passes else message)

    def show(self, report: Report) -> None:
        if report.mosaic_passes is not None:
            self.show_result(report.mosaic_passes)
        elif not report.chip.is_tpu:
            self._message(f"no Mosaic passes on {report.chip.name}: Mosaic compiles Pallas kernels for a TPU "
                          "(t picks a TPU target)")
        elif cast("AppBase", self.app).session.mosaic_passes:
            error = report.stages.compile_error
            self._message(f"no Mosaic passes: {error.headline if error else 'no Pallas TPU kernel was compiled'}")
        else:
            self._message("press M to compile with Mosaic's pass dumps: each pass of each Pallas kernel, what it "
                          "changed, the relayouts; then Enter shows a pass's diff")

    def progress(self, text: str) -> None:
        """While M's compile runs: what runs and for how long (the loading ticker), in place of the title."""
        self.query_one("#mosaic-passes-title", Static).update(Text(text, style="yellow"))

    def _message(self, message: str) -> None:
        self.result, self.kernel, self.diffs, self.pending = None, 0, {}, False
        self.query_one("#mosaic-passes-title", Static).update(Text(message, style="dim" if "press M" in message else ""))
        self.query_one(DataTable).clear()
        self.query_one(DataTable).display = False
        self.query_one("#mosaic-passes-detail", Static).update("")

    def show_result(self, result: MosaicPasses) -> None:
        self.result, self.kernel, self.diffs, self.pending = result, 0, {}, False
        if not result.kernels:
            self.query_one("#mosaic-passes-title", Static).update(Text("no Mosaic pass dumps", style="yellow"))
            self.query_one(DataTable).display = False
            self.query_one("#mosaic-passes-detail", Static).update(Group(*self._notes()))
            return
        self._draw()

    def _notes(self) -> list[RenderableType]:
        assert self.result is not None
        notes: list[RenderableType] = []
        if self.result.compile_error:
            notes.append(Text(f"the compile failed: {self.result.compile_error}", style="red"))
        notes += [Text(f"{f.severity}  {f.message}", style="dim") for f in self.result.findings]
        return notes

    @property
    def current(self) -> KernelPasses | None:
        return self.result.kernels[self.kernel] if self.result and self.result.kernels else None

    def action_kernel(self, delta: int) -> None:
        if self.result and self.result.kernels:
            self.kernel = (self.kernel + delta) % len(self.result.kernels)
            self._draw()

    def _draw(self) -> None:
        k = self.current
        assert k is not None and self.result is not None
        self.query_one("#mosaic-passes-title", Static).update(Text.assemble(
            (kernel_title(k), "bold"), f"  (kernel {self.kernel + 1} of {len(self.result.kernels)}"
            + ("; [ and ] switch" if len(self.result.kernels) > 1 else "") + "); Enter shows a pass's diff"))
        table = self.query_one(DataTable)
        table.clear()
        for p in k.passes:
            table.add_row(*mosaic_pass_cells(p), key=str(p.index))
        table.display = True
        self.show_overview()

    def show_overview(self) -> None:
        """Below the list: the relayouts per source line, and what could not be read."""
        k = self.current
        assert k is not None
        parts: list[RenderableType] = [Text("Enter on a pass shows its diff here", style="dim")]
        if k.relayouts is not None:
            parts.append(relayouts_table(k))
        self.query_one("#mosaic-passes-detail", Static).update(Group(*parts, *self._notes()))

    def pass_at(self, row: int) -> tuple[int, KernelPasses, MosaicPass] | None:
        """(kernel index, kernel, pass) of the list's row, or None."""
        k = self.current
        return (self.kernel, k, k.passes[row]) if k is not None and 0 <= row < len(k.passes) else None

    def show_diff(self, kernel: int, index: int, diff: PassDiff | None) -> None:
        self.pending = False
        self.diffs[(kernel, index)] = diff
        if kernel != self.kernel:
            return  # another kernel is on screen now; kept for when it comes back
        self.query_one("#mosaic-passes-detail", Static).update(
            diff_text(diff, colour=True) if diff else Text("no diff: Mosaic wrote no dumps for it", style="yellow"))
        self.query_one("#mosaic-passes-detail-scroll").scroll_home(animate=False)

    def diff_message(self, message: str, style: str = "") -> None:
        self.pending = style == "yellow"
        self.query_one("#mosaic-passes-detail", Static).update(Text(message, style=style))

    def cancelled(self) -> None:
        """Esc: a diff in flight is dropped; Enter asks again."""
        if self.pending:
            self.diff_message("cancelled: Enter on a pass asks for its diff again")
