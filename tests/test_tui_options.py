"""The options screen (o): every option of show and check that no key of its own sets, typed as the
command line spells it, reaches the same field as the command line's option (inspector/request.py's
Request; check --baseline's gate for --baseline and --tolerance). Each through Textual's pilot."""
from __future__ import annotations

import asyncio
import shlex

import pytest
from textual.app import App

from conftest import loaded
from inspector.commands.baseline import check_gate
from inspector.commands.parser import build_parser
from inspector.commands.requests import show_request
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.options_screen import OPTIONS, OptionsScreen

MATMUL = "samples/matmul.py:tiled"
SAVED = "docs/baselines/matmul-jax-0.10.2.json"
SESSION = Session(MATMUL, "cpu")
# the option: (what is typed in its field, the command line's words, what the Request holds)
SHOW = {
    "--args": ("bf16[256,512] bf16[512,128]", "--args 'bf16[256,512] bf16[512,128]'", lambda r: r.args),
    "--ref": ("tiled", "--ref tiled", lambda r: r.ref),
    "--mesh": ("data=2,model=4", "--mesh data=2,model=4", lambda r: r.mesh),
    "--shard": ("P('data',None) P()", "--shard \"P('data',None) P()\"", lambda r: r.shard),
    "--roofline": ("h100", "--roofline h100", lambda r: r.roofline),
    "--time-budget": ("30", "--time --time-budget 30", lambda r: r.budget().seconds),
    "--time-memory": ("2", "--time --time-memory 2", lambda r: r.budget().memory_bytes),
    "--pass": ("3", "--pass 3", lambda r: r.pass_select),
    "--no-cache": ("off", "--no-cache", lambda r: bool(r.cache)),
}


def _typed(values: dict[str, str], current: dict | None = None):
    """The options screen on its own, ``values`` typed into its fields ({option: text}), then Enter:
    what it gave back (None while it stays), and its problem line."""
    fields = {option: name for name, option, _ in OPTIONS}

    class Host(App):
        given = None

        def on_mount(self) -> None:
            def done(changed):
                self.given = changed
            self.push_screen(OptionsScreen(current or {"use_cache": True}), done)

    async def run():
        app = Host()
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            for option, text in values.items():
                app.screen.query_one(f"#option-{fields[option]}").value = text
            app.screen.query_one(f"#option-{fields[next(iter(values))]}").focus()
            await pilot.press("enter")
            await pilot.pause()
            problem = str(app.screen.query_one("#options-problem").content) if isinstance(app.screen, OptionsScreen) else ""
            return app.given, problem
    return asyncio.run(run())


def test_every_option_the_screen_offers_is_tested():
    assert {option for _, option, _ in OPTIONS} == set(SHOW) | {"--baseline", "--tolerance"}


@pytest.mark.parametrize("option", sorted(SHOW))
def test_a_show_option_set_on_the_screen_is_the_command_lines(option):
    typed, line, field = SHOW[option]
    changed, problem = _typed({option: typed})
    assert not problem and changed
    from_tui = SESSION.with_options(**changed)
    opts = build_parser().parse_args(shlex.split(f"show {MATMUL} --target cpu {line}"))
    opts.chip_reason = None
    cli = show_request(opts)
    if option == "--no-cache":  # the command line's --no-cache computes and stores again; the UI's leaves the cache alone
        assert field(from_tui.request(from_tui.needs())) is False and cli.cache != True  # noqa: E712
        return
    assert field(from_tui.request(from_tui.needs())) == field(cli)


def _gate(line: str):
    opts = build_parser().parse_args(shlex.split(f"check samples/matmul.py --baseline {SAVED} {line}"))
    opts.chip_reason = "the baseline's"
    return check_gate(opts)


def test_the_baseline_set_on_the_screen_is_check_baselines():
    changed, problem = _typed({"--baseline": SAVED})
    assert not problem and changed["baseline"] == SAVED
    assert changed["loaded"].data == _gate("").before.data and changed["tolerances"] == _gate("").tolerances


def test_the_tolerance_set_on_the_screen_is_check_baselines():
    changed, problem = _typed({"--tolerance": "time=5%,hbm_bytes=1024"}, {"use_cache": True, "baseline": SAVED})
    assert not problem and changed["tolerances"] == _gate("--tolerance time=5%,hbm_bytes=1024").tolerances
    _, problem = _typed({"--tolerance": "time=5%"})  # no baseline
    assert "--tolerance applies to --baseline FILE" in problem


@pytest.mark.parametrize("option, typed, says", [
    ("--time-budget", "soon", "--time-budget soon: give a number > 0"),
    ("--roofline", "tpu-v99", "tpu-v99"),
    ("--no-cache", "maybe", "on or off"),
    ("--baseline", "no-such.json", "no such file"),
])
def test_a_bad_value_stays_on_the_screen_with_one_line(option, typed, says):
    changed, problem = _typed({option: typed})
    assert changed is None and says in problem and "\n" not in problem.strip()


def test_o_opens_the_options_and_a_changed_one_compiles_again(monkeypatch):
    async def run():
        app = InspectorApp(Session(MATMUL, "cpu"))
        async with app.run_test(size=(100, 40)) as pilot:
            await loaded(pilot)
            await pilot.press("o")
            await pilot.pause()
            assert isinstance(app.screen, OptionsScreen)
            app.screen.query_one("#option-roofline").value = "tpu-v5e"
            app.screen.query_one("#option-baseline").value = SAVED
            app.screen.query_one("#option-roofline").focus()
            await pilot.press("enter")
            await loaded(pilot)
            assert app.session.roofline == "tpu-v5e" and app.report.fusions.chip == "tpu-v5e"
            assert app.baseline.path == SAVED
            assert "cpu" in str(app.query_one("#overview-baseline").content)  # no figures on cpu: said so
    asyncio.run(run())
