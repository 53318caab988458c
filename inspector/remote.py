"""Run Session work in a child process, so the terminal UI's thread never competes with jax for
the GIL (tracing holds it) and a cancel really stops the compile (the child is killed).

One child is kept while it is useful: it imports jax once and keeps its in-process memo of
compiled stages, so switching back to a target already seen is quick.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def _start() -> None:
    import os

    from . import environment

    environment.prepare()
    os.nice(5)  # on a 2-core machine the compile's threads would otherwise starve the UI's


def _call(session, method: str, args: tuple):
    return getattr(session, method)(*args)  # Reports are plain data: they pickle as they are


class Remote:
    def __init__(self):
        self._pool: ProcessPoolExecutor | None = None
        # multiprocessing's resource tracker hands its child our stderr; start it now, while
        # stderr is the terminal's (Textual swaps it for an object without a file descriptor).
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start)
        return self._pool

    def call(self, session, method: str, *args):
        """session.method(*args) in the child; blocks the calling (worker) thread, not the UI."""
        return self._executor().submit(_call, session, method, args).result()

    def cancel(self, wait: bool = False) -> None:
        """Stop whatever runs now: the child is killed and the next call starts a fresh one."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())
        for process in processes:
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        if wait:
            for process in processes:
                process.join(timeout=5)

    def close(self) -> None:
        self.cancel(wait=True)
