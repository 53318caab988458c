"""The Pallas tab: per kernel the BlockSpec table, the VMEM budget as bars against each chip's
limit (the compiler's own figure beside the estimate when the report has one), the suggested
pl.CostEstimate, and the grid: step through grid points and see which block of every operand
that step reads or writes, with the blocks a finding is about marked."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.columns import Columns
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Input, Static

from ...base.findings import Finding
from ...base.units import fmt_bytes

from ..cells import add_row, findings_table
from ..pallas import blockspec_table, estimate_kind, gpu_kernels_table, pipeline_table, unread_calls

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from collections.abc import Sequence

    from ...pallas.analysis import PallasReport
    from ...results.report import Report

BAR = 30
MAP_LIMIT = (12, 48)  # rows, columns of blocks drawn per operand
LEGEND = Text.assemble(("■", "bold reverse cyan"), " this step's block  ", ("!", "bold red"),
                       " named by a finding  ", ("·", "dim"), " other blocks")


def cost_estimate_text(k: PallasReport) -> str:
    """The suggested CostEstimate as code to paste into the pallas_call."""
    if k.cost_estimate is None:
        return "none to suggest: the walk could not follow the kernel"
    return "pl.CostEstimate(" + ", ".join(f"{key}={v}" for key, v in k.cost_estimate.items()) + ")"


def budget_bars(k: PallasReport, compiler: dict[str, int] | None = None) -> Table:
    """One bar per chip; ``compiler`` maps a chip to the compiler's own VMEM figure for this kernel."""
    compiler = compiler or {}
    table = Table.grid(padding=(0, 1))
    for _ in range(5):
        table.add_column()
    for b in k.budgets:
        scale = max(b.limit_bytes, b.total_bytes) or 1
        used = round(BAR * b.total_bytes / scale)
        limit = round(BAR * b.limit_bytes / scale)
        colour = {"fits": "green", "over": "red"}.get(b.verdict, "yellow")
        bar = Text("█" * min(used, limit), style=colour)
        bar.append("█" * max(0, used - limit), style="bold red")
        bar.append("·" * max(0, limit - used), style="dim")
        figure = compiler.get(b.chip)
        add_row(table, b.chip, bar, f"{fmt_bytes(b.total_bytes)} of {fmt_bytes(b.limit_bytes)}",
                Text({"fits": "fits", "over": "DOES NOT FIT"}.get(b.verdict, "MAY NOT FIT"), style={"fits": "green", "over": "bold red"}.get(b.verdict, "bold yellow")),
                Text(f"compiler: {fmt_bytes(figure)}", style="bold") if figure is not None else "")
    return table


def _block_index(block) -> tuple[int, ...] | None:
    return tuple(int(x) for x in block) if isinstance(block, (list, tuple)) else None


def flagged(k: PallasReport, operand: str):
    """A predicate over block indices: is this block one a finding about ``operand`` names?
    Each finding code carries its own data shape (see inspector/pallas/grid_walk.py)."""
    exact: set[tuple[int, ...]] = set()
    rules = []
    for f in k.findings:
        if f.operand != operand or not isinstance(f.data, dict):
            continue
        d = f.data
        if isinstance(d.get("blocks"), list):  # every code that names blocks (inspector.base.findings)
            exact.update(b for b in map(_block_index, d["blocks"]) if b is not None)
        if f.code == "partial-block" and all(isinstance(d.get(x), int) for x in ("dim", "array_size", "block_size")) and d["block_size"]:
            dim, last = d["dim"], -(-d["array_size"] // d["block_size"]) - 1
            rules.append(lambda b, dim=dim, last=last: len(b) > dim and b[dim] == last)
        if f.code == "parallel-axis-race" and isinstance(d.get("axis"), int):
            exact.update(raced_blocks(k, operand, d["axis"]))
    return lambda block: block in exact or any(rule(block) for rule in rules)


def raced_blocks(k: PallasReport, operand: str, axis: int) -> set[tuple[int, ...]]:
    """Blocks of ``operand`` that steps with different indices on ``axis`` write (in the walked steps)."""
    seen: dict[tuple[int, ...], int] = {}
    raced = set()
    for point, block in zip(k.walk.trace_points, k.walk.trace_blocks.get(operand, [])):
        b = tuple(block)
        if axis < len(point):
            if b in seen and seen[b] != point[axis]:
                raced.add(b)
            seen.setdefault(b, point[axis])
    return raced


def evidence_step(k: PallasReport, f: Finding) -> int | None:
    """The grid step (an index into the walk's trace) that shows ``f`` best, when one does."""
    w, d = k.walk, f.data if isinstance(f.data, dict) else {}
    blocks = [tuple(b) for b in w.trace_blocks.get(f.operand or "", [])]
    points = [tuple(p) for p in w.trace_points]
    if f.code == "block-out-of-bounds" and isinstance(d.get("grid_point"), list):
        point = tuple(d["grid_point"])
        return points.index(point) if point in points else None
    if f.code == "output-revisit" and isinstance(d.get("blocks"), list) and d["blocks"]:
        target = _block_index(d["blocks"][0])
        runs = [s for s, b in enumerate(blocks) if b == target and (s == 0 or blocks[s - 1] != target)]
        return runs[1] if len(runs) > 1 else (runs[0] if runs else None)
    if f.code == "parallel-axis-race" and isinstance(d.get("axis"), int):
        seen: dict[tuple[int, ...], int] = {}
        for s, (p, b) in enumerate(zip(points, blocks)):
            if b in seen and seen[b] != p[d["axis"]]:
                return s
            seen.setdefault(b, p[d["axis"]])
        return None
    if f.code == "partial-block" and isinstance(d.get("dim"), int) and d.get("block_size"):
        last = -(-d["array_size"] // d["block_size"]) - 1
        return next((s for s, b in enumerate(blocks) if len(b) > d["dim"] and b[d["dim"]] == last), None)
    return None


def block_map(k: PallasReport, operand: str, current: list[int] | None) -> Text:
    """The operand's blocks over its last two block dims (leading dims at the current block's):
    '■' this step's block, '!' a block a finding is about, '·' the others."""
    op = next(o for o in k.call.operands if o.operand == operand)
    counts = [-(-n // (b or 1)) for n, b in zip(op.array_shape, op.block_shape)]
    if not counts:
        return Text("(scalar)")
    rows, cols = (counts[-2], counts[-1]) if len(counts) >= 2 else (1, counts[-1])
    lead = tuple(current[:-2]) if current and len(counts) >= 2 else (0,) * max(0, len(counts) - 2)
    is_flagged = flagged(k, operand)
    text = Text()
    for r in range(min(rows, MAP_LIMIT[0])):
        for c in range(min(cols, MAP_LIMIT[1])):
            block = (*lead, r, c) if len(counts) >= 2 else (c,)
            if current is not None and list(block) == list(current):
                text.append("■", style="bold reverse red" if is_flagged(block) else "bold reverse cyan")
            elif is_flagged(block):
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
        Binding("home", "step_to(0)", "first step", show=False),
        Binding("end", "step_to(-1)", "last step", show=False),
        Binding("g", "goto", "go to step"),
        Binding("y", "copy_cost", "copy CostEstimate"),  # y: c is compare, everywhere
        Binding("left_square_bracket", "kernel(-1)", "kernel", show=False),
        Binding("right_square_bracket", "kernel(1)", "kernel"),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kernels: list[PallasReport] = []
        self.unread: list[Finding] = []
        self.compiler: dict[str, dict[str, int]] = {}
        self.kernel = 0
        self.step = 0
        self.focus_operand: str | None = None
        self.empty = "no pallas_call in this function"  # what an empty tab says
        self.gpu_table: Table | None = None  # a GPU target's kernels as XLA:GPU launched them (registers, spills)

    def compose(self):
        yield Static("", id="pallas-head")
        yield Input(placeholder="go to step: a number (1-based) or a grid point such as 0,2,3; Enter goes, Esc closes",
                    id="pallas-goto")
        yield Static("", id="pallas-grid")
        yield Static("", id="pallas-body")

    def on_mount(self) -> None:
        self.query_one("#pallas-goto", Input).display = False

    def reset(self, message: str) -> None:
        self.gpu_table = None
        self.show_kernels([], empty=message)

    def show(self, report: Report) -> None:
        compiler = {name: {report.chip.name: used} for name, used in report.compiler_vmem.items()}
        self.gpu_table = gpu_kernels_table(report.gpu_kernels, report.chip.name) if report.gpu_kernels else None
        self.show_kernels(report.pallas, compiler, unread_calls(report.findings))

    def show_kernels(self, kernels: list[PallasReport] | None, compiler: dict[str, dict[str, int]] | None = None,
             unread: Sequence[Finding] = (), empty: str = "no pallas_call in this function") -> None:
        """``compiler``: per kernel name, per chip, the compiler's own VMEM figure. ``unread``: the
        pallas_calls the analysis could not read (said where the tab would be empty); ``empty``:
        what to say when there is no kernel (none in the function, or none yet)."""
        self.kernels, self.kernel, self.step, self.focus_operand = kernels or [], 0, 0, None
        self.unread = list(unread)
        self.compiler = compiler or {}
        self.empty = empty
        self._redraw()

    @property
    def steps(self) -> int:
        return len(self.kernels[self.kernel].walk.trace_points) if self.kernels else 0

    def action_step(self, delta: int) -> None:
        self.move(delta)

    def action_step_to(self, step: int) -> None:
        if self.kernels:
            self.go_to_step(step if step >= 0 else self.steps - 1)

    def action_kernel(self, delta: int) -> None:
        self.next_kernel(delta)

    def action_goto(self) -> None:
        if self.kernels and self.steps:
            field = self.query_one("#pallas-goto", Input)
            field.display = True
            field.value = ""
            field.focus()

    def action_copy_cost(self) -> None:
        if self.kernels:
            text = cost_estimate_text(self.kernels[self.kernel])
            self.app.copy_to_clipboard(text)
            self.notify(f"copied {text}")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "pallas-goto":
            return
        event.stop()
        event.input.display = False
        self.focus()
        value = event.value.strip().strip("()")
        points = self.kernels[self.kernel].walk.trace_points if self.kernels else []
        try:
            numbers = [int(x) for x in value.replace(",", " ").split()]
        except ValueError:
            numbers = []
        if len(numbers) == 1 and "," not in event.value:
            step = numbers[0] - 1
        elif numbers and numbers in points:
            step = points.index(numbers)
        else:
            self.notify(f"no step {event.value!r}: give 1 to {self.steps:,} or a grid point of the walked steps",
                        severity="warning")
            return
        if not 0 <= step < self.steps:
            self.notify(f"step {step + 1} is outside 1 to {self.steps:,}", severity="warning")
            return
        self.go_to_step(step)

    def close_goto(self) -> bool:
        """Esc: close the go-to field if it is open; says whether it was."""
        field = self.query_one("#pallas-goto", Input)
        if not field.display:
            return False
        field.display = False
        self.focus()
        return True

    def move(self, delta: int) -> None:
        if self.kernels:
            self.go_to_step(self.step + delta)

    def go_to_step(self, step: int) -> None:
        self.step = max(0, min(self.steps - 1, step)) if self.steps else 0
        self._redraw_grid()

    def next_kernel(self, delta: int) -> None:
        if self.kernels:
            self.kernel = (self.kernel + delta) % len(self.kernels)
            self.step, self.focus_operand = 0, None
            self._redraw()

    def show_finding(self, f: Finding) -> str:
        """Go to the kernel, grid step and operand ``f`` is about; says what it showed."""
        names = [k.call.name for k in self.kernels]
        if f.kernel in names:
            self.kernel = names.index(f.kernel)
        elif f.kernel and any(f.kernel.startswith(n) for n in names):  # an HLO name such as kernel.1
            self.kernel = next(i for i, n in enumerate(names) if f.kernel.startswith(n))
        elif not self.kernels:
            return "no pallas_call to show"
        k = self.kernels[self.kernel]
        self.focus_operand = f.operand if f.operand in {o.operand for o in k.call.operands} else None
        step = evidence_step(k, f)
        self.step = step if step is not None else 0
        self._redraw()
        where = f"{k.call.name}" + (f", operand {self.focus_operand}" if self.focus_operand else "")
        return where + (f", grid step {self.step + 1} {tuple(k.walk.trace_points[self.step])}" if step is not None else "")

    def _redraw(self) -> None:
        head = self.query_one("#pallas-head", Static)
        body = self.query_one("#pallas-body", Static)
        if not self.kernels:
            head.update(Text("\n".join(f.message for f in self.unread), style="yellow") if self.unread
                        else Text(self.empty))
            body.update(self.gpu_table or "")
            self.query_one("#pallas-grid", Static).update("")
            return
        k = self.kernels[self.kernel]
        c = k.call
        axes = ", ".join(f"{n}={g} {s}" for n, g, s in zip(c.grid_names, c.grid, c.dimension_semantics))
        head.update(Text.assemble((f"{c.name}", "bold"), f" ({self.kernel + 1} of {len(self.kernels)}; [ and ] switch)  ",
                                  f"at {c.source}; grid ({axes}), {'?' if c.steps is None else format(c.steps, ',')} steps"))
        compiler = self.compiler.get(c.name, {})
        vmem_title = f"VMEM per chip ({estimate_kind(k)}" + ("; the compiler's own figure beside it)" if compiler else ")")
        pipelines = [t for t in (pipeline_table(k),) if t is not None]
        body.update(Group(blockspec_table(k), *pipelines, Text(vmem_title, style="bold"), budget_bars(k, compiler), Text(""),
                          Text("suggested CostEstimate (y copies; flops count every pl.when branch):", style="bold"),
                          Text(cost_estimate_text(k)), Text(""), findings_table(k.findings),
                          *((Text(""), self.gpu_table) if self.gpu_table is not None else ())))
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
                               f"  grid point {tuple(point)}   ← → step, shift by 10, Home End, g go to"),
                 LEGEND]
        maps = []
        for op in k.call.operands:
            trace = w.trace_blocks.get(op.operand) or []
            block = trace[self.step] if self.step < len(trace) else None
            verb = "reads" if op.role == "input" else "writes"
            focused = op.operand == self.focus_operand
            header = Text(f"{op.operand} {verb} {tuple(block) if block is not None else '?'}",
                          style="bold reverse yellow" if focused else "bold")
            if focused:
                header.append(" ◀ the finding", style="bold yellow")
            maps.append(Group(header, block_map(k, op.operand, block)))
        grid.update(Group(*lines, Columns(maps, padding=(0, 3))))
