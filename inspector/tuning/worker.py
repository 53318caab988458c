"""A sweep's worker process: imports jax once, then takes jobs one at a time from its stdin and
answers each on its result pipe (length-prefixed pickles, as libtpu's dump child does).

Jobs: ``("plan", (spec, args, grid names))`` -> TunePlan; ``("row", task)`` -> a row dict. An
exception is answered as ``("error", exception, traceback text)``; a candidate's own failure is a
row, not an exception. The worker keeps libtpu's dump child between candidates (``kept_sessions``)
and dies with the parent; SIGINT is the parent's to answer (it kills the workers at once).
"""
from __future__ import annotations

import os
import signal
import sys

import inspector.base.environment as environment

from ..libtpu.child import receive, send
from ..libtpu.runner import kept_sessions
from ..base.child_process import die_with_parent
from .evaluate import evaluate_task, plan_target


def _run(kind: str, payload):
    if kind == "plan":
        return plan_target(*payload)
    if kind == "row":
        return evaluate_task(payload)
    raise ValueError(f"unknown job {kind!r}")


def main(result_fd: int) -> None:
    die_with_parent()
    for sig in (signal.SIGINT, signal.SIGTTOU, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)

    environment.prepare()
    import contextlib
    import traceback

    with kept_sessions():
        while (job := receive(0)) is not None:
            kind, payload = job
            try:
                with contextlib.redirect_stdout(sys.stderr):  # the user's prints: never on the answer pipe
                    answer: tuple = ("ok", _run(kind, payload))
            except BaseException as err:  # back to the parent, which decides what the user sees
                answer = ("error", _picklable(err), "".join(traceback.format_exception(err)))
            send(result_fd, answer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _picklable(err: BaseException) -> BaseException:
    import pickle

    try:
        pickle.dumps(err)
        return err
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
