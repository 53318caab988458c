"""Notes on a step that takes long ("still tracing train_step, 20 s so far"), for the command line;
and where a run of many steps is ("trying fix 3 of 9"), for the terminal UI.

Analyses never print; a process that has a terminal to tell (the CLI's analysis child) names a
stream with ``report_to`` and every ``slow_step`` then says, on that stream, what it is doing
once it has taken ``after`` seconds, and again every ``every`` seconds. Elsewhere (the Python
API, the terminal UI's worker, tests) nothing is said. A run of many steps says where it is with
``tell``; the terminal UI's worker ``listen``s and sends it to the screen; elsewhere it is dropped.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator, TextIO

_stream: TextIO | None = None
_listener: Callable[[str], None] | None = None
SLOW_AFTER_S = 15.0  # a step longer than this says what it is doing


def listen(fn: Callable[[str], None] | None) -> None:
    """``fn(line)`` for every ``tell`` of this process (None: none)."""
    global _listener
    _listener = fn


def tell(line: str) -> None:
    """Where a long run is ("trying fix 3 of 9: ..."), to whoever listens; never fails the run."""
    if _listener is not None:
        try:
            _listener(line)
        except Exception:
            pass


def report_to(stream: TextIO | None) -> None:
    global _stream
    _stream = stream


def _say(line: str) -> None:
    try:
        print(f"inspector: {line}", file=_stream, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # a note that cannot be written is no failure of the step


@contextlib.contextmanager
def slow_step(doing: str, after: float | None = None, every: float = 60.0) -> Iterator[None]:
    """``with slow_step("tracing train_step (jax runs the Python function)"):`` the step; past
    ``after`` seconds (default SLOW_AFTER_S) the stream is told "still tracing ... (20 s so far)"."""
    if _stream is None:
        yield
        return
    after = SLOW_AFTER_S if after is None else after
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        wait = after
        while not done.wait(wait):
            _say(f"still {doing} ({time.monotonic() - start:.0f} s so far)")
            wait = every

    threading.Thread(target=watch, name="inspector-progress", daemon=True).start()
    try:
        yield
    finally:
        done.set()
