"""The tune screen's options: every option of ``inspector tune`` that is not the chips (--target),
the values to sweep (--grid) or a fixed value (--set), each as the command line spells it (--args,
--workers, --ray, --table, --measure, --top, --time-budget, --no-cache), a field each, two to a
row so that the form fits an 80x24 terminal. An empty field is the command line's default; a value
is checked as the command line checks it, and becomes the same field of the same SweepRequest."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Label, Static

from ...base.errors import InspectorError, UsageError

if TYPE_CHECKING:
    from ...session import Session

# (the field, the command line's option, what an empty field means: the field's placeholder)
OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("args", "--args", "INSPECT's shapes (';' between shapes: a table each)"),
    ("workers", "--workers", "the cores"),
    ("ray", "--ray", "$RAY_ADDRESS or local"),
    ("table", "--table", "none; w writes after"),
    ("top", "--top", "every row; 8 timed"),
    ("measure", "--measure", "off; on: attached TPU"),
    ("time_budget", "--time-budget", "60 s per candidate"),
    ("cache", "--no-cache", "on; off: compute again"),
)
# tune's options that another part of the screen sets, or that have no meaning in it: each with where, or why
ELSEWHERE = {
    "--target": "the chips field",
    "--grid": "each parameter's field (its values, comma-separated)",
    "--set": "a parameter's field left empty keeps its current value: the parameter screen's (x), as --set",
    "--json": "command line only: it prints every row as JSON, and the screen is the table (w writes the tuning table)",
}


def shown(session: Session) -> dict[str, str]:
    """Each field's text when the screen opens: the session's --args, --time-budget and cache (the
    options screen's, o); the rest empty (the command line's defaults)."""
    texts = {name: "" for name, _, _ in OPTIONS}
    texts["args"] = session.args or ""
    texts["time_budget"] = "" if session.time_budget is None else f"{session.time_budget:g}"
    texts["cache"] = "" if session.use_cache else "off"
    return texts


def option_fields(session: Session) -> ComposeResult:
    """The form's rows: --args alone (shapes are long), the others two to a row."""
    texts = shown(session)
    yield Static("tune's options, as the command line spells them (empty: its default)", classes="tune-note")
    rows = [OPTIONS[:1]] + [OPTIONS[i:i + 2] for i in range(1, len(OPTIONS), 2)]
    for row in rows:
        with Horizontal(classes="tune-field tune-options"):
            for name, option, empty in row:
                yield Label(option)
                yield Input(texts[name], placeholder=empty, id=f"tune-option-{name}")


def _whole(option: str, text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{option} {text}: not a whole number") from None
    if value < least:
        raise UsageError(f"{option} {text}: give {least} or more")
    return value


def _switch(option: str, text: str) -> bool:
    if text.lower() not in ("on", "off"):
        raise UsageError(f"{option} {text}: on or off")
    return text.lower() == "on"


def _seconds(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UsageError(f"{option} {text}: give a number of seconds > 0")
    return value


def sweep_options(texts: dict[str, str], session: Session, spec: str, first_chip: str | None) -> tuple[dict, list[str]]:
    """The SweepRequest's fields the option fields ask for ({field: value}, as ``inspector tune``'s
    request() makes them from the same options), or the problems with them (one line each).
    ``first_chip``: the first of the chips (--measure ranks on it), None when the chips are wrong."""
    import inspector.compilation.compile_cache as compile_cache

    from ...base.specs import parse_specs
    from ...tuning.measured import measure_count
    from ...tuning.sweep import REFRESH
    from ...tuning.table import check_table
    from ...verbs.rules import check_tune_measure, time_budget

    text = {name: texts.get(name, "").strip() for name, _, _ in OPTIONS}
    fields: dict = {}
    problems: list[str] = []

    def checked(option: str, make):
        try:
            return make()
        except InspectorError as err:
            problems.append(str(err) if option in str(err) else f"{option}: {err}")
            return None

    fields["args"] = [s.strip() for s in text["args"].split(";") if s.strip()]
    for shapes in fields["args"]:
        checked("--args", lambda shapes=shapes: parse_specs(shapes))
    fields["workers"] = checked("--workers", lambda: _whole("--workers", text["workers"], 1)) if text["workers"] else None
    fields["ray"] = text["ray"] or os.environ.get("RAY_ADDRESS") or None
    fields["table"] = text["table"] or None
    if fields["table"]:
        checked("--table", lambda: check_table(fields["table"], spec))
    top = checked("--top", lambda: _whole("--top", text["top"], 0)) if text["top"] else None
    measure = bool(text["measure"]) and checked("--measure", lambda: _switch("--measure", text["measure"]))
    if measure and first_chip is not None:
        checked("--measure", lambda: check_tune_measure(True, first_chip, "chips"))
    fields["measure"] = measure_count(top) if measure else 0
    seconds = checked("--time-budget", lambda: _seconds("--time-budget", text["time_budget"])) if text["time_budget"] else None
    fields["budget"] = checked("--time-budget", lambda: time_budget(seconds, "--time-budget", session.time_memory))
    no_cache = bool(text["cache"]) and not checked("--no-cache", lambda: _switch("--no-cache", text["cache"]))
    fields["cache"] = False if not compile_cache.enabled() else REFRESH if no_cache else True
    fields["top"] = top  # not the request's: the rows the table shows, as --top's tables
    return fields, problems
