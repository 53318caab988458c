"""One request, whichever front door: every option of show, check and tune that the command line
has, the Python API (and, for show, the terminal UI's Session) can set too, and it reaches the
same field of the same record (inspector/request.py's Request; tune's SweepRequest). Nothing
is compiled: the records are compared, and a target's options by the Target they load."""
from __future__ import annotations

import inspect as pyinspect
import shlex

import pytest

import inspector
import inspector.api as api
import inspector.compilation.compile_cache as compile_cache
import inspector.verbs.rules as verb_rules
from inspector.commands.parser import build_parser
from inspector.commands.requests import show_request
from inspector.request import Cache
from inspector.session import Session
from inspector.tuning.api import sweep_request
from inspector.results.view_table import Needs

MATMUL = "samples/matmul.py:tiled"
SHARDED = "tests/data/sharded.py:step"


def _cli(line: str):
    opts = build_parser().parse_args(shlex.split(line))
    opts.chip_reason = None
    return opts


def _cli_request(line: str):
    return show_request(_cli(line))


def _target_facts(request) -> dict:
    """What a target's options decide: its inputs, params, reference, mesh and shardings."""
    import jax

    t = request.target()
    leaves = jax.tree.leaves((tuple(t.args), dict(t.kwargs)))
    return {"inputs": [(tuple(x.shape), str(x.dtype)) for x in leaves], "params": dict(t.params),
            "reference": getattr(t.reference, "__name__", None), "mesh": t.mesh, "shardings": str(t.shardings)}


@pytest.fixture(autouse=True)
def _a_tpu_to_measure_on(monkeypatch):
    """--measure needs an attached TPU (checked before any request is made): here, none is needed."""
    monkeypatch.setattr(verb_rules, "check_measure", lambda *a, **k: None)


# show: (the option on the command line, inspect's keywords, the Session's, what the Request holds)
SHOW = {
    "--target": ("--target tpu-v6e", {"target": "tpu-v6e"}, {"chip": "tpu-v6e"}, lambda r: r.chip),
    "--roofline": ("--roofline h100", {"roofline": "h100"}, {"roofline": "h100"}, lambda r: r.roofline),
    "--no-cache": ("--no-cache", {"cache": False}, {"use_cache": False}, lambda r: r.cache is Cache.ON),
    "--time": ("--time", {"time": True}, {"time": True}, lambda r: r.needs.time),
    "--time-budget": ("--time --time-budget 30", {"time": True, "time_budget": 30}, {"time": True, "time_budget": 30},
                      lambda r: r.budget().seconds),
    "--time-memory": ("--time --time-memory 2", {"time": True, "time_memory": 2}, {"time": True, "time_memory": 2 * 2**30},
                      lambda r: r.budget().memory_bytes),
    "--measure": ("--measure", {"measure": True}, {"measure": True}, lambda r: r.measure),
    "--passes": ("--passes", {"passes": True}, {"passes": True}, lambda r: r.needs.passes),
    "--pass": ("--pass 3", {"pass_select": "3"}, {"pass_select": "3"}, lambda r: r.pass_select),
    "--fixes": ("--fixes", {"fixes": True}, {"fixes": True}, lambda r: r.fixes),
}
# a target's options: what each door loads
SHOW_TARGET = {
    "--args": (MATMUL, "--args 'bf16[256,512] bf16[512,128]'", ("bf16[256,512]", "bf16[512,128]"), {}, {"args": "bf16[256,512] bf16[512,128]"}),
    "--set": (MATMUL, "--set bm=128", (), {"params": {"bm": 128}}, {"sets": ["bm=128"]}),
    "--ref": (MATMUL, "--ref tiled", (), {"reference": "tiled"}, {"ref": "tiled"}),  # INSPECT names xla
    "--mesh": (SHARDED, "--target tpu-v5e:2x4 --mesh data=2,model=4", (), {"target": "tpu-v5e:2x4", "mesh": "data=2,model=4"},
               {"chip": "tpu-v5e:2x4", "mesh": "data=2,model=4"}),
    "--shard": (SHARDED, "--target tpu-v5e:2x4 --mesh data=8 --shard \"P('data',None) P() P('data',None)\"", (),
                {"target": "tpu-v5e:2x4", "mesh": "data=8", "shardings": "P('data',None) P() P('data',None)"},
                {"chip": "tpu-v5e:2x4", "mesh": "data=8", "shard": "P('data',None) P() P('data',None)"}),
}
# show's options that choose how the Report is shown, not what it holds: Report.show and to_json take them
SHOWN = {"--view": "view", "--sort": "sort", "--top": "top", "--json": "to_json"}


def _options(verb: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb").choices[verb]
    return {s for a in sub._actions for s in a.option_strings if s.startswith("--") and s not in ("--help", "--debug")}


def test_every_option_of_show_is_in_the_table():
    assert _options("show") == set(SHOW) | set(SHOW_TARGET) | set(SHOWN)
    shown = pyinspect.signature(inspector.Report.show).parameters
    assert all(name in shown or hasattr(inspector.Report, name) for name in SHOWN.values())


@pytest.mark.parametrize("option", sorted(SHOW))
def test_a_show_option_is_the_same_request_from_every_door(option):
    line, api_kwargs, session_kwargs, field = SHOW[option]
    base = _cli_request(f"show {MATMUL} --target cpu")
    cli = _cli_request(f"show {MATMUL} --target cpu {line}")
    from_api = api.inspect_request(MATMUL, **{"target": "cpu", **api_kwargs})
    session = Session(MATMUL, **{"chip": "cpu", **session_kwargs})
    from_tui = session.request(session.needs())
    if option == "--no-cache" and not compile_cache.enabled():
        pytest.skip("the compile cache is off here (INSPECTOR_NO_CACHE)")
    assert field(cli) != field(base), f"{option} changes nothing on the command line"
    assert field(from_api) == field(cli) == field(from_tui)


@pytest.mark.parametrize("option", sorted(SHOW_TARGET))
def test_a_target_option_loads_the_same_target_from_every_door(option):
    spec, line, api_args, api_kwargs, session_kwargs = SHOW_TARGET[option]
    chip = "cpu" if "--target" not in line else ""
    cli = _cli_request(f"show {spec} {'--target cpu' if chip else ''} {line}")
    from_api = api.inspect_request(spec, *api_args, **{"target": "cpu", **api_kwargs})
    from_tui = Session(spec, **{"chip": "cpu", **session_kwargs}).request(Needs())
    assert _target_facts(from_api) == _target_facts(cli) == _target_facts(from_tui)
    assert _target_facts(cli) != _target_facts(_cli_request(f"show {spec} --target cpu"))


# check: the option, check's keyword
CHECK = {"--target": "targets", "--args": "*args", "--ref": None, "--set": "params", "--mesh": "mesh", "--shard": "shardings",
         "--json": "dataclasses.asdict", "--no-cache": "cache", "--estimate-only": "estimate_only", "--sweep": "sweep",
         "--baseline": "baseline", "--tolerance": "tolerance"}


def test_every_option_of_check_is_a_keyword_of_inspector_check():
    assert _options("check") == set(CHECK)


@pytest.mark.parametrize("option", sorted(CHECK))
def test_a_check_option_is_a_keyword_of_inspector_check(option):
    keyword = CHECK[option]
    if keyword is None:  # check reads no reference: --ref is a target option every verb's parser shares
        assert "reference" not in pyinspect.signature(inspector.check).parameters
        return
    if keyword.startswith("*") or "." in keyword:
        return  # the inputs after the function; the result is a dataclass (its JSON)
    assert keyword in pyinspect.signature(inspector.check).parameters


SAVED = "docs/baselines/matmul-jax-0.10.2.json"  # holds samples/matmul.py's entries on tpu-v5e and tpu-v6e
# check --baseline: (the options on the command line, check's keywords, what the Gate holds)
GATE = {
    "--baseline": ("", {}, lambda g: (g.before.path, g.before.chips, g.request.chips, g.request.time)),
    "--tolerance": ("--tolerance time=5%,hbm_bytes=1024", {"tolerance": "time=5%,hbm_bytes=1024"}, lambda g: g.tolerances),
    "--target": ("--target tpu-v6e", {"targets": ["tpu-v6e"]}, lambda g: g.request.chips),
    "--set": ("--set bm=128", {"params": {"bm": 128}}, lambda g: g.request.sets),
    "--no-cache": ("--no-cache", {"cache": False}, lambda g: g.request.template.cache is Cache.ON),
    "TARGET...": ("samples/attention.py:naive", {}, lambda g: (g.request.specs, g.covered)),
}


@pytest.mark.parametrize("option", sorted(GATE))
def test_a_check_baseline_option_is_the_same_gate_from_the_api(option):
    """check --baseline's options through inspector.check's keywords: the same Gate (what is computed
    now, on which chips, against which file, within which tolerances). Nothing is compiled."""
    from inspector.commands.baseline import check_gate

    line, api_kwargs, field = GATE[option]
    more = [line] if option == "TARGET..." else []

    def cli_gate(text):
        opts = build_parser().parse_args(shlex.split(text))
        opts.chip_reason = None if "--target" in text else "the baseline's"
        return check_gate(opts)
    base = cli_gate(f"check samples/matmul.py --baseline {SAVED}")
    cli = cli_gate(f"check samples/matmul.py {' '.join(more)} --baseline {SAVED} {'' if more else line}")
    from_api = api.check_gate(["samples/matmul.py", *more], baseline=SAVED, **api_kwargs)
    if option == "--no-cache" and not compile_cache.enabled():
        pytest.skip("the compile cache is off here (INSPECTOR_NO_CACHE)")
    if option != "--baseline":
        assert field(cli) != field(base), f"{option} changes nothing on the command line"
    assert field(from_api) == field(cli)


@pytest.mark.parametrize("kwargs, says", [
    ({"tolerance": "time=5%"}, "tolerance applies to baseline=FILE"),
    ({"baseline": SAVED, "tolerance": "speed=5%"}, "tolerance 'speed=5%': no figure 'speed'"),
    ({"baseline": SAVED, "estimate_only": True}, "estimate_only does not go with baseline"),
    ({"baseline": SAVED, "targets": ["cpu"]}, "not cpu: e.g. targets=['tpu-v5e', 'tpu-v6e']"),
    ({"baseline": SAVED, "targets": ["tpu-v4"]}, "has no figures for tpu-v4"),
])
def test_check_with_a_baseline_refuses_what_the_command_line_refuses(kwargs, says):
    with pytest.raises(inspector.UsageError) as err:
        inspector.check("samples/matmul.py", **kwargs)
    assert says in str(err.value)
    with pytest.raises(inspector.UsageError, match="give 'file.py:function' specs"):
        inspector.check(lambda x: x, baseline=SAVED)
    with pytest.raises(inspector.UsageError, match="several with baseline=FILE"):
        inspector.check(["samples/matmul.py:tiled", "samples/matmul.py:xla"])


# tune: (the option on the command line, tune's keywords, the SweepRequest's field)
TUNE = {
    "--target": ("--target tpu-v6e", {"targets": ["tpu-v6e"]}, lambda r: r.chips),
    "--args": ("--args 'bf16[256,512] bf16[512,128]'", {"shapes": ["bf16[256,512] bf16[512,128]"]}, lambda r: r.args),
    "--grid": ("--grid bm=128,256", {"grid": {"bm": [128, 256]}}, lambda r: r.grid),
    "--set": ("--set bk=128", {"params": {"bk": 128}}, lambda r: r.fixed),
    "--workers": ("--workers 2", {"workers": 2}, lambda r: r.workers),
    "--ray": ("--ray 127.0.0.1:6379", {"ray": "127.0.0.1:6379"}, lambda r: r.ray),
    "--table": ("--table {table}", {"table": "{table}"}, lambda r: r.table),
    "--top": ("--measure --top 3", {"measure": True, "top": 3}, lambda r: r.measure),
    "--time-budget": ("--time-budget 30", {"time_budget": 30}, lambda r: r.budget.seconds),
    "--measure": ("--measure", {"measure": True}, lambda r: r.measure),
    "--no-cache": ("--no-cache", {"cache": False}, lambda r: r.cache is True),
}
TUNE_SHOWN = {"--json": "TuneResult.to_dict"}


def test_every_option_of_tune_is_in_the_table():
    assert _options("tune") == set(TUNE) | set(TUNE_SHOWN)


@pytest.mark.parametrize("option", sorted(TUNE))
def test_a_tune_option_is_the_same_sweep_request_from_the_api(option, tmp_path, monkeypatch):
    from inspector.commands import tune as tune_command
    from inspector.compilation import backends

    if option in ("--measure", "--top"):  # ranks on the attached TPU, which must be first in the targets
        monkeypatch.setattr(backends, "attached_chip", lambda: inspector.base.chips.get_chip("tpu-v5e"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    table = str(tmp_path / "table.json")
    line, api_kwargs, field = TUNE[option]
    api_kwargs = {k: (v.format(table=table) if isinstance(v, str) else v) for k, v in api_kwargs.items()}
    targets = "--target tpu-v5e " if option != "--target" else ""
    cli = tune_command.request(_cli(f"tune {MATMUL} {targets}{line.format(table=table)}"))
    base = tune_command.request(_cli(f"tune {MATMUL} --target tpu-v5e"))
    from_api = sweep_request(MATMUL, **{"targets": ["tpu-v5e"], **api_kwargs})
    if option == "--no-cache" and not compile_cache.enabled():
        pytest.skip("the compile cache is off here (INSPECTOR_NO_CACHE)")
    assert field(cli) != field(base), f"{option} changes nothing on the command line"
    assert field(from_api) == field(cli)


def test_the_tune_api_takes_time_memory_the_command_line_has_not():
    """--time-memory is show's; tune's budget takes the memory too, from the API and the UI's session."""
    req = sweep_request(MATMUL, targets=["tpu-v5e"], time_memory=2)
    assert req.budget.memory_bytes == 2 * 2**30
    assert Session(MATMUL, "tpu-v5e", time_memory=2 * 2**30).tune_budget().memory_bytes == 2 * 2**30
