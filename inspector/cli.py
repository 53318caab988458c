"""The `inspector` command: parse, run the verb, turn every failure into one line and an exit code.

Exit codes: 0 ok, 1 the analysed function failed or a finding is an error, 2 usage (the command
line, the target file, an output that cannot be written), 3 check could not decide, 130 Ctrl-C,
143 SIGTERM, 129 SIGHUP (a closed terminal). Every failure is one line on stderr; ``--debug``
(anywhere on the line) adds the traceback.

The work that runs jax and the user's code (import, trace, compile, run) happens in a child
process (``base.child_process.run_isolated``) and comes back as plain data; this process only parses, waits
and renders. So Ctrl-C during a minutes-long libtpu compile is answered at once, and whatever the
user's code prints goes to stderr, never into our stdout (``--json`` stays valid JSON). The parts:
``commands.verb_table`` (one row per verb: its options, help and examples, its printer and its
work), ``commands.parser`` (the grammar), ``commands.work`` (what each verb computes, in the child),
``commands.verbs`` (checking, rendering, exit codes), ``commands.process`` (streams and signals).
"""
from __future__ import annotations

import os
import signal
import sys

from .commands import verb_table
from .commands.parser import build_parser, chosen_chip, normalise, verb_names
from .commands.process import (EXIT_SIGINT, EXIT_SIGTERM, TERMINATING, Terminated, fail, internal_error, is_stdout_error,
                               main_thread, on_sigterm, reopen_std_streams, silence_stdout, stdout_usable)
from .base.errors import InspectorError, OutputError, UsageError


def main(argv: list[str] | None = None, *, isolate: bool = True) -> int:
    """Run one command; returns the exit code. ``isolate=False`` does the work in this process
    (tests: no child to start), with the same messages and codes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    signals = [getattr(signal, name) for name in TERMINATING if hasattr(signal, name)] if isolate and main_thread() else []
    previous = {sig: signal.signal(sig, on_sigterm) for sig in signals}
    try:
        return _main(argv, isolate, debug)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(argv: list[str], isolate: bool, debug: bool) -> int:
    reopen_std_streams()
    import inspector.base.environment as environment

    environment.prepare(debug=debug)
    try:
        opts = build_parser().parse_args(normalise(argv))
        debug = debug or opts.debug
        opts.isolate = isolate
        if opts.version and opts.verb is None:
            print(version_line())
            return 0
        if opts.verb is None:
            raise UsageError("give a target (inspector samples/attention.py:naive) or a verb: " + ", ".join(verb_names()))
        chosen_chip(opts)
        if not stdout_usable():
            raise OutputError("standard output is closed: give it a file or a pipe (> out.txt, | less)")
        code = verb_table.load(verb_table.get_verb(opts.verb).printer)(opts)
        sys.stdout.flush()
        return code
    except InspectorError as err:
        return fail(err, str(err), err.exit_code, debug)
    except KeyboardInterrupt as err:
        return fail(err, "interrupted (Ctrl-C)", EXIT_SIGINT, False)
    except Terminated as err:
        return fail(err, f"terminated ({err.name})", 128 + err.signum if err.signum > 0 else EXIT_SIGTERM, False)
    except (OSError, ValueError) as err:
        if is_stdout_error(err):
            silence_stdout()
            reason = "closed" if isinstance(err, ValueError) else (os.strerror(err.errno) if err.errno else str(err))
            return fail(err, f"cannot write to standard output: {reason}", OutputError.exit_code, debug)
        return internal_error(err, debug)
    except Exception as err:  # a bug of ours: still one line, the traceback on request
        return internal_error(err, debug)


def version_line() -> str:
    """`inspector --version`: ours, and the jax, jaxlib and libtpu this environment runs (read from
    their metadata: nothing is imported)."""
    from importlib import metadata

    from .base.version import __version__

    def installed(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return f"inspector {__version__} (jax {installed('jax')}, jaxlib {installed('jaxlib')}, libtpu {installed('libtpu')})"


def entry() -> None:
    from .base.environment import reexec_for_utf8

    reexec_for_utf8()  # LC_ALL=C and a UTF-8 file name: the same command in UTF-8 mode
    sys.exit(main())
