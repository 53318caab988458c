"""The command line's grammar: every verb and option. Parsed before jax loads, so a usage
error answers at once."""
from __future__ import annotations

import argparse
import difflib

from ..base.errors import UsageError
from .help_text import TOP, HelpFormatter
from .options import debug_parent


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # every option's default in --help, the examples as written
        kwargs.setdefault("formatter_class", HelpFormatter)
        # no abbreviations: `--time` must not quietly mean `--time-budget` where only that exists
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line and exit 2, like every other usage error
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def parse_args(self, args=None, namespace=None):
        """As argparse, but an unknown option names the closest ones the verb takes (`--viwe`: did you
        mean --view?) and the verb's own --help."""
        opts, extras = self.parse_known_args(args, namespace)
        if extras:
            verb = getattr(opts, "verb", None)
            verbs = getattr(self, "verb_parsers", {})
            known = verbs[verb] if verb in verbs else self
            raise UsageError(unknown_arguments(extras, known, {n: p for n, p in verbs.items() if n != verb}))
        return opts


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb, in the order of the table of verbs (verb_table.py)."""
    from . import verb_table

    parser = _Parser(prog="inspector", description="Inspect what XLA and Pallas make of a JAX function.", epilog=TOP)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and jax/libtpu logs")
    parser.add_argument("-V", "--version", action="store_true", help="the inspector's version and the jax, jaxlib and libtpu it runs on")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    common = [debug_parent(_Parser)]
    parser.verb_parsers = {}  # type: ignore[attr-defined]
    for verb in verb_table.VERBS:
        p = sub.add_parser(verb.name, help=verb.help, parents=common, epilog=verb.epilog)
        for add in verb.options:
            add(p)
        parser.verb_parsers[verb.name] = p  # type: ignore[attr-defined]
    return parser


def unknown_arguments(extras: list[str], parser: argparse.ArgumentParser,
                      others: dict[str, argparse.ArgumentParser] | None = None) -> str:
    """The words argparse could not place, with a hint for the first unknown option among them: the
    closest option ``parser`` takes (`--viwe`: did you mean --view?), else the verbs of ``others``
    that take it (`inspector TARGET --view hlo`: --view is show's), else the closest of theirs."""
    said = f"unrecognized arguments: {' '.join(extras)}"
    word = next((w.split("=", 1)[0] for w in extras if w.startswith("--")), None)
    if word is not None:
        said += _option_hint(word, parser, others or {})
    return f"{said} (see `{parser.prog} --help`)"


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for action in parser._actions for o in action.option_strings if o.startswith("--")]


def _closest(word: str, options: list[str]) -> str | None:
    # compared without the dashes, which every option shares (with them `--time` came out as `--mesh`)
    names = {o[2:]: o for o in options}
    close = difflib.get_close_matches(word[2:], list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None


def _option_hint(word: str, parser: argparse.ArgumentParser, others: dict[str, argparse.ArgumentParser]) -> str:
    if (close := _closest(word, _long_options(parser))) is not None:
        return f" (did you mean {close}?)"
    here = "the UI" if parser.prog.endswith(" tui") else parser.prog.removeprefix("inspector ")
    owners = [name for name in verb_names() if name in others and word in _long_options(others[name])]
    if owners:
        return f" ({word} is an option of {', '.join(owners)}, not of {here}: inspector {owners[0]} TARGET {word} ...)"
    for name in verb_names():
        if name in others and (close := _closest(word, _long_options(others[name]))) is not None:
            return f" (did you mean {name}'s {close}?)"
    return ""


def unknown_verb(word: str) -> str | None:
    """The one line for a first word that is neither a verb nor a target (no `:`, no path): a
    misspelt verb (`inspector chekc`), with the closest verbs."""
    if ":" in word or "/" in word or word.endswith(".py"):
        return None
    names = verb_names() + ("tui",)
    close = difflib.get_close_matches(word, names, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (f"unknown verb {word!r}{hint}: the verbs are {', '.join(verb_names())}; "
            "or give a target, path/to/file.py:function")


def verb_names() -> tuple[str, ...]:
    """The verbs a usage error names, in their rows' order for it (all but tui, which `inspector TARGET` opens)."""
    from . import verb_table

    listed = [v for v in verb_table.VERBS if v.listed is not None]
    return tuple(v.name for v in sorted(listed, key=lambda v: v.listed or 0))


def chosen_chip(opts) -> None:
    """--target left out: the chip of compilation/default_target.py's one rule, for every verb
    that compiles a target and for the UI and its overview in a pipe alike; why, in
    ``opts.chip_reason`` (the overview says it)."""
    opts.chip_reason = None
    if getattr(opts, "chip", "") is not None or opts.verb == "doctor":
        return
    from ..compilation.default_target import default_target

    opts.chip, opts.chip_reason = default_target(opts.verb)


def normalise(argv: list[str]) -> list[str]:
    """`inspector TARGET ...` is `inspector tui TARGET ...`."""
    rest = [a for a in argv if a != "--debug"]
    if rest and not rest[0].startswith("-") and rest[0] not in verb_names() + ("tui",):
        if (message := unknown_verb(rest[0])) is not None:
            raise UsageError(message)
        i = argv.index(rest[0])
        return argv[:i] + ["tui"] + argv[i:]
    return argv
