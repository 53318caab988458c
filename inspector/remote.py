"""Run the terminal UI's work in a child process (``Remote``), so its thread never competes with
jax for the GIL (tracing holds it) and a cancel really stops the compile (the child is killed).
The CLI's one-shot child (``run_isolated``) and what every child needs are in
``inspector.base.child_process``, below every layer that starts one.

One child is kept while it is useful: it imports jax once and keeps its in-process memo of
compiled stages, so switching back to a target already seen is quick.

``Remote(in_process=True)`` (or INSPECTOR_WORKER=thread in the environment) runs the same calls
on one thread of this process instead: for tests, which would otherwise start a Python that
imports jax per app. Arguments and results still go through pickle, as to a child; a cancel
answers the waiting call at once and leaves the abandoned call to finish on its thread.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from concurrent.futures import FIRST_COMPLETED, CancelledError, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from typing import Any

from .base.child_process import sweep_dumps


def worker_log():
    from .compilation.compile_cache import cache_dir

    return cache_dir() / "tui-worker.log"


def _start(news) -> None:
    import os

    import inspector.base.environment as environment
    from inspector.base.progress import listen

    environment.prepare()
    listen(news.put)  # where a long run is (F's "trying fix 3 of 9"): the UI shows it (Remote.news)
    os.nice(5)  # on a 2-core machine the compile's threads would otherwise starve the UI's
    # The child shares the terminal the UI draws on: whatever libtpu or XLA write to fd 2
    # (start-up notes, a signal handler's dump) would land over the screen. Send it to a file.
    try:
        path = worker_log()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 2)
    os.close(fd)


def _call(session, method: str, args: tuple):
    return getattr(session, method)(*args)  # Reports are plain data: they pickle as they are


def _call_here(request: bytes) -> bytes:
    """_call on this process's thread, through pickle both ways as to a child: the session is a
    copy, and the caller gets a copy of the result (the memo of compiled stages keeps its own)."""
    return pickle.dumps(_call(*pickle.loads(request)))


class Remote:
    def __init__(self, in_process: bool | None = None) -> None:
        self.in_process = os.environ.get("INSPECTOR_WORKER") == "thread" if in_process is None else in_process
        self._pool: Executor | None = None
        self._running: set[Future] = set()
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by every cancel: a call asked under an older one is refused
        self._cancelled: Future = Future()  # in process: done by a cancel, which answers the waiting calls
        self._news: Any = None  # the pool's queue of progress.tell lines (one per pool: a killed child may break one)
        self._last_news = ""
        if self.in_process:
            return
        # multiprocessing's resource tracker hands its child our stderr; start it now, while
        # stderr is the terminal's (Textual swaps it for an object without a file descriptor).
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()

    def _executor(self) -> Executor:
        if self._pool is None:
            if self.in_process:
                import queue

                from .base.progress import listen

                self._news, self._last_news = queue.Queue(), ""
                listen(self._news.put)  # this process's tells: the thread's run is the only long one here
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inspector-worker")
            else:
                context = multiprocessing.get_context("spawn")
                # a Queue: the child's put never blocks (a feeder thread writes), read or not
                self._news, self._last_news = context.Queue(), ""
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_start,
                                                 initargs=(self._news,))
        return self._pool

    def news(self) -> str:
        """The last line the worker told (base.progress.tell) since ``forget_news``; "" when none."""
        import queue

        try:
            while self._news is not None:
                self._last_news = self._news.get_nowait()
        except queue.Empty:
            pass
        except (OSError, EOFError, ValueError):  # the child was killed mid-line: the next pool has its own queue
            self._news = None
        return self._last_news

    def forget_news(self) -> None:
        """Before a new long run: what an older one told is no news."""
        self.news()
        self._last_news = ""

    @property
    def epoch(self) -> int:
        """Which cancel we are after; give it to ``call`` so that a cancel in between voids it."""
        return self._epoch

    def call(self, session, method: str, *args, epoch: int | None = None):
        """session.method(*args) in the child; blocks the calling (worker) thread, not the UI.
        With ``epoch``: raises CancelledError, asking nothing, when a cancel came since
        (a request of several calls is cancelled between two of them, too)."""
        with self._lock:
            if epoch is not None and epoch != self._epoch:
                raise CancelledError("cancelled")
            if self.in_process:
                future = self._executor().submit(_call_here, pickle.dumps((session, method, args)))
                cancelled = self._cancelled
            else:
                future = self._executor().submit(_call, session, method, args)
            self._running.add(future)
        try:
            if not self.in_process:
                return future.result()
            wait([future, cancelled], return_when=FIRST_COMPLETED)
            if not future.done():  # a thread cannot be killed: the call is left to finish unheard
                raise CancelledError("cancelled")
            return pickle.loads(future.result())
        finally:
            with self._lock:
                self._running.discard(future)

    @property
    def busy(self) -> bool:
        return bool(self._running)

    def cancel(self, wait: bool = False) -> bool:
        """Stop whatever runs now: the child is killed (SIGKILL: no handler runs, nothing is
        printed) and the next call starts a fresh one. Idle, it does nothing: returns whether
        there was work to stop. Either way, calls asked with an older ``epoch`` are refused."""
        with self._lock:
            self._epoch += 1
            if not self._running:
                return False
            pool, self._pool = self._pool, None
            self._running.clear()
            self._news, self._last_news = None, ""
            if self.in_process:
                self._cancelled.set_result(None)
                self._cancelled = Future()
        if self.in_process:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            return True
        if pool is not None:
            processes = list(getattr(pool, "_processes", {}).values())
            for process in processes:
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            if wait:
                for process in processes:
                    process.join(timeout=5)
                sweep_dumps()  # a killed child's dump folders
            else:
                threading.Thread(target=_sweep_after, args=(processes,), daemon=True).start()
        return True

    def close(self) -> None:
        """On quit: a busy child is killed; an idle one is asked to exit and given a moment."""
        if self.cancel(wait=True):
            return
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self.in_process:
            pool.shutdown(wait=False)
            return
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False)
        for process in processes:
            process.join(timeout=3)
            if process.is_alive():
                process.kill()
                process.join(timeout=2)
        sweep_dumps()


def _sweep_after(processes) -> None:
    """Once the killed children are gone, their dump folders (off the UI's thread)."""
    for process in processes:
        process.join(timeout=10)
    sweep_dumps()
