"""Keep what a run prints off the terminal: jax's TPU interpreter prints its race reports from
Python threads and C++ can write to the file descriptors directly, so both the descriptors (1, 2)
and Python's sys.stdout/sys.stderr point at one temporary file while the run lasts."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

class Captured:
    text: str = ""


@contextlib.contextmanager
def captured_output():
    """``with captured_output() as out: ...``; ``out.text`` holds everything written, after exit."""
    out = Captured()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    tmp = tempfile.TemporaryFile()
    saved_fds = [os.dup(1), os.dup(2)]
    saved_streams = sys.stdout, sys.stderr
    stream = io.TextIOWrapper(open(os.dup(tmp.fileno()), "wb", buffering=0), encoding="utf-8", errors="replace",
                              line_buffering=False, write_through=True)
    try:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        sys.stdout = sys.stderr = stream
        yield out
    finally:
        with contextlib.suppress(Exception):
            stream.flush()
        sys.stdout, sys.stderr = saved_streams
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        stream.close()
        tmp.seek(0)
        data = tmp.read()
        tmp.close()
        out.text = data.decode("utf-8", errors="replace")
