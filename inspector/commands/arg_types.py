"""The command line's argument types: one-line refusals (argparse turns them into exit 2)."""
from __future__ import annotations

import argparse


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number >= 0")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds > 0")
    return value


def gibibytes(text: str) -> int:
    """A size in GiB (a fraction allowed), as bytes."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GiB") from None
    if not 0 < value < float("inf") or value * 2**30 < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of GiB > 0")
    return int(value * 2**30)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return value


class SetValues(argparse.Action):
    """--set NAME=VALUE, repeatable; a name given twice is refused (exit 2): which one would win is
    not what the command line says (a baseline's key sorts them, the trace takes the last)."""

    def __call__(self, parser, namespace, values, option_string=None):
        found = list(getattr(namespace, self.dest, None) or [])
        name = str(values).partition("=")[0].strip()
        if name and any(str(v).partition("=")[0].strip() == name for v in found):
            parser.error(f"{option_string} {name} given twice: give each parameter once")
        setattr(namespace, self.dest, [*found, values])
