"""The options screen (o): every option of show and check that no key of its own sets, typed as the
command line spells it, reaches the same field as the command line's option (inspector/request.py's
Request; check --baseline's gate for --baseline and --tolerance). The tune screen (u): every option
of `inspector tune`, typed in its field, is the same field of the SweepRequest the command line's
option makes (inspector.tuning.sweep). Each through Textual's pilot."""
from __future__ import annotations

import shlex

import pytest
from textual.app import App
from textual.widgets import Input

import inspector.compilation.compile_cache as compile_cache
import inspector.verbs.rules as verb_rules
from conftest import loaded
from inspector.base.chips import get_chip
from inspector.commands.baseline import check_gate
from inspector.commands.parser import build_parser
from inspector.commands.requests import show_request
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.options_screen import OPTIONS, OptionsScreen
from inspector.views.tui.tune_form import TuneForm
from inspector.views.tui.tune_options import ELSEWHERE as TUNE_ELSEWHERE
from inspector.views.tui.tune_options import OPTIONS as TUNE_OPTIONS
from inspector.views.tui.tune_screen import TuneScreen
from test_request import _options
from test_tui import plain

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


async def _typed(values: dict[str, str], current: dict | None = None, size=(100, 40)):
    """The options screen on its own, ``values`` typed into its fields ({option: text}), then Enter:
    what it gave back (None while it stays), and its problem line (empty where it is not on screen)."""
    fields = {option: name for name, option, _ in OPTIONS}

    class Host(App):
        given = None

        def on_mount(self) -> None:
            def done(changed):
                self.given = changed
            self.push_screen(OptionsScreen(current or {"use_cache": True}), done)

    app = Host()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for option, text in values.items():
            app.screen.query_one(f"#option-{fields[option]}").value = text
        app.screen.query_one(f"#option-{fields[next(iter(values))]}").focus()
        await pilot.press("enter")
        await pilot.pause()
        if not isinstance(app.screen, OptionsScreen):
            return app.given, ""
        shown = app.screen.query_one("#options-problem")
        seen = shown.region.height > 0 and shown.region.bottom <= size[1]  # within the terminal, not scrolled away
        return app.given, str(shown.content) if seen else ""


def test_every_option_the_screen_offers_is_tested():
    assert {option for _, option, _ in OPTIONS} == set(SHOW) | {"--baseline", "--tolerance"}


@pytest.mark.asyncio
@pytest.mark.parametrize("option", sorted(SHOW))
async def test_a_show_option_set_on_the_screen_is_the_command_lines(option):
    typed, line, field = SHOW[option]
    changed, problem = await _typed({option: typed})
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


@pytest.mark.asyncio
async def test_the_baseline_set_on_the_screen_is_check_baselines():
    changed, problem = await _typed({"--baseline": SAVED})
    assert not problem and changed["baseline"] == SAVED
    assert changed["loaded"].data == _gate("").before.data and changed["tolerances"] == _gate("").tolerances


@pytest.mark.asyncio
async def test_the_tolerance_set_on_the_screen_is_check_baselines():
    changed, problem = await _typed({"--tolerance": "time=5%,hbm_bytes=1024"}, {"use_cache": True, "baseline": SAVED})
    assert not problem and changed["tolerances"] == _gate("--tolerance time=5%,hbm_bytes=1024").tolerances
    _, problem = await _typed({"--tolerance": "time=5%"})  # no baseline
    assert "--tolerance applies to --baseline FILE" in problem


@pytest.mark.asyncio
@pytest.mark.parametrize("option, typed, says", [
    ("--time-budget", "soon", "--time-budget soon: give a number > 0"),
    ("--roofline", "tpu-v99", "tpu-v99"),
    ("--no-cache", "maybe", "on or off"),
    ("--baseline", "no-such.json", "no such file"),
    # checked as the command line checks them: the worker would refuse them after the report is dropped
    ("--args", "f32[1,", "bad shape spec"),
    ("--mesh", "data=x", "not a whole number"),
    ("--shard", "P((", "one PartitionSpec per input"),
])
async def test_a_bad_value_stays_on_the_screen_with_one_line(option, typed, says):
    changed, problem = await _typed({option: typed}, size=(80, 24))  # the problem is seen at 80x24 too
    assert changed is None and says in problem and "\n" not in problem.strip()


@pytest.mark.asyncio
async def test_a_baseline_the_loader_fails_on_in_any_way_is_a_line_on_the_screen(monkeypatch):
    import inspector.baseline.record as record

    def broken(path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(record, "load", broken)
    changed, problem = await _typed({"--baseline": SAVED})
    assert changed is None and "cannot load it (RecursionError" in problem


@pytest.mark.asyncio
async def test_o_opens_the_options_and_a_changed_one_compiles_again(monkeypatch):
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


# ----------------------------------------------------------------------------- tune

TUNE_FORM = TuneForm(MATMUL, "tiled", {"bm": 256, "bk": 256, "bn": 256},
                     {"bm": [256, 128, 512, 1024], "bk": [256, 128, 896, 1792], "bn": [256, 128, 512, 1152]})
# tune's option: (what is typed on the tune screen {the field's id: text}, the Session it opens on,
# the command line's words, what the SweepRequest holds). The screen's option fields, then the rest of the form.
TUNE = {
    "--args": ({"tune-option-args": "bf16[256,512] bf16[512,128]; bf16[512,512] bf16[512,256]"}, SESSION,
               "--args 'bf16[256,512] bf16[512,128]' --args 'bf16[512,512] bf16[512,256]'", lambda r: r.args),
    "--workers": ({"tune-option-workers": "2"}, SESSION, "--workers 2", lambda r: r.workers),
    "--ray": ({"tune-option-ray": "127.0.0.1:6379"}, SESSION, "--ray 127.0.0.1:6379", lambda r: r.ray),
    "--table": ({"tune-option-table": "{table}"}, SESSION, "--table {table}", lambda r: r.table),
    "--top": ({"tune-option-measure": "on", "tune-option-top": "3"}, SESSION, "--measure --top 3", lambda r: r.measure),
    "--measure": ({"tune-option-measure": "on"}, SESSION, "--measure", lambda r: r.measure),
    "--time-budget": ({"tune-option-time_budget": "30"}, SESSION, "--time-budget 30", lambda r: r.budget),
    "--no-cache": ({"tune-option-cache": "off"}, SESSION, "--no-cache", lambda r: r.cache),
    # the chips field, a parameter's values, a parameter left at the parameter screen's (x) value
    "--target": ({"tune-chips": "tpu-v6e"}, SESSION, "--target tpu-v6e", lambda r: r.chips),
    "--grid": ({"tune-param-bm": "128, 256"}, SESSION, "--grid bm=128,256", lambda r: r.grid.get("bm")),
    "--set": ({"tune-param-bk": ""}, SESSION.with_params({"bk": "128"}), "--set bk=128", lambda r: r.fixed),
}
# show's and check's options that a key of the UI sets, not the options screen
KEYS = {"--target": "t (one chip)", "--set": "x", "--time": "T", "--measure": "D", "--passes": "P", "--view": "the tabs' keys",
        "--sort": "s", "--top": "the tables scroll", "--json": "e exports the Report as JSON",
        "--fixes": "F tries the fixes (A applies a finding's top one)"}
# check's options that the terminal UI does not take, each with why: an exemption named, not a silence
# (--target's one chip is t's; --json's Report, e's: several chips and check's verdicts are not the UI's)
CHECK_CLI_ONLY = {
    "--target": "several chips: a verdict per chip needs a compile per chip, and the UI analyses one chip at a time "
                "(t switches); the Pallas tab's VMEM bars already give every TPU generation's estimate",
    "--estimate-only": "it skips the compile the UI is built on; the Pallas tab shows the estimate beside the compiler's figure",
    "--sweep": "it estimates every INSPECT combination without compiling; the UI shows one at a time (x), "
               "and the tune screen (u) sweeps them with compiles, the pruned rows their VMEM verdicts",
    "--json": "check's verdicts as JSON: the UI runs no check (e exports the Report as JSON)",
}


async def _tune_typed(typed: dict[str, str], session: Session = SESSION, form: TuneForm = TUNE_FORM):
    """The tune screen on its own (no compile: the form as the app makes it), ``typed`` into its
    fields, then Enter: the SweepRequest it would run (None while it stays), and its problem line."""
    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(TuneScreen(form, session))

    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen, started = app.screen, []
        screen.start = started.append  # the sweep itself is test_tui_tune.py's
        for field, text in typed.items():
            screen.query_one(f"#{field}").value = text
        screen.query_one(f"#{next(iter(typed))}").focus()
        await pilot.press("enter")
        await pilot.pause()
        return (started or [None])[0], plain(screen, "#tune-problem")


def _tune_cli(line: str):
    from inspector.commands import tune as tune_command

    return tune_command.request(build_parser().parse_args(shlex.split(f"tune {MATMUL} {line}")))


def test_every_option_of_tune_is_on_the_tune_screen_and_tested():
    on_screen = {option for _, option, _ in TUNE_OPTIONS}
    assert on_screen | set(TUNE_ELSEWHERE) == _options("tune")
    assert set(TUNE) == on_screen | (set(TUNE_ELSEWHERE) - {"--json"})


def test_every_option_of_show_and_check_is_on_the_options_screen_a_key_or_named_command_line_only():
    from test_request import CHECK, SHOWN

    """Each of show's and check's options: on the options screen (o), a key of its own (KEYS), or, for
    check, named command-line only with why (CHECK_CLI_ONLY): the UI analyses one chip and runs no check."""
    offered = {option for _, option, _ in OPTIONS}
    assert _options("show") - offered == set(KEYS) and set(SHOWN) <= set(KEYS)
    assert _options("check") == set(CHECK)  # test_request.py: each is a keyword of inspector.check
    assert _options("check") - offered == set(CHECK_CLI_ONLY) | {"--set"}  # --set: the parameter screen (x)
    assert all(why and "\n" not in why for why in CHECK_CLI_ONLY.values())


@pytest.mark.asyncio
@pytest.mark.parametrize("option", sorted(TUNE))
async def test_a_tune_option_set_on_the_tune_screen_is_the_command_lines(option, tmp_path, monkeypatch):
    from inspector.compilation import backends

    if "measure" in str(TUNE[option][0]):  # ranks on the attached TPU: here, none is needed
        monkeypatch.setattr(backends, "attached_chip", lambda: get_chip("tpu-v5e"))
        monkeypatch.setattr(verb_rules, "check_measure", lambda *a, **k: None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    table = str(tmp_path / "table.json")
    typed, session, line, field = TUNE[option]
    chips = {} if option == "--target" else {"tune-chips": "tpu-v5e"}
    form = TUNE_FORM if option != "--set" else TuneForm(MATMUL, "tiled", {**TUNE_FORM.current, "bk": 128}, TUNE_FORM.choices)
    from_tui, problem = await _tune_typed({k: v.format(table=table) for k, v in {**typed, **chips}.items()}, session, form)
    assert from_tui is not None, problem
    cli = _tune_cli(f"{'' if option == '--target' else '--target tpu-v5e '}{line.format(table=table)}")
    if option == "--set":  # INSPECT's lists for bm and bn (the screen's fields as they open), bk fixed
        cli = _tune_cli(f"--target tpu-v5e {line} --grid bm=256,128,512,1024 --grid bn=256,128,512,1152")
        assert from_tui.grid == cli.grid
    if option == "--no-cache" and not compile_cache.enabled():
        pytest.skip("the compile cache is off here (INSPECTOR_NO_CACHE)")
    assert field(from_tui) == field(cli) != field(_tune_cli("--target tpu-v5e"))


@pytest.mark.asyncio
@pytest.mark.parametrize("typed, says", [
    ({"tune-option-workers": "0"}, "--workers 0: give 1 or more"),
    ({"tune-option-top": "-1"}, "--top -1: give 0 or more"),
    ({"tune-option-measure": "yes"}, "--measure yes: on or off"),
    ({"tune-option-time_budget": "0.5"}, "--time-budget 0.5"),
    ({"tune-option-cache": "maybe"}, "--no-cache maybe: on or off"),
    ({"tune-option-args": "bf16[256,512] f99[3]"}, "f99"),
    ({"tune-option-table": "/no/such/folder/t.json"}, "--table"),
])
async def test_a_bad_tune_option_stays_on_the_screen_with_one_line(typed, says):
    request, problem = await _tune_typed({**typed, "tune-chips": "tpu-v5e"})
    assert request is None and says in problem and len(problem.strip().splitlines()) == 1


@pytest.mark.asyncio
async def test_the_tune_screen_opens_with_the_options_screens_values():
    """--args, --time-budget and --no-cache set on the options screen (o) are the sweep's, as they were."""
    session = SESSION.with_options(args="bf16[256,512] bf16[512,128]", time_budget=30.0, use_cache=False)
    request, problem = await _tune_typed({"tune-chips": "tpu-v5e"}, session)
    cli = _tune_cli("--target tpu-v5e --args 'bf16[256,512] bf16[512,128]' --time-budget 30 --no-cache")
    assert request is not None, problem
    assert (request.args, request.budget, request.cache) == (cli.args, cli.budget, cli.cache)


@pytest.mark.asyncio
async def test_the_tune_form_with_its_options_fits_80x24():
    """Every field of the form can be reached in an 80x24 terminal (the form scrolls to the focused one)."""
    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(TuneScreen(TUNE_FORM, SESSION))
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        fields = list(screen.query(Input))
        assert len(fields) == 1 + 3 + len(TUNE_OPTIONS)
        for field in fields:
            field.focus()
            await pilot.pause()
            assert field.region.height == 1 and field.region.width >= 20, field.id
            assert screen.query_one("#tune-form").region.contains_region(field.region), field.id


@pytest.mark.asyncio
async def test_the_options_screen_says_each_line_whole_at_80_columns():
    """Its header ran past the modal's edge and was cut; the cache field read "--no-cache (the
    compile cache on; off: --no-cache)", a double negative."""
    from pathlib import Path

    import inspector.views.tui.app as tui_app

    class Host(App):
        CSS_PATH = Path(tui_app.__file__).parent / "app.tcss"  # the modal's width is the app's

        def on_mount(self) -> None:
            self.push_screen(OptionsScreen({"use_cache": True}))

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        inside = app.screen.query_one("#pick").content_region
        labels = [label for label in app.screen.query("Label")]
        said = [str(label.content) for label in labels]
        assert any("Enter applies" in s for s in said) and any(s.startswith("the compile cache  (on") for s in said)
        assert not any("--no-cache  (the" in s for s in said)
        assert all(label.region.right <= inside.right for label in labels), said
