"""Run a function in a fresh child process (``run_isolated``), so Ctrl-C and SIGTERM are answered
at once while a compile holds the child's thread in C++; and what every child of ours needs
(``die_with_parent``). In base/ because every layer that starts a child uses it: the CLI's verbs,
Mosaic's and libtpu's dumps, the measurement on the chip, the tune workers.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping

from .errors import AnalysisFailed

class ChildFailed(AnalysisFailed):
    """The child process ended without an answer (killed, crashed, os._exit in the user's code),
    or raised something that could not be sent back; ``str`` is the one line for the user.
    ``returncode``: the child's exit status where it ended without an answer (-6: SIGABRT)."""

    returncode: int | None = None


# The child's first line of stdin is the parent's sys.path (so it imports what the parent would,
# the user's modules included); the rest is the pickled (function, args).
_BOOT = ("import sys,json;sys.path[:]=json.loads(sys.stdin.buffer.readline());"
         "from inspector.base.child_process import child_main;child_main(int(sys.argv[1]))")


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
        sweep_dumps()  # the child's dump folders: killed, it could not remove them itself
        raise
    finally:
        os.close(read_fd)
    data = b"".join(chunks)
    if not data:
        sweep_dumps()
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
_ANSWER_MODULES = ("inspector.results.report",)


def _import_answer_types() -> None:
    import importlib

    for name in _ANSWER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:
            pass  # the unpickling says what is wrong, if anything is


def sweep_dumps() -> None:
    """Remove the temporary folders of processes that have ended (see tempdirs); never fails."""
    from .tempdirs import sweep

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


def child_main(result_fd: int) -> None:
    import os
    import pickle
    import signal
    import sys
    import traceback

    die_with_parent()
    # Signals come from the parent (SIGKILL) only; a background group may still write to the terminal.
    for sig in (signal.SIGINT, signal.SIGTTOU, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fn, args = pickle.loads(sys.stdin.buffer.read())
    from .progress import report_to

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


def die_with_parent() -> None:
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
