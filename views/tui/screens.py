"""Modal screens: pick a target chip, edit the static parameters, the help."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static

from ...compilation.static_params import same_kind
from .tabs import TAB_VIEWS

if TYPE_CHECKING:
    from ...base.families import FamilyInfo


def _key_span(keys: list[str]) -> str:
    """"1-8" for consecutive digits, else the keys side by side ("← →  shift" for arrows with and
    without shift)."""
    if len(keys) > 2 and all(k.isdigit() for k in keys) and [int(k) for k in keys] == list(range(int(keys[0]), int(keys[-1]) + 1)):
        return f"{keys[0]}-{keys[-1]}"
    shifted = [k for k in keys if k.startswith("shift+") and k[6:] in keys]
    plain = " ".join(_shown(k) for k in keys if k not in shifted)
    return f"{plain}  shift" if shifted else "  ".join(_shown(k) for k in keys)


_KEYS_SHOWN = {"left": "←", "right": "→", "shift+left": "shift+←", "shift+right": "shift+→", "question_mark": "?",
               "slash": "/", "left_square_bracket": "[", "right_square_bracket": "]", "escape": "Esc", "home": "Home",
               "end": "End", "enter": "Enter"}

# The rows of the help, each the actions (of the app's bindings and its tabs') it explains: the
# keys come from the bindings themselves, and a binding no row names gets a row of its own (its
# description), so none is left out. Extra keys: those that are not our bindings (Enter on a table).
_ROWS: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
    (("pass_dumps", "buffers", "mosaic_dumps"), "compile with pass dumps, buffers, Mosaic dumps", ()),
    (("time", "measure"), "time per kernel: {time}; measured on {measured}", ()),
    (("search", "find"), "search the text tabs, bundles; next, previous match", ()),
    (("link",), "the same source line in the other stages, bundles", ()),
    (("back",), "overview: show a finding's evidence; b comes back", ("enter",)),
    (("sort",), "fusions: change the sort", ()),
    (("step",), "Pallas: step the grid (shift: by 10)", ()),
    (("step_to", "goto"), "Pallas: first, last step; go to a step", ()),
    (("kernel", "copy_cost"), "previous, next kernel; Pallas: copy CostEstimate", ()),
    (("diff", "fixes", "apply_fix"), "run the diff; try the fixes; apply a finding's top fix", ()),
    (("target", "params", "options", "tune", "backward"), "chip; parameters, options; tune them; the backward pass", ()),
    (("compare",), "compare with another chip or parameters", ()),
    (("export", "reload"), "export SVG + JSON here; reload the file", ()),
    (("cancel",), "cancel the compile or diff in flight", ()),
    ((), "command palette: chip, params, export, theme", ("ctrl+p",)),
    (("help", "quit"), "this help; quit", ()),
]


def _shown(key: str) -> str:
    return _KEYS_SHOWN.get(key, key)


def _tab_rows() -> list[tuple[list[str], str]]:
    """The tab keys, from the table of views: the first eight, then the rest (a key that opens a
    screen instead, such as compare's c, has its own row below)."""
    tabs = [v for v in TAB_VIEWS if not v.opens]
    first, rest = tabs[:8], tabs[8:]
    rows = [([v.key for v in first], " ".join(v.title for v in first))]
    if rest:
        rows.append(([v.key for v in rest], " ".join(v.title for v in rest)))
    return rows


def tab_bindings() -> list[tuple[str, list]]:
    """(tab title, its widget's own BINDINGS) for each tab with keys of its own (the Pallas grid stepper ...)."""
    import importlib

    found = []
    for view in TAB_VIEWS:
        if view.tab:
            module, name = view.tab.split(":")
            cls = getattr(importlib.import_module(f"{__package__}.{module}"), name)
            if cls.__dict__.get("BINDINGS"):  # its own, not the scrolling and editing keys of Textual's widgets
                found.append((view.title, list(cls.__dict__["BINDINGS"])))
    return found


def _keys_by_action(bindings: list) -> dict[str, list[str]]:
    """{action name (no arguments): its keys}, in the bindings' order (n and N of find(...) together)."""
    keys: dict[str, list[str]] = {}
    for b in bindings:
        key, action = (b[0], b[1]) if isinstance(b, tuple) else (b.key, b.action)
        found = keys.setdefault(action.split("(")[0], [])
        found += [k for k in key.split(",") if k not in found]
    return keys


def _family_words(info: FamilyInfo | None) -> dict[str, str]:
    """The words _ROWS leaves to the target's family (None: any family's)."""
    if info is None:
        return {"time": "the family's estimate", "measured": "a TPU or GPU"}
    return {"time": info.time_estimate, "measured": f"the {info.name.upper()}" if info.can.measure else "a TPU or GPU"}


def help_rows(app_bindings: list, info: FamilyInfo | None = None) -> list[tuple[list[str], str]]:
    """(keys, what they do): the tabs, then _ROWS with the keys of the app's and the tabs' bindings
    (in ``info``'s words, the target's family), then any binding _ROWS does not name."""
    words = _family_words(info)
    keys = _keys_by_action(list(app_bindings) + [b for _, bindings in tab_bindings() for b in bindings])
    descriptions = {(b[1] if isinstance(b, tuple) else b.action).split("(")[0]: b[2] if isinstance(b, tuple) else b.description
                    for b in app_bindings}
    rows = _tab_rows()
    for actions, does, extra in _ROWS:
        rows.append(([*extra, *(k for a in actions for k in keys.get(a, []))], does.format(**words)))
    named = {a for actions, _, _ in _ROWS for a in actions} | {"tab"}
    rows += [(k, descriptions.get(action) or action.replace("_", " ")) for action, k in keys.items() if action not in named]
    return rows


def help_table(app_bindings: list, info: FamilyInfo | None = None) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for keys, does in help_rows(app_bindings, info):
        table.add_row(_key_span(keys), does)
    return table


class HelpScreen(ModalScreen):
    """Every key, made from the bindings of the app (``app_bindings``) and of its tabs, in the words
    of the target's family (``info``)."""

    BINDINGS = [("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, app_bindings: list, info: FamilyInfo | None = None):
        super().__init__()
        self.app_bindings, self.info = app_bindings, info

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text("inspector: keys (Esc closes)", style="bold"))
            yield Static(help_table(self.app_bindings, self.info))


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
