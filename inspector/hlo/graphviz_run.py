"""Running Graphviz's `dot`: one process over one or more graphs, killed at its timeout, with
the full layout or the fast settings (straight edges, fewer passes of its two network-simplex
solvers and of crossing minimisation)."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import threading
import time

from ..base.errors import UsageError

FAST_ARGS = ("-Gsplines=line", "-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.3")  # measured: 25 s -> 1 s on a 109-node step
FULL_SHARE = 1 / 4  # of a graph's time, for the full layout (the fast one runs beside it as insurance)


def dot_available() -> bool:
    return shutil.which("dot") is not None


class Interrupted(Exception):
    """No dot is started once ``kill_all`` ran (Ctrl-C): a layout thread that would retry stops."""


_LIVE: set["DotRun"] = set()
_LIVE_LOCK = threading.Lock()
_STOPPED = threading.Event()


def kill_all() -> None:
    """Kill every dot still running and start no other (Ctrl-C or SIGTERM while laying out: a dot
    runs in a session of its own, so the terminal's signal does not reach it, and the threads that
    wait on it would wait out the budget)."""
    _STOPPED.set()
    with _LIVE_LOCK:
        runs = list(_LIVE)
    for run in runs:
        run.kill()


def allow_runs() -> None:
    """A new drawing may start dot again (after an interrupted one, in a long-lived process)."""
    _STOPPED.clear()


atexit.register(kill_all)


class DotRun:
    """One dot process over `sources`, started at once; `result(timeout)` waits for it (killing
    it at the timeout), `kill()` gives up on it. Two can run side by side: the full layout and,
    as insurance, the fast one."""

    def __init__(self, sources: list[str], args: tuple[str, ...]):
        if _STOPPED.is_set():
            raise Interrupted("the drawing was interrupted")
        self.count = len(sources)
        # a session of its own: a `dot` that is a wrapper script (conda, snap) forks the real one,
        # which must die with it, or its open pipe keeps the export waiting past any budget
        self.proc = subprocess.Popen(["dot", "-Tsvg", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._out: tuple[bytes, bytes] = (b"", b"")
        self._talk = threading.Thread(target=self._communicate, args=("\n".join(sources).encode(),), daemon=True)
        self._talk.start()

    def _communicate(self, data: bytes) -> None:
        try:
            self._out = self.proc.communicate(data)
        except (OSError, ValueError):  # killed while writing
            pass

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the wrapper's children too
        except OSError:  # already gone
            pass
        self._talk.join(5)  # the pipes close when the group is gone
        self._done()

    def _done(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def result(self, timeout: float) -> list[bytes] | str:
        """Its SVGs, or why not (a timeout, dot's error)."""
        try:
            self._talk.join(max(0.0, timeout))
        except BaseException:  # Ctrl-C in the thread that waits (the Python API, in Jupyter): dot goes too
            self.kill()
            raise
        if self._talk.is_alive():
            self.kill()
            return f"did not finish in {seconds_text(timeout)}"
        self._done()
        stdout, stderr = self._out
        parts = [b"<?xml" + p for p in stdout.split(b"<?xml")[1:]]
        if self.proc.returncode != 0 or len(parts) != self.count:
            return f"failed ({_why(self.proc.returncode, stderr, len(parts), self.count)})"
        return parts


def _why(code: int | None, stderr: bytes, got: int, wanted: int) -> str:
    """Why a dot run gave no drawing, in words: its own last error line, the signal that killed
    it, its exit code, or output that is not the SVGs asked for."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    if lines:
        return lines[-1].strip()
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code:
        return f"exit code {code}"
    return f"it wrote {got} SVG drawings of {wanted}"


def seconds_text(seconds: float) -> str:
    """`8 s`, `0.25 s`: a budget under a second is not `0 s`."""
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.2g} s"


def run_dot(sources: list[str], args: tuple[str, ...], timeout: float) -> list[bytes] | str:
    """One dot process over `sources`: their SVGs, or why not (a timeout, dot's error)."""
    if timeout <= 0.2:
        return "had no time left"
    return DotRun(sources, args).result(timeout)


def render_svg(graph, nodes: int = 0, timeout_s: float = 30) -> bytes:
    """`graph` (a graphviz.Digraph) as SVG: Graphviz's full layout, else its fast settings, within
    `timeout_s` in all; UsageError when neither finishes (`graph_render.draw` falls back to a
    layout of its own instead)."""
    if not dot_available():
        raise UsageError("Graphviz's `dot` is not installed, so no SVG: apt-get install graphviz (or brew install graphviz); "
                         "--dot PATH writes the graph source without it")
    allow_runs()
    started = time.perf_counter()
    out = run_dot([graph.source], (), timeout_s * FULL_SHARE)
    if isinstance(out, str):
        out = run_dot([graph.source], FAST_ARGS, started + timeout_s - time.perf_counter())
    if isinstance(out, str):
        raise UsageError(f"dot {out} ({nodes} nodes): draw fewer nodes (--max-nodes), or use `inspector export`, "
                         "which falls back to a layout of its own")
    return out[0]
