"""The terminal UI's calls into its worker (``Remote``: a child process, or with ``in_process`` a
thread of this one, as the tests use), each from a thread worker of the app, its answer shown on the
UI thread unless a newer request has been made since (a new load or Esc voids what is in flight)."""
from __future__ import annotations

from concurrent.futures import CancelledError
from typing import Any, Callable

from textual.app import App

from ...base.errors import InspectorError
from ...remote import Remote


def message_of(err: BaseException) -> str:
    if type(err).__name__ == "BrokenProcessPool" or isinstance(err, CancelledError):
        return "cancelled"
    return str(err) if isinstance(err, InspectorError) else f"{type(err).__name__}: {err}"


class Calls:
    """The worker and the generation of requests, owned by the app."""

    def __init__(self, app: App, in_process: bool | None = None) -> None:
        """``in_process``: the worker on a thread of this process (None: INSPECTOR_WORKER=thread says)."""
        self.app = app
        self.remote = Remote(in_process)  # the core runs in a child process: the UI keeps the GIL to itself
        self.generation = 0  # bumped by every load and Esc: answers to an older request are dropped

    def void(self) -> int:
        """Whatever is on its way now is dropped when it arrives; the new generation."""
        self.generation += 1
        return self.generation

    def start(self, group: str, work: Callable[[], None], exclusive: bool = False) -> None:
        """``work`` on a thread worker of the app, in ``group`` (Esc names what it stops by group)."""
        self.app.run_worker(work, group=group, exclusive=exclusive, thread=True)

    def ask(self, group: str, ask: Callable[[], Any], show: Callable[[Any], None],
            show_error: Callable[[str], None]) -> None:
        """In a thread worker (one per group: a second replaces the first): ``ask()`` (a call into
        the worker), then ``show(result)`` or ``show_error(message)`` on the UI thread, unless a
        newer request has been made since."""
        generation = self.generation

        def if_current(fn, *args) -> None:
            # checked on the UI thread: an Esc pressed while this answer was on its way drops it
            if generation == self.generation:
                fn(*args)

        def work() -> None:
            try:
                result = ask()
            except Exception as err:
                self.deliver(if_current, show_error, message_of(err))
                return
            self.deliver(if_current, show, result)

        self.start(group, work, exclusive=True)

    def deliver(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """From a worker thread: ``fn`` on the UI thread, unless the app is shutting down by then
        (its widgets are going away; a result that arrives then is no news)."""
        def deliver():
            if self.app.is_running:
                fn(*args, **kwargs)

        try:
            self.app.call_from_thread(deliver)
        except RuntimeError:  # the event loop has already stopped
            pass

    def running_groups(self) -> set[str]:
        """The worker groups with a worker in flight ("load", "fix", "diff", ...)."""
        return {w.group for w in self.app.workers if not w.is_finished}
