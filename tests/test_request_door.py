"""The Request is made at the door and is what crosses the process line: the command line sends
the child process a Request and the verb's own record of options (never argparse's Namespace);
one cache setting; the Session holds a Request; what a report computes comes from the table of
views. Nothing here compiles: the child's call is caught before it starts."""
from __future__ import annotations

import argparse
import dataclasses
import pathlib
import pickle
import re

import pytest

import inspector.base.child_process as child_process
from inspector import api, cli
from inspector.request import Cache, Request
from inspector.results.view_table import ON_DEMAND, Needs, everyday_needs
from inspector.session import Session

ROOT = pathlib.Path(__file__).resolve().parent.parent
MATMUL = "samples/matmul.py:tiled"


def test_the_commands_read_their_options_by_name():
    """An option a verb has is read as ``opts.name``; ``getattr(opts, ...)`` is for the few that
    another verb's parser may lack (the parser's own)."""
    found = sum(path.read_text().count("getattr(opts") for path in (ROOT / "inspector" / "commands").glob("*.py"))
    assert found <= 10, f"{found} getattr(opts, ...) in inspector/commands: build the Request at the door instead"


class _Sent(Exception):
    """Raised by the fake child: what the parent sent, caught before any work."""


def _no_namespace(value, where: str = "it") -> None:
    assert not isinstance(value, argparse.Namespace), f"{where} is argparse's Namespace"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _no_namespace(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _no_namespace(item, f"{where}[{i}]")


@pytest.mark.parametrize("line", [
    f"show {MATMUL} --target cpu",
    f"show {MATMUL} --target cpu --view fusions --no-cache",
    f"check {MATMUL} --target tpu-v5e,tpu-v6e --estimate-only",
    f"fix {MATMUL} --target tpu-v5e --no-numerics",
    f"diff {MATMUL} --target cpu --runs 0",
    f"compare {MATMUL} --target cpu --set-a bm=128 --set-b bm=256",
    f"export {MATMUL} --target cpu --dot {{tmp}}/g.dot",
    "doctor --target tpu-v5e",
])
def test_the_child_is_sent_a_request_and_the_verbs_own_record(line, tmp_path, monkeypatch, capsys):
    sent = []

    def child(work, *args, **kwargs):
        sent.append(args)
        raise _Sent

    monkeypatch.setattr(child_process, "run_isolated", child)
    cli.main(line.format(tmp=tmp_path).split(), isolate=True)
    assert len(sent) == 1, capsys.readouterr().err
    verb, request, options = sent[0]
    assert verb == line.split()[0]
    assert isinstance(request, Request)
    _no_namespace(sent[0])
    assert pickle.loads(pickle.dumps(sent[0])) == sent[0]  # plain data, as the child gets it


def test_the_cache_has_three_settings_and_refresh_is_spelt_once():
    assert [c.name for c in Cache] == ["ON", "OFF", "REFRESH"]
    assert Cache(True) is Cache.ON and Cache(False) is Cache.OFF and not Cache.OFF and Cache.REFRESH
    spelt = [str(path.relative_to(ROOT)) for path in (ROOT / "inspector").rglob("*.py")
             if re.search(r"""^\s*REFRESH\s*=\s*["']refresh["']""", path.read_text(), re.M)]
    assert spelt == ["inspector/compilation/compile_cache.py"]


def test_a_request_takes_the_old_cache_values_as_their_setting():
    assert Request(MATMUL, cache="refresh").cache is Cache.REFRESH
    assert Request(MATMUL, cache=False).cache is Cache.OFF


def test_the_session_holds_a_request_and_copies_none_of_its_fields():
    assert [f.name for f in dataclasses.fields(Session)] == ["template", "changes", "backward"]
    request = Request(MATMUL, "tpu-v5e", args="bf16[256,512] bf16[512,128]", sets=("bm=128",), roofline="h100")
    session = Session(request=request)
    assert (session.spec, session.chip, session.sets, session.roofline) == (MATMUL, "tpu-v5e", ["bm=128"], "h100")
    assert session.with_time().request(Needs()).needs == Needs()  # the needs asked for, the rest the template's
    assert session.with_time().time and not session.time
    assert session.with_chip("tpu-v6e").template == dataclasses.replace(request, chip="tpu-v6e")
    # the old spelling makes the same Request
    assert Session(MATMUL, "tpu-v5e", args=request.args, sets=["bm=128"], roofline="h100").template == request


def test_what_a_report_computes_comes_from_the_table_of_views():
    every = everyday_needs()
    assert every.compile and every.fusions and every.pallas and every.jaxpr_text and every.collectives
    assert not any(getattr(every, f.name) for f in dataclasses.fields(Needs) if getattr(ON_DEMAND, f.name))
    assert Session(MATMUL).needs() == every
    assert Session(MATMUL, time=True, buffers=True).needs() == every | Needs(time=True, buffers=True)
    assert api.inspect_request(MATMUL, target="cpu").needs == every
    assert api.inspect_request(MATMUL, target="cpu", time=True).needs == every | Needs(time=True)
