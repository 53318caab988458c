"""The Pallas tab: per kernel the BlockSpec table, the VMEM budget as bars against each chip's
limit, and the grid: step through grid points with the arrow keys and see which block of each
operand that step reads or writes, with the blocks a finding is about marked."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...pallas.analysis import PallasReport
from ...units import fmt_bytes

from ..cells import add_row, findings_table
from ..pallas import blockspec_table

BAR = 30
MAP_LIMIT = (12, 48)  # rows, columns of blocks drawn per operand


def budget_bars(k: PallasReport) -> Table:
    table = Table.grid(padding=(0, 1))
    for _ in range(4):
        table.add_column()
    for b in k.budgets:
        scale = max(b.limit_bytes, b.total_bytes) or 1
        used = round(BAR * b.total_bytes / scale)
        limit = round(BAR * b.limit_bytes / scale)
        bar = Text("█" * min(used, limit), style="green" if b.fits else "red")
        bar.append("█" * max(0, used - limit), style="bold red")
        bar.append("·" * max(0, limit - used), style="dim")
        add_row(table, b.chip, bar, f"{fmt_bytes(b.total_bytes)} of {fmt_bytes(b.limit_bytes)}",
                Text("fits" if b.fits else "DOES NOT FIT", style="green" if b.fits else "bold red"))
    return table


def _flagged(k: PallasReport, operand: str) -> set[tuple[int, ...]]:
    # every finding code that points at blocks carries them as data["blocks"] (see inspector.findings)
    return {tuple(b) for f in k.findings if f.operand == operand and f.data for b in f.data.get("blocks") or []}


def block_map(k: PallasReport, operand: str, current: list[int] | None) -> Text:
    """The operand's blocks over its last two block dims (leading dims at the current block's):
    '■' this step's block, '!' a block a finding is about, '·' the others."""
    op = next(o for o in k.call.operands if o.operand == operand)
    counts = [-(-n // (b or 1)) for n, b in zip(op.array_shape, op.block_shape)]
    if not counts:
        return Text("(scalar)")
    rows, cols = (counts[-2], counts[-1]) if len(counts) >= 2 else (1, counts[-1])
    lead = tuple(current[:-2]) if current and len(counts) >= 2 else ()
    flagged = _flagged(k, operand)
    text = Text()
    for r in range(min(rows, MAP_LIMIT[0])):
        for c in range(min(cols, MAP_LIMIT[1])):
            block = (*lead, r, c) if len(counts) >= 2 else (c,)
            if current is not None and list(block) == list(current):
                text.append("■", style="bold reverse cyan")
            elif block in flagged:
                text.append("!", style="bold red")
            else:
                text.append("·", style="dim")
        text.append(" …\n" if cols > MAP_LIMIT[1] else "\n")
    if rows > MAP_LIMIT[0]:
        text.append(f"… {rows} rows of blocks\n", style="dim")
    return text


class PallasTab(VerticalScroll, can_focus=True):
    BINDINGS = [
        Binding("left", "step(-1)", "step", show=False),
        Binding("right", "step(1)", "step"),
        Binding("shift+left", "step(-10)", show=False),
        Binding("shift+right", "step(10)", show=False),
        Binding("left_square_bracket", "kernel(-1)", "kernel", show=False),
        Binding("right_square_bracket", "kernel(1)", "kernel"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.kernels: list[PallasReport] = []
        self.kernel = 0
        self.step = 0

    def compose(self):
        yield Static("", id="pallas-head")
        yield Static("", id="pallas-grid")
        yield Static("", id="pallas-body")

    def show(self, kernels: list[PallasReport] | None) -> None:
        self.kernels, self.kernel, self.step = kernels or [], 0, 0
        self._redraw()

    def action_step(self, delta: int) -> None:
        self.move(delta)

    def action_kernel(self, delta: int) -> None:
        self.next_kernel(delta)

    def move(self, delta: int) -> None:
        if self.kernels:
            steps = len(self.kernels[self.kernel].walk.trace_points)
            self.step = max(0, min(steps - 1, self.step + delta)) if steps else 0
            self._redraw_grid()

    def next_kernel(self, delta: int) -> None:
        if self.kernels:
            self.kernel = (self.kernel + delta) % len(self.kernels)
            self.step = 0
            self._redraw()

    def _redraw(self) -> None:
        head = self.query_one("#pallas-head", Static)
        body = self.query_one("#pallas-body", Static)
        if not self.kernels:
            head.update(Text("no pallas_call in this function"))
            body.update("")
            self.query_one("#pallas-grid", Static).update("")
            return
        k = self.kernels[self.kernel]
        c = k.call
        axes = ", ".join(f"{n}={g} {s}" for n, g, s in zip(c.grid_names, c.grid, c.dimension_semantics))
        head.update(Text.assemble((f"{c.name}", "bold"), f" ({self.kernel + 1} of {len(self.kernels)}; [ and ] switch)  ",
                                  f"at {c.source}; grid ({axes}), {'?' if c.steps is None else format(c.steps, ',')} steps"))
        body.update(Group(blockspec_table(k), Text("VMEM per chip (estimate, a lower bound)", style="bold"), budget_bars(k),
                          Text(""), findings_table(k.findings)))
        self._redraw_grid()

    def _redraw_grid(self) -> None:
        k = self.kernels[self.kernel]
        w = k.walk
        grid = self.query_one("#pallas-grid", Static)
        if w.skipped or not w.trace_points:
            grid.update(Text(f"grid walk skipped: {w.skipped}", style="yellow"))
            return
        point = w.trace_points[self.step]
        lines = [Text.assemble(("step ", "bold"), f"{self.step + 1} of {len(w.trace_points):,}"
                               + (f" (first {len(w.trace_points):,} of {w.steps:,})" if w.steps > len(w.trace_points) else ""),
                               f"  grid point {tuple(point)}   ← → step, shift+← → by 10")]
        maps = Table.grid(padding=(0, 3))
        ops = [o for o in k.call.operands][:4]
        for _ in ops:
            maps.add_column()
        headers, cells = [], []
        for op in ops:
            block = w.trace_blocks.get(op.operand, [None] * (self.step + 1))[self.step]
            verb = "reads" if op.role == "input" else "writes"
            headers.append(Text(f"{op.operand} {verb} {tuple(block) if block is not None else '?'}", style="bold"))
            cells.append(block_map(k, op.operand, block))
        maps.add_row(*headers)
        maps.add_row(*cells)
        grid.update(Group(*lines, maps))
