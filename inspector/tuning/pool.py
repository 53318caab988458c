"""Worker processes on this machine, each compiling one candidate at a time.

Why not multiprocessing: a worker spends minutes inside libtpu's C++ and must die at once on
Ctrl-C, with nothing printed. So each worker is a plain child in a process group of its own
(the terminal's Ctrl-C does not reach it; the parent answers it and kills the workers with
SIGKILL), that dies with the parent (PR_SET_PDEATHSIG); libtpu's dump children die with their
worker and their folders are removed by their janitors (inspector.libtpu.runner). A worker that
dies mid-candidate (a libtpu abort, out of memory) costs that candidate a ``failed`` row and is
replaced.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from typing import Callable

from ..compilation.compile_cache import cache_dir
from ..libtpu.child import receive, send

_BOOT = ("import sys,json,os;sys.path[:]=json.loads(os.environ.pop('INSPECTOR_SYS_PATH'));"
         "from inspector.tuning.worker import main;main(int(sys.argv[1]))")


class WorkerDied(RuntimeError):
    """A worker ended without an answer."""


class Cancelled(Exception):
    """The sweep's ``cancel`` event was set (the terminal UI's Esc): what Ctrl-C is to the CLI."""


_CANCEL_POLL = 0.1  # seconds between looks at a cancel event while waiting on the workers


class _Worker:
    def __init__(self, log):
        env = dict(os.environ, INSPECTOR_SYS_PATH=json.dumps(sys.path))
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen([sys.executable, "-P", "-c", _BOOT, str(write_fd)], stdin=subprocess.PIPE,
                                         stdout=log, stderr=log, pass_fds=(write_fd,), env=env, process_group=0)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        os.close(write_fd)
        self.results = read_fd
        self.job = None  # what it is doing: (job id, kind, payload)

    def send(self, job_id, kind: str, payload) -> None:
        self.job = (job_id, kind, payload)
        try:
            send(self.proc.stdin.fileno(), (kind, payload))
        except OSError:
            pass  # it is gone: reading its answer says so

    def receive(self):
        answer = receive(self.results)
        if answer is None:
            code = self.proc.wait()
            how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.Signals._value2member_map_
                   else f"exited with code {code}")
            raise WorkerDied(f"its worker process died ({how}: a libtpu abort, or out of memory?)")
        return answer

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        self.proc.wait()
        self.close_pipes()

    def stop(self) -> None:
        """Ask it to finish (EOF on its stdin); it exits after its current job."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.close_pipes()

    def close_pipes(self) -> None:
        if self.results is not None:
            os.close(self.results)
            self.results = None
        try:
            self.proc.stdin.close()
        except OSError:
            pass


class LocalPool:
    """Up to ``size`` workers; ``run`` hands out jobs as workers come free. Use as a context
    manager: leaving it (Ctrl-C included) kills every worker still there."""

    runner = "local"

    def __init__(self, size: int, debug: bool = False, cancel: threading.Event | None = None):
        """``cancel``: set from another thread, it makes a wait on the workers raise Cancelled
        (within a tenth of a second); leaving the context manager then kills them."""
        self.size = max(1, size)
        self.debug = debug
        self.cancel = cancel
        self.workers: list[_Worker] = []
        self._log = None

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, kind, value, tb) -> None:
        self.stop() if kind is None else self.kill()
        if self._log not in (None, sys.stderr):
            self._log.close()
            self._log = None

    def stop(self) -> None:
        """Let every worker finish its job and exit."""
        workers, self.workers = self.workers, []
        for w in workers:
            w.stop()

    def kill(self) -> None:
        """Kill every worker now (SIGKILL: no handler runs, nothing is printed)."""
        workers, self.workers = self.workers, []
        for w in workers:
            w.kill()

    def _output(self):
        """Where workers' stdout and stderr go: the terminal with --debug, else a log file (a
        progress bar is drawn on stderr, and libtpu's start-up notes would tear it)."""
        if self.debug:
            return sys.stderr
        if self._log is None:
            try:
                path = cache_dir() / "tune-workers.log"  # the last sweep's: --debug shows it live
                path.parent.mkdir(parents=True, exist_ok=True)
                self._log = open(path, "wb")
            except OSError:
                self._log = open(os.devnull, "wb")
        return self._log

    def _spawn(self) -> _Worker:
        worker = _Worker(self._output())
        self.workers.append(worker)
        return worker

    def call(self, kind: str, payload):
        """One job on a worker (the first, started if need be); what it answered or raised."""
        worker = self.workers[0] if self.workers else self._spawn()
        worker.send(0, kind, payload)
        self._ready([worker.results])
        status, *rest = worker.receive()
        worker.job = None
        if status == "ok":
            return rest[0]
        err, trace = rest
        err.child_traceback = trace
        raise err

    def _ready(self, fds: list[int]) -> list[int]:
        """The descriptors with an answer (or an end) to read; raises Cancelled once ``cancel`` is set."""
        while True:
            if self.cancel is not None and self.cancel.is_set():
                raise Cancelled("the sweep was cancelled")
            ready, _, _ = select.select(fds, [], [], None if self.cancel is None else _CANCEL_POLL)
            if ready:
                return ready

    def run(self, jobs: list, on_answer: Callable, on_died: Callable) -> None:
        """Each job (job id, kind, payload) on a free worker; ``on_answer(job_id, status, value)``
        as each ends, ``on_died(job_id, message)`` when its worker died (the worker is replaced)."""
        queue = list(jobs)
        while len(self.workers) < min(self.size, len(queue)):
            self._spawn()
        idle = [w for w in self.workers if w.job is None]
        for w in idle:
            if queue:
                w.send(*queue.pop(0))
        while any(w.job is not None for w in self.workers):
            busy = {w.results: w for w in self.workers if w.job is not None}
            ready = self._ready(list(busy))
            for fd in ready:
                worker = busy[fd]
                job_id = worker.job[0]
                try:
                    answer = worker.receive()
                except WorkerDied as err:
                    worker.job = None
                    worker.kill()
                    self.workers.remove(worker)
                    on_died(job_id, str(err))
                    if queue:
                        self._spawn().send(*queue.pop(0))
                    continue
                worker.job = None
                on_answer(job_id, *answer[:2])
                if queue:
                    worker.send(*queue.pop(0))
