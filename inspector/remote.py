"""Run the core in a child process: for the terminal UI (``Remote``), so its thread never competes
with jax for the GIL (tracing holds it) and a cancel really stops the compile (the child is
killed); for the CLI (``run_isolated``), so Ctrl-C and SIGTERM are answered at once.

One child is kept while it is useful: it imports jax once and keeps its in-process memo of
compiled stages, so switching back to a target already seen is quick.
"""
from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Mapping
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor

from .base.errors import AnalysisFailed


def worker_log():
    from .compilation.compile_cache import cache_dir

    return cache_dir() / "tui-worker.log"


def _start() -> None:
    import os

    import inspector.base.environment as environment

    environment.prepare()
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


class Remote:
    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._running: set[Future] = set()
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by every cancel: a call asked under an older one is refused
        # multiprocessing's resource tracker hands its child our stderr; start it now, while
        # stderr is the terminal's (Textual swaps it for an object without a file descriptor).
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start)
        return self._pool

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
            future = self._executor().submit(_call, session, method, args)
            self._running.add(future)
        try:
            return future.result()
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
        if pool is not None:
            processes = list(getattr(pool, "_processes", {}).values())
            for process in processes:
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            if wait:
                for process in processes:
                    process.join(timeout=5)
                _sweep()  # a killed child's dump folders
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
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False)
        for process in processes:
            process.join(timeout=3)
            if process.is_alive():
                process.kill()
                process.join(timeout=2)
        _sweep()


def _sweep_after(processes) -> None:
    """Once the killed children are gone, their dump folders (off the UI's thread)."""
    for process in processes:
        process.join(timeout=10)
    _sweep()


# ----------------------------------------------------------------------------- the CLI's child


class ChildFailed(AnalysisFailed):
    """The child process ended without an answer (killed, crashed, os._exit in the user's code),
    or raised something that could not be sent back; ``str`` is the one line for the user.
    ``returncode``: the child's exit status where it ended without an answer (-6: SIGABRT)."""

    returncode: int | None = None


# The child's first line of stdin is the parent's sys.path (so it imports what the parent would,
# the user's modules included); the rest is the pickled (function, args).
_BOOT = ("import sys,json;sys.path[:]=json.loads(sys.stdin.buffer.readline());"
         "from inspector.remote import _child_main;_child_main(int(sys.argv[1]))")


def run_isolated(fn, *args, env: Mapping[str, str | None] | None = None, stderr_to: str | None = None):
    """``fn(*args)`` in a fresh child process; its return value, or what it raised, raised here.
    ``env``: variables set (over this process's) for the child alone, e.g. LIBTPU_INIT_ARGS,
    which libtpu reads once, when its backend starts; a value None unsets the variable there. ``stderr_to``: a file that takes the child's
    stderr (libtpu's log when it aborts) instead of ours.

    Why a child: a compile in libtpu or XLA holds the thread in C++ for minutes, and Python runs
    a signal handler only when it returns. Here the parent only waits on a pipe, so Ctrl-C and
    SIGTERM reach it at once and it kills the child (SIGKILL: libtpu's own SIGTERM handler would
    print a native stack dump). The child is in its own process group, so the terminal's Ctrl-C
    (sent to the whole foreground group) does not reach it either; it dies with the parent.
    The child's stdout is our stderr: whatever the user's code prints never mixes with ours.
    ``fn`` must be importable by name and the result picklable.
    """
    import json
    import os
    import pickle
    import subprocess
    import sys

    request = pickle.dumps((fn, args))
    read_fd, write_fd = os.pipe()
    err_fd = os.open(stderr_to, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) if stderr_to else None
    try:
        proc = subprocess.Popen([sys.executable, "-P", "-c", _BOOT, str(write_fd)], stdin=subprocess.PIPE,
                                stdout=_stderr_fd(), stderr=err_fd, pass_fds=(write_fd,), process_group=0,
                                env=_child_env(env) if env else None)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    finally:
        if err_fd is not None:
            os.close(err_fd)
    os.close(write_fd)
    threading.Thread(target=_import_answer_types, daemon=True).start()
    chunks = []
    try:
        assert proc.stdin is not None  # stdin=PIPE
        try:
            proc.stdin.write(json.dumps(sys.path).encode() + b"\n" + request)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the child died at once; its exit status says why
        while chunk := os.read(read_fd, 1 << 20):  # Ctrl-C raises KeyboardInterrupt here
            chunks.append(chunk)
        proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        _sweep()  # the child's dump folders: killed, it could not remove them itself
        raise
    finally:
        os.close(read_fd)
    data = b"".join(chunks)
    if not data:
        _sweep()
        failed = ChildFailed(_died(proc.returncode))
        failed.returncode = proc.returncode
        raise failed
    status, payload, trace = pickle.loads(data)
    if status == "ok":
        return payload
    payload.child_traceback = trace
    raise payload


def _child_env(changes: Mapping[str, str | None]) -> dict[str, str]:
    import os

    merged: dict[str, str | None] = {**os.environ, **changes}
    return {k: v for k, v in merged.items() if v is not None}


def _stderr_fd() -> int:
    """Where the child's prints go: our stderr's descriptor, or the process's own stderr where
    sys.stderr is a stream without one (a notebook, pytest's capture)."""
    import sys

    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


# The modules whose classes the CLI's answers unpickle to (Report and what it holds). Importing
# them (numpy, the analyses' dataclasses: ~0.5 s) while the child compiles takes that time off
# the end of every run, where it would otherwise come after the compile.
_ANSWER_MODULES = ("inspector.report",)


def _import_answer_types() -> None:
    import importlib

    for name in _ANSWER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:
            pass  # the unpickling says what is wrong, if anything is


def _sweep() -> None:
    """Remove the temporary folders of processes that have ended (see tempdirs); never fails."""
    from .base.tempdirs import sweep

    try:
        sweep()
    except Exception:
        pass


def _died(code: int) -> str:
    import os
    import signal

    # XLA and libtpu end the process (exit 1, or abort) on a flag they do not know: name the flags
    flags = [k for k in ("XLA_FLAGS", "LIBTPU_INIT_ARGS") if os.environ.get(k, "").strip()]
    if flags and code in (1, -signal.SIGABRT):
        return (f"the analysis process ended (code {code}) without an answer: XLA or libtpu refuses a flag in "
                f"{' or '.join(flags)}? (their own message is above); fix or unset {' / '.join(flags)} and run again")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the analysis process was killed by {name} (out of memory, or a crash in jax/XLA); run again with --debug"
    return f"the analysis process exited with code {code} without an answer (os._exit in the analysed code?)"


def _child_main(result_fd: int) -> None:
    import os
    import pickle
    import signal
    import sys
    import traceback

    _die_with_parent()
    # Signals come from the parent (SIGKILL) only; a background group may still write to the terminal.
    for sig in (signal.SIGINT, signal.SIGTTOU, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fn, args = pickle.loads(sys.stdin.buffer.read())
    from .base.progress import report_to

    report_to(sys.stderr)  # a step that takes long says so on the user's terminal
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the user's code reading stdin gets EOF, not our request pipe
    os.close(devnull)
    try:
        answer = ("ok", fn(*args), None)
        data = _dumps(answer)
    except BaseException as err:  # everything goes back to the parent, which decides what the user sees
        trace = "".join(traceback.format_exception(err))
        data = _dumps(("raise", err, trace))
    with os.fdopen(result_fd, "wb") as out:
        out.write(data)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: jax's and libtpu's atexit work is not ours to wait for


def _dumps(answer: tuple) -> bytes:
    import pickle

    try:
        return pickle.dumps(answer)
    except Exception as err:  # an unpicklable result or exception: its message still goes back
        status, payload, trace = answer
        if status == "ok":
            return pickle.dumps(("raise", ChildFailed(f"internal error: the analysis result could not be sent back "
                                                      f"from its process ({type(err).__name__}: {err})"), trace))
        return pickle.dumps(("raise", _picklable(payload), trace))


def _picklable(err: BaseException) -> BaseException:
    """An exception that pickles, with ``err``'s message: the same class made afresh from its
    message where that pickles (ours do), else the nearest built-in class it derives from (jax's
    DuplicateSpecError holds Device objects: a ValueError with its text reaches the parent)."""
    import builtins
    import pickle

    text = str(err)
    for kind in type(err).__mro__:
        if kind is type(err) or getattr(builtins, kind.__name__, None) is kind:
            try:
                copy = kind(text) if kind is type(err) else kind(f"{type(err).__name__}: {text}")
                pickle.loads(pickle.dumps(copy))
                return copy
            except Exception:
                continue
    return ChildFailed(f"{type(err).__name__}: {text}")


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when the parent dies, even by SIGKILL."""
    import ctypes
    import os
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before we asked
        os._exit(1)
