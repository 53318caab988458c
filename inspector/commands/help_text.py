"""What `inspector --help` and `inspector VERB --help` print beyond the options: each option's
default (said once, by the formatter, where its help does not say it already) and a few examples
per verb (each verb's row in verb_table.py lists its own). The examples are commands that run as written from the repository's root
(tests/test_docs.py runs them, as it runs the README's)."""
from __future__ import annotations

import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' lines as written and ends an option's help with its default, unless the
    help already names it (``default ...``); a flag is off unless given, and says nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or "%(default)" in text or default is argparse.SUPPRESS
                or isinstance(default, bool) or action.nargs == 0):
            return action.help
        said = "none" if default is None or default == [] else "%(default)s"
        return f"{text} (default: {said})" if text else f"(default: {said})"


def examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


TOP = (examples(
    "inspector samples/attention.py:flash                        # the terminal UI",
    "inspector check samples/attention.py:flash --target tpu-v5e,tpu-v6e",
    "inspector show samples/attention.py:naive --view fusions --target tpu-v5e",
    "inspector tune samples/matmul.py:tiled --target tpu-v5e",
    "inspector VERB --help                                       # each verb's options and examples",
) + "\n\nexit codes: 0 ok, 1 a finding is an error or the code failed, 2 usage, 3 check cannot decide, 4 the TPU is held "
       "by another process, 130 Ctrl-C, 143 SIGTERM")
