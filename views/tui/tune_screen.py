"""The tune screen (u, or ctrl+t on the parameter screen): `inspector tune` for the current target,
in the terminal UI. A form first (the chips, the values to sweep per parameter), then the sweep in
a worker thread with its progress (Esc or ctrl+c stops it: the workers are killed, what is done is
kept, as the CLI's Ctrl-C), then the ranked table: one row per candidate with its estimated time
on each chip and a bar; Enter on a row applies its parameters (the target is analysed again with
them, as the parameter screen does). This process never imports jax: the sweep's own worker
processes trace and compile (inspector.tuning.pool)."""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label, ProgressBar, Static

from ...chips import DEFAULT_TPU
from ...errors import InspectorError
from ...target import parse_value, same_kind
from ...units import fmt_bytes, fmt_time
from .app_base import AppBase
from .loading import message_of

if TYPE_CHECKING:
    from ...session import Session
    from ...tuning.model import ChipRanking, TuneResult, TuneRow
    from ...tuning.sweep import SweepRequest

RANKED = "ranked"  # inspector.tuning.model.RANKED (the model is imported when a sweep runs)
BAR_WIDTH = 20
_STATUS_STYLE = {"untimed": "yellow", "pruned": "yellow", "refused": "red", "failed": "red", "not-run": "dim"}


def declare_hint(function: str) -> str:
    """What to write so that a function has parameters to tune."""
    return (f"{function} has no parameters to tune: give it static keyword parameters and list the values to try "
            f'in the file, e.g.\n    def {function}(a, b, bm=256): ...\n    INSPECT = {{"{function}": {{"args": "bf16[1024,1024] '
            f'bf16[1024,1024]", "params": {{"bm": [256, 128, 512]}}}}}}\n(the first value is the default); '
            "the CLI's --grid bm=128,256 does the same for one run")


@dataclasses.dataclass
class TuneForm:
    """What the tune screen offers to sweep: each parameter's current value and INSPECT's list."""

    spec: str
    function: str
    current: dict  # every static parameter's value in the current analysis (INSPECT's and the signature's)
    choices: dict  # INSPECT's lists

    @property
    def tunable(self) -> bool:
        return bool(self.current or self.choices)

    def prefill(self, name: str) -> str:
        """INSPECT's values, else empty (not swept: the current value stays)."""
        return ", ".join(_text(v) for v in self.choices.get(name, []))


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def sweep_request(form: TuneForm, session: Session, chips_text: str, values: dict[str, str]) -> tuple[SweepRequest | None, list[str]]:
    """The sweep the form asks for, or the problems with it (one line each). ``values``: each
    parameter's field, "a, b, c" (empty: not swept; the current value is kept)."""
    from ...compile_cache import enabled
    from ...tuning.sweep import SweepRequest, check_chips

    problems: list[str] = []
    chips = [c.strip() for c in chips_text.replace(" ", ",").split(",") if c.strip()]
    if not chips:
        problems.append(f"chips: give one or more TPU chips, e.g. {DEFAULT_TPU},tpu-v6e")
    else:
        try:
            chips = [c.name for c in check_chips(chips)]
        except InspectorError as err:
            problems.append(f"chips: {err}")
    if session.mesh or session.shard:
        problems.append("tune ranks one chip's kernels: this analysis is sharded over a mesh (--mesh/--shard)")
    grid: dict[str, list] = {}
    for name, text in values.items():
        items = [parse_value(t.strip()) for t in text.split(",") if t.strip()]
        like = form.current.get(name, next(iter(form.choices.get(name) or []), None))
        wrong = [v for v in items if not same_kind(v, like)]
        if wrong:
            problems.append(f"{name}: {_text(wrong[0])} is not {'an' if type(like).__name__[0] in 'aeiou' else 'a'} "
                            f"{type(like).__name__} (like {like!r})")
        elif items:
            grid[name] = list(dict.fromkeys(items))
    if not grid:
        problems.append("nothing to sweep: give two or more values for a parameter (a, b, c)")
    # what is not swept keeps its current value: the parameter screen's choices and INSPECT's lists left empty
    sets = {k: parse_value(v) for k, _, v in (s.partition("=") for s in session.sets)}
    fixed = {name: value for name, value in sets.items() if name not in grid}
    fixed.update({name: form.current[name] for name in form.choices if name not in grid and name in form.current})
    if problems:
        return None, problems
    request = SweepRequest(session.spec, chips, [session.args] if session.args else [], grid, fixed,
                           cache=session.use_cache and enabled())
    return request, []


def count_candidates(values: dict[str, str], chips_text: str) -> str:
    total = 1
    for text in values.values():
        total *= max(1, len({t.strip() for t in text.split(",") if t.strip()}))
    chips = len([c for c in chips_text.replace(" ", ",").split(",") if c.strip()])
    return f"{total} candidate{'s' if total != 1 else ''} x {chips} chip{'s' if chips != 1 else ''} (x the input shapes)"


# ----------------------------------------------------------------------------- the ranked table


def _key(params: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def candidates_by_rank(result: TuneResult, shape: int, chip: str) -> list[tuple[dict, dict[str, TuneRow]]]:
    """One entry per candidate of ``shape``: its parameters and its row on each chip, in the
    order of ``chip``'s ranking (ranked fastest first, then untimed, refused, pruned, failed)."""
    chips = result.shapes[shape].chips
    by_key: dict[tuple, tuple[dict, dict]] = {}
    order = next(c for c in chips if c.chip == chip)
    for ranking in [order] + [c for c in chips if c is not order]:
        for row in ranking.rows:
            by_key.setdefault(_key(row.params), (row.params, {}))[1][ranking.chip] = row
    return list(by_key.values())


def bar(row: TuneRow | None, slowest: float, best: bool) -> Text:
    if row is None or row.status != RANKED or not row.estimated_seconds or not slowest:
        return Text("")
    width = max(1, round(BAR_WIDTH * row.estimated_seconds / slowest))
    return Text("█" * width, style="green" if best else "cyan")


def time_cell(row: TuneRow | None) -> Text:
    if row is None:
        return Text("-")
    if row.status == RANKED:
        return Text(fmt_time(row.estimated_seconds))
    return Text(row.status, style=_STATUS_STYLE.get(row.status, ""))


def short_reason(reason: str | None, limit: int = 70) -> str:
    """A reason's first sentence, cut for a table cell (the pane below has it whole)."""
    text = (reason or "").replace("\n", " ")
    end = text.find(". ", 30)
    text = text[:end + 1] if end > 0 else text
    return text if len(text) <= limit else text[:limit - 1] + "…"


def note(row: TuneRow | None) -> Text:
    if row is None:
        return Text("")
    if row.status != RANKED:
        return Text(short_reason(row.reason), style=_STATUS_STYLE.get(row.status, ""))
    extra = [] if row.estimate_source in (None, "libtpu") else [row.estimate_source]
    return Text(", ".join(extra + (["default"] if row.default else []) + (["cached"] if row.cached else [])), style="dim")


def row_detail(params: dict, rows: dict[str, TuneRow], rankings: dict[str, ChipRanking]) -> Text:
    """Everything about one candidate, per chip, with a failure's whole reason."""
    text = Text(" ".join(f"{k}={_text(v)}" for k, v in params.items()) or "(the defaults)", style="bold")
    text.append("  (Enter applies them)\n", style="dim")
    failures: dict[tuple, list[str]] = {}  # (status, reason) -> the chips it is so on: said once
    for chip, row in rows.items():
        if row.status != RANKED:
            failures.setdefault((row.status, row.reason), []).append(chip)
            continue
        text.append(f"{chip}: ", style="bold")
        text.append(f"rank {row.rank} of {rankings[chip].count(RANKED)}, {fmt_time(row.estimated_seconds)}")
        text.append(f" ({row.ratio:.2f}x the best)" if row.ratio else "")
        used = row.vmem_bytes if row.vmem_bytes is not None else row.vmem_estimate_bytes
        if used is not None:
            text.append(f", VMEM {fmt_bytes(used)}{'' if row.vmem_bytes is not None else ' est.'}")
            if row.vmem_limit_bytes:
                text.append(f" of {fmt_bytes(row.vmem_limit_bytes)} ({used / row.vmem_limit_bytes:.0%})")
        if row.hbm_bytes is not None:
            text.append(f", HBM {fmt_bytes(row.hbm_bytes)}")
        if row.bound:
            text.append(f", bound by {row.bound}")
        if row.spills is not None:
            text.append(f", {row.spills:,} spills per grid step")
        if row.estimate_source not in (None, "libtpu"):
            text.append(f" ({row.estimate_source})", style="yellow")
        text.append("\n")
    for (status, reason), chips in failures.items():
        text.append(f"{', '.join(chips)}: ", style="bold")
        text.append(status, style=_STATUS_STYLE.get(status, ""))
        text.append(f": {reason or 'no reason given'}\n")
    return text


def counts_line(result: TuneResult) -> Text:
    """How the candidates ended and what the sweep cost (the target is in the screen's title)."""
    c = result.counts
    per = max(len(result.shapes) * len(result.shapes[0].chips), 1) if result.shapes else 1
    chips = len(result.shapes[0].chips) if result.shapes else 0
    parts = [f"{c.get(s, 0)} {s}" for s in ("ranked", "untimed", "pruned", "refused", "failed", "not-run") if c.get(s)]
    text = Text(f"{c.get('total', 0) // per} candidates x {chips} chip{'s' if chips != 1 else ''}"
                + (f" x {len(result.shapes)} shapes" if len(result.shapes) > 1 else "")
                + f": {', '.join(parts)}; {c.get('cached', 0)} from the cache, {c.get('done', 0)} computed in "
                f"{result.wall_seconds:.1f} s", style="dim")
    if result.interrupted:
        text.append(f"\ninterrupted: {c.get('total', 0) - c.get('not-run', 0)} of {c.get('total', 0)} done; r resumes "
                    "the sweep (what is done is cached)", style="bold yellow")
    return text


# ----------------------------------------------------------------------------- progress


class _Relay:
    """The sweep's Progress (inspector.tuning.sweep), from its thread to the screen's."""

    def __init__(self, screen: TuneScreen):
        self.screen = screen

    def _post(self, fn, *args) -> None:
        try:
            self.screen.app.call_from_thread(lambda: fn(*args) if self.screen.is_attached else None)
        except RuntimeError:  # the app has stopped: nothing to show
            pass

    def start(self, total: int, done: int, workers: int, runner: str) -> None:
        self._post(self.screen.sweep_started, total, done, workers)

    def advance(self, row) -> None:
        self._post(self.screen.sweep_advanced, row.status)

    def stop(self) -> None:
        pass


@dataclasses.dataclass
class _Counts:
    total: int = 0
    done: int = 0
    cached: int = 0
    computed: int = 0
    started: float = 0.0
    workers: int = 1
    statuses: dict = dataclasses.field(default_factory=dict)

    def line(self, now: float) -> str:
        parts = [f"{self.done} of {self.total} done"]
        if self.cached:
            parts.append(f"{self.cached} from the cache")
        parts += [f"{n} {s}" for s, n in self.statuses.items() if s != RANKED and n]
        elapsed = now - self.started
        text = ", ".join(parts) + f"; {elapsed:.0f} s on {self.workers} worker{'s' if self.workers != 1 else ''}"
        if self.computed and self.done < self.total:
            text += f", about {elapsed / self.computed * (self.total - self.done):.0f} s left"
        return text


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
    .tune-field Input:focus { background: $primary 40%; }
    #tune-head, #tune-problem, #tune-progress-line, #tune-hint { height: auto; }
    #tune-table { height: 1fr; }
    #tune-detail { height: auto; max-height: 8; border-top: solid $primary; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "stop the sweep / close"),
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
        self.counts = _Counts()
        self.shape = 0
        self.chip: str | None = None  # the chip the table is ranked by
        self._shown: list[tuple[dict, dict]] = []  # the table's rows: (params, {chip: row})
        self._request: SweepRequest | None = None

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        chip = self.session.chip if self.session.chip.startswith("tpu") and ":" not in self.session.chip else DEFAULT_TPU
        with Vertical(id="tune"):
            yield Static(Text(f"tune {self.form.spec}: rank candidate parameters by libtpu's estimated time, "
                              "without a TPU", style="bold"), id="tune-head")
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
                            yield Label(f"{name}" + (" (INSPECT's list)" if offered else f" (now {_text(value)})"))
                            yield Input(self.form.prefill(name), id=f"tune-param-{name}")
                    yield Static("", id="tune-count")
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
        fields = self.query(Input)
        if fields:
            fields.first().focus()
            self._count()
        self.set_interval(1.0, self._tick)

    def _hint(self) -> None:
        if self.running:
            hint = "Esc or ctrl+c stops the sweep (what is done is kept: r resumes it)"
        elif self.result is not None:
            more = "  [ ] shape" if len(self.result.shapes) > 1 else ""
            hint = f"Enter applies the row  s ranks by the next chip{more}  w tuning table  r sweep again  Esc closes"
        elif self.form.tunable:
            hint = "Enter runs the sweep (the candidates compile in worker processes)  Esc closes"
        else:
            hint = "Esc closes"
        self.query_one("#tune-hint", Static).update(Text(hint, style="dim"))

    def _values(self) -> dict[str, str]:
        return {(i.id or "").removeprefix("tune-param-"): i.value for i in self.query(Input) if i.id != "tune-chips"}

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
        if self.running:
            return
        request, problems = sweep_request(self.form, self.session, self.query_one("#tune-chips", Input).value,
                                          self._values())
        if problems:
            self._problem("\n".join(problems))
            return
        assert request is not None  # no problems: a request
        self.start(request)

    def start(self, request: SweepRequest) -> None:
        self._request = request
        self.running = True
        self.cancel = threading.Event()
        self.counts = _Counts(started=time.monotonic())
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
            result = sweep_module.run_sweep(request, _Relay(self), cancel=cancel)
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
        from ..tune import best_lines

        result = self.result
        if result is None or not result.shapes or self.chip is None:
            self._problem("the sweep found no candidates", "bold red")
            return
        shape = result.shapes[self.shape]
        rankings = {c.chip: c for c in shape.chips}
        self._shown = candidates_by_rank(result, self.shape, self.chip)
        ranked = [rows[self.chip] for _, rows in self._shown if rows.get(self.chip) and rows[self.chip].status == RANKED]
        slowest = max((r.estimated_seconds or 0 for r in ranked), default=0)
        best = rankings[self.chip].best
        table = self.query_one("#tune-table", DataTable)
        table.clear(columns=True)
        table.add_column("rank")
        for name in result.swept:
            table.add_column(name)
        for chip in rankings:
            table.add_column(f"{chip} est." + (" ▲" if chip == self.chip and len(rankings) > 1 else ""))
        table.add_column("x best")
        table.add_column(f"{self.chip}" if len(rankings) > 1 else "")
        table.add_column("note")
        for params, rows in self._shown:
            mine = rows.get(self.chip)
            style = "bold green" if mine is not None and mine is best else ""
            table.add_row(Text(str(mine.rank) if mine is not None and mine.rank else "-", style=style),
                          *(Text(_text(params.get(n, "-")), style=style) for n in result.swept),
                          *(time_cell(rows.get(chip)) for chip in rankings),
                          Text(f"{mine.ratio:.2f}x" if mine is not None and mine.ratio else "-"),
                          bar(mine, slowest, mine is best), note(mine))
        table.display = True
        self.query_one("#tune-detail").display = True
        lines: list = [best_lines(r) for r in shape.chips]
        lines.append(counts_line(result))
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
        self.dismiss({name: _text(value) for name, value in params.items()})

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
        from pathlib import Path

        from ...target import split_spec
        from ...tuning.table import update_table

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


class Tuning(AppBase):
    """The app's tune key (u; ctrl+t on the parameter screen): mixed into InspectorApp."""

    def action_tune(self) -> None:
        known = self.report or self.lowered  # the lowering knows the parameters and INSPECT's lists
        if known is None:
            self.status("tune opens once the function is traced (its parameters are known then)", "yellow")
            return
        signature = self.session.keyword_params()
        current = {**(signature[0] if signature else {}), **known.target.params}
        form = TuneForm(self.session.spec, known.target.function, current, dict(known.target.param_choices))

        def picked(params: dict | None) -> None:
            if params:
                self.session = self.session.with_params(params)
                self.status("applying " + " ".join(f"{k}={v}" for k, v in params.items()) + " from the sweep")
                self.load()

        self.push_screen(TuneScreen(form, self.session), picked)
