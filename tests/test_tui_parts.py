"""The terminal UI's app is composed of parts, each with its own state, not of mixins sharing the
app's attributes (views/tui/app.py's docstring): the app holds its model and its parts, a part
writes no attribute of the app but the model, and no two parts hold the same attribute. And the
worker can run on a thread of this process (the option the tests use)."""
import ast
import multiprocessing

import pytest
from textual.app import App

from conftest import ROOT, loaded
from inspector.session import Session
from inspector.views.tui.app import InspectorApp

TUI = ROOT / "views" / "tui"
MODEL = {"session", "report", "lowered", "sub_title"}  # what a part may set on its app (host.py declares them)
IMMUTABLE = (str, int, float, bool, tuple, type(None))
NAIVE = Session("samples/attention.py:naive", "cpu", args="f32[1,128,32] f32[1,128,32] f32[1,128,32]")


def _parts(app: InspectorApp) -> dict[str, object]:
    """The app's parts: objects of the UI's own classes that know the app."""
    return {name: value for name, value in vars(app).items()
            if type(value).__module__.startswith("inspector.views.tui.") and getattr(value, "app", None) is app}


def test_the_app_mixes_in_nothing_of_its_own():
    """Of the app's bases, only the Host interface is the UI's own, and it holds no code and no state."""
    ours = [f"{c.__module__}.{c.__name__}" for c in InspectorApp.__mro__ if c.__module__.startswith("inspector.")]
    assert ours == ["inspector.views.tui.app.InspectorApp", "inspector.views.tui.host.Host"]
    from inspector.views.tui import host

    bare = type("Bare", (App,), {})  # what Textual itself puts in any App subclass's namespace
    declared = set(vars(host.Host)) - set(vars(bare)) - {"__annotations__"}
    assert declared == set(), f"host.Host defines {sorted(declared)}: declarations only (the parts hold state and code)"
    assert host.Host.__annotations__.keys() >= {"session", "report", "lowered", "calls"}


def test_the_app_holds_its_model_and_its_parts_and_each_part_its_own_state():
    app = InspectorApp(NAIVE)
    textual = set(vars(App()))
    own = set(vars(app)) - textual
    parts = _parts(app)
    assert {"calls", "loader", "navigator", "fixes", "status_line"} <= set(parts)
    state = own - set(parts)
    assert state <= {"session", "watch_file", "lowered", "tabs", "tabs_ready", "crash", "_early_keys"}, (
        f"the app holds {sorted(state - {'session', 'lowered'})}: a part's state belongs in that part")
    # one owner for each piece of mutable state: no part holds another's (or the app's) dict, list, object
    held = {id(getattr(app, name)): f"app.{name}" for name in state if not isinstance(getattr(app, name), IMMUTABLE)}
    for name, part in parts.items():
        for attribute, value in vars(part).items():
            if attribute == "app" or isinstance(value, IMMUTABLE):
                continue
            assert id(value) not in held, f"{name}.{attribute} is {held[id(value)]} too"
            held[id(value)] = f"{name}.{attribute}"


def test_no_part_sets_an_attribute_of_the_app_but_its_model():
    """A part changes the app through its methods (host.py); it may set the model only."""
    for path in sorted(TUI.glob("*.py")):
        if path.name == "app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in (t for top in targets for t in ast.walk(top)):
                if not isinstance(target, ast.Attribute):
                    continue
                owner = ast.unparse(target.value)
                if owner in ("app", "self.app", "self.screen.app"):
                    assert target.attr in MODEL, f"{path.name}:{target.lineno}: sets {owner}.{target.attr}"


@pytest.mark.asyncio
async def test_the_worker_runs_on_a_thread_of_this_process_when_asked():
    """InspectorApp(in_process=True): a load's calls run here, no child process is started."""
    app = InspectorApp(NAIVE, watch=False, in_process=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert app.report is not None and app.report.chip.name == "cpu"
        assert app.remote.in_process and not multiprocessing.active_children()
