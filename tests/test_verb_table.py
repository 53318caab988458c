"""The table of verbs (inspector/commands/verb_table.py): a new verb is one row and its functions.
The verb added here has its options, help, examples, printer and work in its row alone, and the
command line parses it, lists it in --help, runs its work and prints what the work returned."""
from __future__ import annotations

import dataclasses

import pytest

from inspector import cli
from inspector.commands import verb_table
from inspector.commands.parser import build_parser, verb_names
from inspector.commands.verb_table import VERBS, Verb


def _greet_options(p):
    p.add_argument("name", help="who to greet")
    p.add_argument("--loud", action="store_true", help="in capitals")


@dataclasses.dataclass(frozen=True)
class _Greeting:
    """The verb's own record of its options: what crosses to the child beside the Request."""

    name: str


def _greet_work(request, options: _Greeting):
    """In the child process (here, with isolate=False: this one): data, never printed."""
    return {"greeting": f"hello, {options.name}"}


def _greet_printer(opts) -> int:
    from inspector.commands.work import run
    from inspector.request import Request

    text = run("greet", Request("", debug=opts.debug), _Greeting(opts.name), isolate=opts.isolate)["greeting"]
    print(text.upper() if opts.loud else text)
    return 0


GREET = Verb("greet", "say hello to someone", ("inspector greet world",), (_greet_options,), _greet_printer, _greet_work)


@pytest.fixture
def greet(monkeypatch):
    monkeypatch.setattr(verb_table, "VERBS", VERBS + (GREET,))


def test_a_new_verb_is_one_row(greet, capsys):
    assert cli.main(["greet", "world", "--loud"], isolate=False) == 0
    assert capsys.readouterr().out == "HELLO, WORLD\n"


def test_a_new_verb_is_in_the_help_and_the_usage_error(greet, capsys):
    assert "say hello to someone" in build_parser().format_help()
    assert verb_names()[-1] == "greet"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["greet", "--help"])
    out = capsys.readouterr().out
    assert "who to greet" in out and "inspector greet world" in out


def test_every_verb_is_a_row_whose_functions_load():
    names = [v.name for v in VERBS]
    assert len(names) == len(set(names))
    for verb in VERBS:
        assert callable(verb_table.load(verb.printer)), verb.name
        assert verb.work is None or callable(verb_table.load(verb.work)), verb.name
        assert verb.examples and all(line.startswith("inspector ") for line in verb.examples), verb.name
