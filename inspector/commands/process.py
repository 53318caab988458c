"""The process around a verb: closed or full standard streams, one-line failures, signals."""
from __future__ import annotations

import errno
import os
import sys

from ..base.errors import EXIT_FINDINGS


EXIT_SIGINT, EXIT_SIGTERM = 130, 143


class Terminated(BaseException):
    """SIGTERM, or SIGHUP (its terminal closed), raised where the main thread is (like
    KeyboardInterrupt for SIGINT): the same cleanup runs for both (children killed, temp folders
    removed). ``signum``: which; the exit code is 128 + it."""

    def __init__(self, signum: int = 15):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


TERMINATING = ("SIGTERM", "SIGHUP")  # the signals on_sigterm answers (those the platform has)



_OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EINVAL}


def stdout_usable() -> bool:
    """False when stdout is closed (`>&-`); a stream without a descriptor (a test's capture) is fine."""
    import io

    if sys.stdout is None or sys.stdout.closed:
        return False
    try:
        os.fstat(sys.stdout.fileno())
    except (io.UnsupportedOperation, AttributeError):
        return True
    except (OSError, ValueError):
        return False
    return True


def reopen_std_streams() -> None:
    """A closed stdin or stderr (`<&-`, `2>&-`) becomes /dev/null: the pipes a child process
    needs must not take those numbers."""
    for fd in (0, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if fd == 2 and sys.stderr is None:
                sys.stderr = open(2, "w", closefd=False)


def silence_stdout() -> None:
    """After a failed write: stdout is /dev/null, so the interpreter's final flush cannot fail."""
    if sys.stdout is not sys.__stdout__:
        return  # a stream someone put there (a test's capture): not ours to redirect
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def readable(line: str) -> str:
    """``line`` with the bytes of a non-UTF-8 argument or file name written \\xff: Python keeps
    such a byte as a lone surrogate, which is echoed '\\udcff' (by repr, or by the stream's
    backslashreplace), a character nobody typed."""
    import re

    line = re.sub(r"\\udc([89a-f][0-9a-f])", r"\\x\1", line)  # already escaped, by repr
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in line)


def say(line: str) -> None:
    try:
        print(f"inspector: {readable(line)}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # stderr is gone too: the exit code is all that is left


def fail(err: BaseException, line: str, code: int, debug: bool) -> int:
    if debug:
        import traceback

        trace = getattr(err, "child_traceback", None) or "".join(traceback.format_exception(err))
        try:
            sys.stderr.write(trace)
        except (OSError, ValueError, AttributeError):
            pass
    say(line)
    return code


def on_sigterm(signum, frame):
    raise Terminated(signum)


def is_stdout_error(err: OSError | ValueError) -> bool:
    """A failed write of ours to stdout (closed, full, a reader gone): no file name, an output
    errno, and not an error sent back from the child process."""
    if getattr(err, "child_traceback", None) is not None:
        return False
    if isinstance(err, ValueError):  # "I/O operation on closed file"
        return sys.stdout is not None and sys.stdout.closed
    return err.errno in _OUTPUT_ERRNOS and not getattr(err, "filename", None)


def internal_error(err: BaseException, debug: bool) -> int:
    return fail(err, f"internal error: {type(err).__name__}: {err} (run again with --debug for the traceback)",
                 EXIT_FINDINGS, debug)


def main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
