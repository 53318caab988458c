"""Modal screens: pick a target chip, edit the static parameters, the help."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static

from ...compilation.static_params import same_kind
from .tabs import TAB_VIEWS

def _key_span(keys: list[str]) -> str:
    """"1-8" for consecutive digits, else the keys side by side."""
    if len(keys) > 2 and all(k.isdigit() for k in keys) and [int(k) for k in keys] == list(range(int(keys[0]), int(keys[-1]) + 1)):
        return f"{keys[0]}-{keys[-1]}"
    return "  ".join(keys)


def _tab_rows() -> list[tuple[str, str]]:
    """The tab keys, from the table of views: the first eight, then the rest (a key that opens a
    screen instead, such as compare's c, has its own row below)."""
    tabs = [v for v in TAB_VIEWS if not v.opens]
    first, rest = tabs[:8], tabs[8:]
    rows = [(_key_span([v.key for v in first]), " ".join(v.title for v in first))]
    if rest:
        rows.append((_key_span([v.key for v in rest]), " ".join(v.title for v in rest)))
    return rows


KEYS = [
    *_tab_rows(),
    ("P  Enter", "compile with pass dumps; (Mosaic) passes: a step's diff"),
    ("B  M  T", "compile with buffers, Mosaic dumps, time (libtpu)"),
    ("/  n  N", "search the text tabs, bundles; next, previous match"),
    ("l", "the same source line in the other stages, bundles"),
    ("Enter  b", "overview: show a finding's evidence; b comes back"),
    ("s", "fusions: change the sort"),
    ("← →  shift", "Pallas: step the grid (shift: by 10)"),
    ("Home End g", "Pallas: first, last step; go to a step"),
    ("[  ]  c", "previous, next kernel; Pallas: copy CostEstimate"),
    ("d", "run the diff against the reference"),
    ("t  x  u", "another target chip; edit the parameters; tune them"),
    ("c", "compare with another chip or parameters (Pallas: copy)"),
    ("e  r", "export SVG + JSON here; reload the file"),
    ("Esc", "cancel the compile or diff in flight"),
    ("ctrl+p", "command palette: chip, params, export, theme"),
    ("?  q", "this help; quit"),
]


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for key, does in KEYS:
        table.add_row(key, does)
    return table


class HelpScreen(ModalScreen):
    BINDINGS = [("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text("inspector: keys (Esc closes)", style="bold"))
            yield Static(help_table())


class TargetScreen(ModalScreen[str]):
    BINDINGS = [("escape", "dismiss", "cancel")]

    def __init__(self, chips: list[str], current: str):
        super().__init__()
        self.chips, self.current = chips, current

    def compose(self) -> ComposeResult:
        with Vertical(id="pick"):
            yield Label(f"compile for which target? (now {self.current}; Enter picks, Esc cancels)")
            yield OptionList(*self.chips, id="chips")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.chips:
            options.highlighted = self.chips.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.chips[event.option_index])


def check_params(values: dict[str, str], current: dict, choices: dict, parse) -> tuple[dict, list[str], list[str]]:
    """The changed parameters, parsed; errors (a value of the wrong kind); warnings (a value
    INSPECT does not offer). ``parse`` turns text into a value the way --set does."""
    changed, errors, warnings = {}, [], []
    for name, text in values.items():
        text = text.strip()
        before = current.get(name)
        if text == ("" if before is None else str(before)):
            continue
        if not text:
            errors.append(f"{name}: give a value")
            continue
        value = parse(text)
        like = before if before is not None else next(iter(choices.get(name) or []), None)
        if not same_kind(value, like):
            errors.append(f"{name}={text}: expected {type(like).__name__} like {like!r}")
            continue
        offered = choices.get(name) or []
        if offered and value not in offered:
            warnings.append(f"{name}={text} is not one INSPECT offers ({', '.join(map(str, offered))})")
        changed[name] = text
    return changed, errors, warnings


class ParamsScreen(ModalScreen[dict]):
    """The function's static keyword parameters: those INSPECT gives and those its signature has
    defaults for. A value of the wrong kind is refused here, not by a failed compile; one INSPECT
    does not offer needs a second Enter."""

    BINDINGS = [("escape", "dismiss", "cancel"), ("ctrl+t", "tune", "tune")]

    def __init__(self, params: dict, choices: dict, signature: dict | None = None, parse=None):
        super().__init__()
        self.params = {**(signature or {}), **params}
        self.choices = choices
        self.parse = parse or (lambda text: text)
        self._warned: dict | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pick"):
            yield Label("static parameters (Enter applies; ctrl+t tunes them; Esc cancels)" if self.params else
                        "this function takes no static parameters (Esc closes)")
            for name, value in self.params.items():
                options = ", ".join(map(str, self.choices.get(name, [])))
                yield Label(f"{name}" + (f"  (INSPECT offers {options})" if options else ""))
                yield Input("" if value is None else str(value), id=f"param-{name}")
            yield Static("", id="params-problem")

    def on_mount(self) -> None:
        fields = self.query(Input)
        if fields:
            fields.first().focus()

    def action_tune(self) -> None:
        """The tune screen (u) in this one's place: it sweeps these parameters."""
        self.dismiss(None)
        self.app.call_later(self.app.run_action, "tune")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        values = {(i.id or "").removeprefix("param-"): i.value for i in self.query(Input)}
        changed, errors, warnings = check_params(values, self.params, self.choices, self.parse)
        problem = self.query_one("#params-problem", Static)
        if errors:
            problem.update(Text("\n".join(errors), style="bold red"))
            return
        if warnings and self._warned != changed:
            self._warned = changed
            problem.update(Text("\n".join(warnings) + "\nEnter again to use it anyway", style="yellow"))
            return
        self.dismiss(changed)


COMPARE_WITH = {"chip": "another target chip (t's list)", "params": "other static parameters (x's form)"}


class CompareScreen(ModalScreen[str]):
    """What to compare the current variant with; the chip or parameter screen comes next."""

    BINDINGS = [("escape", "dismiss", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="pick"):
            yield Label("compare this variant (A) with (Enter picks, Esc cancels)")
            yield OptionList(*COMPARE_WITH.values(), id="compare-with")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(list(COMPARE_WITH)[event.option_index])
