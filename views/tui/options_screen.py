"""The options screen (o): the options of show and check that no key of their own sets, each as the
command line spells it (--args, --ref, --mesh, --shard, --roofline, --time-budget, --time-memory,
--pass, --no-cache; check's --baseline and --tolerance, the overview's gate). A value is checked
here, as the command line checks it, and Enter applies them all (a new compile where one changed)."""
from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from ...base.chips import get_chip
from ...base.errors import UsageError

# (the field, what the command line calls it, what an empty field means)
OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("args", "--args", "INSPECT's inputs"),
    ("ref", "--ref", "INSPECT's reference"),
    ("mesh", "--mesh", "INSPECT's mesh"),
    ("shard", "--shard", "INSPECT's shardings"),
    ("roofline", "--roofline", "the target's own figures"),
    ("time_budget", "--time-budget", "seconds libtpu's time may take; 60"),
    ("time_memory", "--time-memory", "GiB its compiles may use; 4"),
    ("pass_select", "--pass", "no pass's diff kept"),
    ("use_cache", "--no-cache", "on or off; off is --no-cache"),
    ("baseline", "--baseline", "no baseline; a saved baseline's FILE"),
    ("tolerance", "--tolerance", "time=2%, every other figure exact"),
)
GATE = ("baseline", "tolerance")  # the app's, not the Session's: the overview's gate


def shown(current: dict) -> dict[str, str]:
    """Each option's field text for its current value (``current``: the Session's fields and the app's gate)."""
    texts = {}
    for name, _, _ in OPTIONS:
        value = current.get(name)
        if name == "use_cache":
            texts[name] = "on" if value else "off"
        elif name == "time_memory" and value is not None:
            texts[name] = f"{value / 2**30:g}"
        else:
            texts[name] = "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    return texts


def _number(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} {text}: give a number > 0")
    return value


def _parse(name: str, option: str, text: str):
    """The field's value as the Session (or the gate) holds it; a UsageError as the command line words it."""
    if not text:
        return True if name == "use_cache" else None
    if name == "use_cache":
        if text.lower() not in ("on", "off"):
            raise UsageError(f"cache {text}: on or off (--no-cache)")
        return text.lower() == "on"
    if name == "roofline":
        return get_chip(text).name
    if name == "time_budget":
        return _number(option, text)
    if name == "time_memory":
        return int(_number(option, text) * 2**30)
    # checked here as the command line checks them (no jax): a value the worker would refuse
    # must not cost the report on screen (a new load drops it)
    if name == "args":
        from ...base.specs import parse_specs

        parse_specs(text)
    elif name == "mesh":
        from ...compilation.sharding import parse_mesh

        parse_mesh(text)
    elif name == "shard":
        from ...compilation.sharding import parse_specs as parse_shardings

        parse_shardings(text)
    elif name == "pass_select":
        from ...hlo.pass_select import check_selector

        check_selector(text)
    return text


def check_options(values: dict[str, str], current: dict) -> tuple[dict, list[str]]:
    """The changed options ({field: value}) and the errors (one line each) of the screen's fields."""
    before = shown(current)
    changed, errors = {}, []
    for name, option, _ in OPTIONS:
        text = values.get(name, before[name]).strip()
        if text == before[name]:
            continue
        try:
            changed[name] = _parse(name, option, text)
        except UsageError as err:
            errors.append(str(err))
    gate = {k: changed.get(k, current.get(k)) for k in GATE}
    if gate["tolerance"] and not gate["baseline"]:
        errors.append("--tolerance applies to --baseline FILE: give the baseline too, or leave it out")
    elif not errors and any(k in changed for k in GATE) and gate["baseline"]:
        from ...baseline.compare import parse_tolerances
        from ...baseline.record import load

        try:
            changed["tolerances"] = parse_tolerances([gate["tolerance"]] if gate["tolerance"] else [])
            changed["loaded"] = load(gate["baseline"])
        except UsageError as err:
            errors.append(str(err))
        except Exception as err:  # whatever else the loader raises is still a line here, not a crash
            errors.append(f"baseline {gate['baseline']}: cannot load it ({type(err).__name__}: {err})")
    return changed, errors


class OptionsScreen(ModalScreen[dict]):
    """Every option of show and check that has no key of its own, as the command line spells it."""

    BINDINGS = [("escape", "dismiss", "cancel")]
    DEFAULT_CSS = "OptionsScreen Label.wraps { width: 100%; }"  # a long line wraps in the modal, not cut at its edge

    def __init__(self, current: dict):
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        texts = shown(self.current)
        with VerticalScroll(id="pick"):
            # two short lines: one line of it ran past the modal's 76 columns and was cut
            yield Label("options, as the command line spells them", classes="wraps")
            yield Label("Enter applies; an empty field: the default; Esc cancels", classes="wraps")
            # under the title: at 80x24 the fields run past the modal's bottom, and a problem must be seen
            yield Static("", id="options-problem")
            for name, option, default in OPTIONS:
                # the cache field says what it is, not the flag that turns it off ("--no-cache: on" read as a double negative)
                yield Label(f"{'the compile cache' if name == 'use_cache' else option}  ({default})", classes="wraps")
                yield Input(texts[name], id=f"option-{name}")

    def on_mount(self) -> None:
        self.query(Input).first().focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        values = {(i.id or "").removeprefix("option-"): i.value for i in self.query(Input)}
        changed, errors = check_options(values, self.current)
        if errors:
            problem = self.query_one("#options-problem", Static)
            problem.update(Text("\n".join(errors), style="bold red"))
            problem.scroll_visible(animate=False)
            return
        self.dismiss(changed)
