"""The tune screen (u, or ctrl+t on the parameter screen): `inspector tune` for the current target,
in the terminal UI. A form first (the chips, the values to sweep per parameter), then the sweep in
a worker thread with its progress (Esc or ctrl+c stops it: the workers are killed, what is done is
kept, as the CLI's Ctrl-C), then the ranked table: one row per candidate with its estimated time
on each chip and a bar; Enter on a row applies its parameters (the target is analysed again with
them, as the parameter screen does). This process never imports jax: the sweep's own worker
processes trace and compile (inspector.tuning.pool). The form is in tune_form.py (its options in
tune_options.py), the progress in tune_progress.py, the table's cells and panes in tune_table.py."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label, ProgressBar, Static

from ...base.chips import DEFAULT_TPU
from ...base.errors import InspectorError
from ...compilation.user_files import split_spec
from ...tuning.table import update_table
from .calls import message_of
from .tune_form import TuneForm, count_candidates, declare_hint, sweep_request, tunable_chip
from .tune_options import option_fields
from .tune_progress import Counts, Relay
from .tune_table import (RANKED, bar, candidates_by_rank, counts_line, note, param_text, row_detail, time_cell,
                         top_rows)

if TYPE_CHECKING:
    from ...session import Session
    from .host import Host
    from ...tuning.model import TuneResult
    from ...tuning.sweep import SweepRequest


# ----------------------------------------------------------------------------- the screen


class TuneScreen(ModalScreen[dict]):
    """Form, progress, ranked table; dismissed with the picked row's parameters (as text, the way
    the parameter screen gives them), or None."""

    DEFAULT_CSS = """
    TuneScreen { align: center middle; }
    #tune { width: 100%; height: 100%; background: $panel; padding: 0 1; }
    #tune-form { height: auto; max-height: 60%; }
    .tune-field { height: 1; }
    .tune-field Label { width: 36; }
    .tune-field Input { width: 1fr; height: 1; border: none; padding: 0 1; background: $boost; }
    .tune-field Input:focus { background: $primary 40%; border: none; }
    .tune-options Label { width: 15; }
    #tune-head, #tune-problem, #tune-progress-line, #tune-hint { height: auto; }
    #tune-table { height: 1fr; }
    #tune-detail { height: auto; max-height: 8; border-top: solid $primary; }
    """
    # no field is focused when the screen opens, so q closes it as it reads (in a field it types a q;
    # Tab goes to the fields, Enter runs the sweep from anywhere on the form)
    AUTO_FOCUS = None
    BINDINGS = [
        Binding("escape,q", "close", "stop the sweep / close"),
        Binding("enter", "run", "run the sweep", show=False),
        Binding("ctrl+c", "stop", "stop the sweep", priority=True),
        Binding("s", "next_chip", "rank by the next chip"),
        Binding("left_square_bracket", "shape(-1)", "previous shape"),
        Binding("right_square_bracket", "shape(1)", "next shape"),
        Binding("w", "write_table", "write a tuning table"),
        Binding("r", "again", "sweep again"),
    ]

    def __init__(self, form: TuneForm, session: Session):
        super().__init__()
        self.form = form
        self.session = session
        self.result: TuneResult | None = None
        self.cancel = threading.Event()
        self.running = False
        self.counts = Counts()
        self.shape = 0
        self.chip: str | None = None  # the chip the table is ranked by
        self._shown: list[tuple[dict, dict]] = []  # the table's rows: (params, {chip: row})
        self._request: SweepRequest | None = None
        self.top = 0  # --top: the ranked rows shown (0: all)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        chip = self.session.chip if tunable_chip(self.session.chip) else DEFAULT_TPU
        with Vertical(id="tune"):
            yield Static(Text(f"tune {self.form.spec}: rank candidate parameters by their time, without the "
                              "chip (TPU: libtpu's estimate; GPU: a floor)", style="bold"), id="tune-head")
            with VerticalScroll(id="tune-form"):
                if not self.form.tunable:
                    yield Static(Text(declare_hint(self.form.function), style="yellow"), id="tune-declare")
                else:
                    if not self.form.choices:
                        yield Static(Text(f"INSPECT offers no values for {self.form.function}'s parameters: give "
                                          "some here, or list them in the file (INSPECT's \"params\", below)",
                                          style="yellow"), id="tune-declare")
                    yield Static(Text("the values to try, comma-separated (a parameter left empty is not swept: "
                                      "it keeps its current value)", style="dim"))
                    with Horizontal(classes="tune-field"):
                        yield Label("chips")
                        yield Input(chip, id="tune-chips")
                    for name, value in {**{n: None for n in self.form.choices}, **self.form.current}.items():
                        offered = self.form.choices.get(name)
                        with Horizontal(classes="tune-field"):
                            yield Label(f"{name}" + (" (INSPECT's list)" if offered else f" (now {param_text(value)})"))
                            yield Input(self.form.prefill(name), id=f"tune-param-{name}")
                    yield Static("", id="tune-count")
                    yield from option_fields(self.session)
            yield Static("", id="tune-problem")
            yield ProgressBar(id="tune-progress", show_eta=False)
            yield Static("", id="tune-progress-line")
            yield DataTable(id="tune-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="tune-detail")
            yield Static("", id="tune-hint")

    def on_mount(self) -> None:
        for name in ("tune-progress", "tune-progress-line", "tune-table", "tune-detail"):
            self.query_one(f"#{name}").display = False
        self._hint()
        if self.query(Input):
            self._count()
        self.set_interval(1.0, self._tick)

    def _hint(self) -> None:
        if self.running:
            hint = "Esc or ctrl+c stops the sweep (what is done is kept: r resumes it)"
        elif self.result is not None:
            more = "  [ ] shape" if len(self.result.shapes) > 1 else ""
            hint = f"Enter applies the row  s ranks by the next chip{more}  w tuning table  r sweep again  Esc closes"
        elif self.form.tunable:
            hint = "Enter runs the sweep (the candidates compile in worker processes)  Tab edits the values  q or Esc closes"
        else:
            hint = "q or Esc closes"
        self.query_one("#tune-hint", Static).update(Text(hint, style="dim"))

    def _values(self) -> dict[str, str]:
        return {(i.id or "").removeprefix("tune-param-"): i.value for i in self.query(Input)
                if (i.id or "").startswith("tune-param-")}

    def _options(self) -> dict[str, str]:
        return {(i.id or "").removeprefix("tune-option-"): i.value for i in self.query(Input)
                if (i.id or "").startswith("tune-option-")}

    def _count(self) -> None:
        if self.query("#tune-count"):
            chips = self.query_one("#tune-chips", Input).value
            self.query_one("#tune-count", Static).update(Text(count_candidates(self._values(), chips), style="dim"))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._count()

    def _problem(self, text: str, style: str = "bold red") -> None:
        self.query_one("#tune-problem", Static).update(Text(text, style=style))

    # ------------------------------------------------------------------ the sweep

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_run()

    def action_run(self) -> None:
        """Enter: the sweep the form asks for (in a field, or with none focused)."""
        if self.running or not self.form.tunable or not self.query_one("#tune-form").display:
            return
        options = self._options()
        request, problems = sweep_request(self.form, self.session, self.query_one("#tune-chips", Input).value,
                                          self._values(), options)
        if problems:
            self._problem("\n".join(problems))
            return
        assert request is not None  # no problems: a request
        self.top = int(options["top"] or 0)  # checked: the ranked rows the table shows, as --top's tables
        self.start(request)

    def start(self, request: SweepRequest) -> None:
        self._request = request
        self.running = True
        self.cancel = threading.Event()
        self.counts = Counts(started=time.monotonic())
        self._problem(f"loading {request.spec} in a worker process (it imports jax)…", "yellow")
        self.query_one("#tune-form").display = False
        self.set_focus(None)  # the hidden form's keys go to the screen and the app now (Esc, q)
        self.query_one("#tune-progress").display = True
        self.query_one("#tune-progress-line").display = True
        self._hint()
        self.sweep(request, self.cancel)

    @work(thread=True, exclusive=True, group="tune")
    def sweep(self, request: SweepRequest, cancel: threading.Event) -> None:
        import inspector.tuning.sweep as sweep_module
        from ...tuning.pool import Cancelled

        try:
            result = sweep_module.run_sweep(request, Relay(self), cancel=cancel)
        except Cancelled:
            self._relay(self.sweep_failed, "cancelled before the first candidate (nothing was computed)", "yellow")
            return
        except Exception as err:
            self._relay(self.sweep_failed, message_of(err), "bold red")
            return
        self._relay(self.sweep_done, result)

    def _relay(self, fn, *args) -> None:
        try:
            self.app.call_from_thread(lambda: fn(*args) if self.is_attached else None)
        except RuntimeError:
            pass

    def sweep_started(self, total: int, done: int, workers: int) -> None:
        self.counts.total, self.counts.done, self.counts.cached, self.counts.workers = total, done, done, workers
        self._problem("")
        self.query_one("#tune-progress", ProgressBar).update(total=total, progress=done)
        self._tick()

    def sweep_advanced(self, status: str) -> None:
        self.counts.done += 1
        self.counts.computed += 1
        self.counts.statuses[status] = self.counts.statuses.get(status, 0) + 1
        self.query_one("#tune-progress", ProgressBar).update(progress=self.counts.done)
        self._tick()

    def _tick(self) -> None:
        if self.running and self.counts.total:
            self.query_one("#tune-progress-line", Static).update(Text(self.counts.line(time.monotonic())))
        elif self.running:
            self.query_one("#tune-progress-line", Static).update(
                Text(f"{time.monotonic() - self.counts.started:.0f} s", style="dim"))

    def sweep_failed(self, message: str, style: str) -> None:
        """The sweep could not start (a usage error, the target failed to load) or was stopped
        before its first candidate: the form again (or the last result), with why."""
        self.running = False
        self.query_one("#tune-progress").display = False
        self.query_one("#tune-progress-line").display = False
        if self.result is not None:
            self.show_result()
        else:
            self.query_one("#tune-form").display = True
            fields = self.query(Input)
            if fields:
                fields.first().focus()
        self._problem(message, style)
        self._hint()

    def sweep_done(self, result: TuneResult) -> None:
        self.running = False
        self.result = result
        self.shape = min(self.shape, len(result.shapes) - 1)
        chips = [c.chip for c in result.shapes[0].chips] if result.shapes else []
        self.chip = self.chip if self.chip in chips else (chips[0] if chips else None)
        self.query_one("#tune-progress").display = False
        self.query_one("#tune-progress-line").display = False
        self.query_one("#tune-form").display = False
        self.show_result()
        self._hint()
        table = self.query_one("#tune-table", DataTable)
        table.focus()

    # ------------------------------------------------------------------ the result

    def show_result(self) -> None:
        from ..tune import best_lines, floors

        result = self.result
        if result is None or not result.shapes or self.chip is None:
            self._problem("the sweep found no candidates", "bold red")
            return
        shape = result.shapes[self.shape]
        rankings = {c.chip: c for c in shape.chips}
        self._shown, left_out = top_rows(candidates_by_rank(result, self.shape, self.chip), self.chip, self.top)
        ranked = [rows[self.chip] for _, rows in self._shown if rows.get(self.chip) and rows[self.chip].status == RANKED]
        slowest = max((r.estimated_seconds or 0 for r in ranked), default=0)
        best = rankings[self.chip].best
        table = self.query_one("#tune-table", DataTable)
        table.clear(columns=True)
        table.add_column("rank")
        for name in result.swept:
            table.add_column(name)
        for chip in rankings:
            table.add_column(f"{chip} {'floor' if floors(rankings[chip]) else 'est.'}"
                             + (" ▲" if chip == self.chip and len(rankings) > 1 else ""))
        table.add_column("x best")
        table.add_column(f"{self.chip}" if len(rankings) > 1 else "")
        table.add_column("note")
        for params, rows in self._shown:
            mine = rows.get(self.chip)
            style = "bold green" if mine is not None and mine is best else ""
            table.add_row(Text(str(mine.rank) if mine is not None and mine.rank else "-", style=style),
                          *(Text(param_text(params.get(n, "-")), style=style) for n in result.swept),
                          *(time_cell(rows.get(chip)) for chip in rankings),
                          Text(f"{mine.ratio:.2f}x" if mine is not None and mine.ratio else "-"),
                          bar(mine, slowest, mine is best), note(mine))
        table.display = True
        self.query_one("#tune-detail").display = True
        lines: list = [best_lines(r) for r in shape.chips]
        lines.append(counts_line(result))
        if left_out:
            lines.append(Text(f"{left_out} more ranked rows (--top 0 shows all)", style="dim"))
        where = f"{shape.shape}" + (f" (shape {self.shape + 1} of {len(result.shapes)})" if len(result.shapes) > 1 else "")
        head = Text(f"tune {result.target} · {where} · ranked by {self.chip}", style="bold")
        self.query_one("#tune-head", Static).update(head)
        self.query_one("#tune-problem", Static).update(Group(*lines))
        if self._shown:
            table.move_cursor(row=0)
            self._detail(0)

    def _detail(self, index: int) -> None:
        if self.result is None or not 0 <= index < len(self._shown):
            return
        params, rows = self._shown[index]
        rankings = {c.chip: c for c in self.result.shapes[self.shape].chips}
        self.query_one("#tune-detail", Static).update(row_detail(params, rows, rankings))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(event.cursor_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if self.result is None or not 0 <= event.cursor_row < len(self._shown):
            return
        params, _ = self._shown[event.cursor_row]
        self.dismiss({name: param_text(value) for name, value in params.items()})

    # ------------------------------------------------------------------ keys

    def action_stop(self) -> None:
        if self.running:
            self.cancel.set()
            self._problem("stopping: the workers are killed, what is done is kept…", "yellow")

    def action_close(self) -> None:
        if self.running:
            self.action_stop()
        else:
            self.dismiss(None)

    def action_next_chip(self) -> None:
        if self.result is None or self.running or not self.result.shapes:
            return
        chips = [c.chip for c in self.result.shapes[self.shape].chips]
        self.chip = chips[(chips.index(self.chip) + 1) % len(chips)] if self.chip in chips else chips[0]
        self.show_result()

    def action_shape(self, step: int) -> None:
        if self.result is None or self.running or len(self.result.shapes) < 2:
            return
        self.shape = (self.shape + step) % len(self.result.shapes)
        self.show_result()

    def action_again(self) -> None:
        if not self.running and self._request is not None:
            self.query_one("#tune-table").display = False
            self.query_one("#tune-detail").display = False
            self.start(self._request)

    def action_write_table(self) -> None:
        """The tuning table (FILE_FUNCTION_tuning.json in the current folder), as ``inspector tune
        --table`` writes it: added to, whole or not at all, never from an interrupted sweep."""
        result = self.result
        if result is None or self.running:
            return
        if result.interrupted:
            self.app.notify("the sweep was interrupted: r finishes it first (a tuning table holds whole sweeps)",
                            severity="warning")
            return
        if not any(c.best is not None for s in result.shapes for c in s.chips):
            self.app.notify("no candidate was ranked: nothing to write", severity="warning")
            return
        where, function = split_spec(result.target)
        path = f"{Path(where).stem}_{function}_tuning.json"  # in the current folder, as e exports
        try:
            written = update_table(path, result)
        except InspectorError as err:
            self.app.notify(str(err), severity="error")
            return
        self.app.notify(f"wrote {written} (the tuning table: inspector.tuning.lookup reads it)")

    def on_unmount(self) -> None:
        self.cancel.set()  # closed or the app quits: a sweep still running stops and kills its workers


def open_tune(app: Host) -> None:
    """The app's tune key (u; ctrl+t on the parameter screen): the tune screen for the current
    target; Enter on a row applies its parameters."""
    known = app.report or app.lowered  # the lowering knows the parameters and INSPECT's lists
    if known is None:
        app.status("tune opens once the function is traced (its parameters are known then)", "yellow")
        return
    signature = app.session.keyword_params()
    current = {**(signature[0] if signature else {}), **known.target.params}
    form = TuneForm(app.session.spec, known.target.function, current, dict(known.target.param_choices))

    def picked(params: dict | None) -> None:
        if params:
            app.status("applying " + " ".join(f"{k}={v}" for k, v in params.items()) + " from the sweep")
            app.change(app.session.with_params(params))

    app.push_screen(TuneScreen(form, app.session), picked)
