"""The process that compiles with libtpu's dump flags (started by ``runner``; never imported by the
parent's analyses). Its flags come in LIBTPU_INIT_ARGS, which libtpu reads once, when it starts.

Protocol: the parent writes length-prefixed pickles of a CompileRequest (a lowered program) or a
ReplayRequest (HLO text of one op cut out of a compiled program) to our stdin, one at a time;
for each we compile, then write one length-prefixed pickle to the result fd: a dict with
``status`` (ok | compile-error), ``hlo`` (the optimized HLO text), ``error``, ``wall_seconds`` and
``peak_rss_bytes`` (this compile's, the high-water mark reset before it). The parent reads the
dump folder between two requests. A libtpu abort ends the process: the parent sees the pipe close.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys
import time

HEADER = struct.Struct("<Q")


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def receive(fd: int):
    """The next message, or None at the end of the stream."""
    header = _exactly(fd, HEADER.size)
    if header is None:
        return None
    data = _exactly(fd, HEADER.unpack(header)[0])
    return None if data is None else pickle.loads(data)


def _exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _peak_rss() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (Linux): each compile's own peak
    except OSError:
        pass


def main(result_fd: int, topology: str) -> None:
    from ..base.child_process import die_with_parent

    die_with_parent()
    import inspector.base.environment as environment

    environment.prepare()
    from ..jax_internals.aot import compile_here, start_backend
    from .pjrt import ReplayRequest, compile_hlo

    start_backend(topology)  # libtpu's start-up, once: not part of the first compile's time
    while (request := receive(0)) is not None:
        _reset_peak_rss()
        start = time.perf_counter()
        answer: dict[str, object]
        try:
            if isinstance(request, ReplayRequest):
                compile_hlo(request.hlo, request.topology)
                answer = {"status": "ok", "hlo": None, "error": None}
            else:
                answer = {"status": "ok", "hlo": compile_here(request), "error": None}
        except Exception as err:  # XLA's compile errors: data for the parent
            answer = {"status": "compile-error", "hlo": None, "error": f"{type(err).__name__}: {err}"}
        answer.update(wall_seconds=time.perf_counter() - start, peak_rss_bytes=_peak_rss())
        send(result_fd, answer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no teardown: libtpu's exit work is not ours to wait for


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
