"""Modal screens: pick a target chip, edit the static parameters, the help."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Markdown, OptionList

HELP = """\
# inspector: keys

| key | does |
|---|---|
| `1`-`7` | overview, jaxpr, StableHLO, HLO, fusions, Pallas, diff |
| `/` `n` `N` | search the text tabs: find, next, previous |
| `l` | jump to the next line in the other stages from the same source line |
| `s` | fusions: change the sort (order, HBM bytes, flops, time) |
| `←` `→` (`shift` for 10) | Pallas: step through the grid |
| `[` `]` | Pallas: previous / next kernel |
| `d` | run the diff against the reference |
| `t` | compile for another target (recompiles in the background) |
| `x` | edit the static parameters (`--set`) and re-analyse |
| `e` | export the kernel graph (SVG) and the report (JSON) to this folder |
| `r` | reload the file and re-analyse |
| `Esc` | cancel what is running |
| `ctrl+p` | command palette (themes: dark and light) |
| `?` | this help |
| `q` | quit |
"""


class HelpScreen(ModalScreen):
    BINDINGS = [("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)


class TargetScreen(ModalScreen[str]):
    BINDINGS = [("escape", "dismiss", "cancel")]

    def __init__(self, chips: list[str], current: str):
        super().__init__()
        self.chips, self.current = chips, current

    def compose(self) -> ComposeResult:
        with Vertical(id="pick"):
            yield Label(f"compile for which target? (now {self.current})")
            yield OptionList(*self.chips, id="chips")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.chips[event.option_index])


class ParamsScreen(ModalScreen[dict]):
    BINDINGS = [("escape", "dismiss", "cancel")]

    def __init__(self, params: dict, choices: dict):
        super().__init__()
        self.params, self.choices = params, choices

    def compose(self) -> ComposeResult:
        with Vertical(id="pick"):
            yield Label("static parameters (Enter applies; Esc cancels)" if self.params else
                        "this function takes no static parameters (Esc closes)")
            for name, value in self.params.items():
                options = ", ".join(map(str, self.choices.get(name, [])))
                yield Label(f"{name}" + (f"  (INSPECT offers {options})" if options else ""))
                yield Input(str(value), id=f"param-{name}")

    def on_mount(self) -> None:
        fields = self.query(Input)
        if fields:
            fields.first().focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss({i.id.removeprefix("param-"): i.value for i in self.query(Input)})
