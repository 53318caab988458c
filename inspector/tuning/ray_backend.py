"""Candidates as Ray tasks on an existing cluster (``--ray ADDRESS`` or ``RAY_ADDRESS``), for
sweeps one machine is too small for. The optional extra ``[ray]`` (``pip install '.[ray]'``) brings Ray;
every worker node needs the same jax, libtpu and inspector. The target file travels with each
task (its bytes), is written to a temporary folder there, loaded, and removed after the
candidate; the rows come back as plain data, so the table is the one a local run makes.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Callable

import inspector.base.environment as environment

from ..base.errors import UsageError
from ..libtpu.runner import kept_sessions
from ..base.tempdirs import new_folder
from .evaluate import evaluate_task

_SHIPPED = "tune-shipped"  # inspector-tune-shipped-*: see inspector.base.tempdirs


def _import_ray():
    try:
        import ray
    except ImportError as err:
        raise UsageError("--ray needs Ray: pip install 'ray>=2.9' (here and on every node of the cluster)") from err
    return ray


def _remote_row(file_name: str, source: bytes, func: str, task: dict) -> dict:
    """On a Ray worker: write the shipped file (once per worker process), evaluate the candidate."""
    environment.prepare()  # before jax loads in this worker
    _keep_sessions()

    path = _shipped_file(file_name, source)
    row = evaluate_task(dict(task, spec=f"{path}:{func}"))
    if row.get("reason"):  # name the user's file, not the copy
        row["reason"] = row["reason"].replace(path, task["spec"].rpartition(":")[0])
    return row


_SHIPPED_FILES: dict[tuple[str, str], str] = {}


def _shipped_file(file_name: str, source: bytes) -> str:
    """The shipped file, in a folder of this worker process's own (``inspector.base.tempdirs``): kept
    for its next tasks (the module is imported once), never removed under another worker's task,
    removed when the process exits, and swept by the next run on the node when Ray kills it
    (a cancel on Ctrl-C)."""
    import hashlib

    key = (file_name, hashlib.sha256(source).hexdigest())
    path = _SHIPPED_FILES.get(key)
    if path is None or not os.path.isfile(path):
        path = os.path.join(new_folder(_SHIPPED), file_name)
        with open(path, "wb") as f:
            f.write(source)
        _SHIPPED_FILES[key] = path
    return path


_KEPT: contextlib.AbstractContextManager | None = None


def _keep_sessions() -> None:
    """A Ray worker runs many tasks: libtpu's dump child is kept between them (it dies with the worker)."""
    global _KEPT
    if _KEPT is None:
        _KEPT = kept_sessions()
        _KEPT.__enter__()


class RayPool:
    """The LocalPool's ``run`` over a Ray cluster: one task per candidate."""

    def __init__(self, address: str, spec: str, debug: bool = False):
        _check_address(address)
        self.ray = _import_ray()
        self.address = address
        self.debug = debug
        self._quiet = contextlib.ExitStack()
        self.runner = f"ray {address}"
        where, _, self.func = spec.rpartition(":")
        if not os.path.isfile(where):
            raise UsageError(f"--ray ships the target file with each task: give path/to/file.py:function, not {spec}")
        with open(where, "rb") as f:
            self.source = f.read()
        self.file_name = os.path.basename(where)
        self.size = 1
        self._pending: dict = {}

    def __enter__(self) -> "RayPool":
        refused = _unreachable(self.address)
        if refused:  # Ray itself retries an address that does not answer for minutes
            raise UsageError(f"cannot reach the Ray cluster at {self.address}: {refused} (start one with "
                             "`ray start --head`, or check --ray / RAY_ADDRESS)")
        with _stderr_kept(self.debug) as said:  # Ray's C++ client logs each retry on fd 2 for ~20 s
            try:
                self.ray.init(address=self.address, logging_level="DEBUG" if self.debug else "CRITICAL",
                              log_to_driver=False, configure_logging=True, ignore_reinit_error=True)
            except Exception as err:  # ConnectionError, or Ray's own for a bad address
                raise UsageError(f"cannot reach the Ray cluster at {self.address}: {type(err).__name__}: "
                                 f"{_one_line(err)} ({_advice(said())})") from err
        # Ray's driver prints its workers' deaths ("(raylet) A worker died ...") on stdout, which
        # holds only what the inspector prints (--json): the row says it; --debug shows Ray's words
        self._quiet.enter_context(contextlib.redirect_stdout(sys.stderr if self.debug else _Discard()))
        self.size = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        return self

    def __exit__(self, kind, value, tb) -> None:
        for ref in list(self._pending):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        self._pending.clear()
        try:
            self.ray.shutdown()
        finally:
            self._quiet.close()

    def run(self, jobs: list, on_answer: Callable, on_died: Callable) -> None:
        remote = self.ray.remote(num_cpus=1, max_retries=0)(_remote_row)
        source = self.ray.put(self.source)
        for job_id, _kind, task in jobs:
            self._pending[remote.remote(self.file_name, source, self.func, task)] = job_id
        while self._pending:
            ready, _ = self.ray.wait(list(self._pending), num_returns=1, timeout=0.5)
            for ref in ready:
                job_id = self._pending.pop(ref)
                try:
                    on_answer(job_id, "ok", self.ray.get(ref))
                except self.ray.exceptions.RayTaskError as err:
                    on_answer(job_id, "error", RuntimeError(_one_line(err)))
                except self.ray.exceptions.RayError as err:  # the worker died, the node went away
                    on_died(job_id, f"its Ray worker failed: {type(err).__name__}: {_one_line(err)}")


def _check_address(address: str) -> None:
    """HOST:PORT, ray://HOST:PORT, or a word Ray knows ("auto"); a malformed one is a usage line
    here, not Ray's traceback."""
    host, sep, port = address.strip().removeprefix("ray://").rpartition(":")
    if not sep:
        return
    if not host.strip("[]") or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--ray {address!r}: give the cluster's HOST:PORT (e.g. 127.0.0.1:6379, as `ray start "
                         "--head` prints it), ray://HOST:PORT, or auto")


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def _stderr_kept(debug: bool):
    """Keep what is written on fd 2 (Ray's C++ logs) while the block runs; yields a function that
    returns it. With --debug it is left on the terminal."""
    if debug:
        yield lambda: ""
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 2)
        try:
            yield lambda: (kept.seek(0), kept.read(1 << 20).decode(errors="replace"))[1]
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _advice(said: str) -> str:
    if "InvalidAuthToken" in said or "Unauthenticated" in said:
        return ("the cluster asks for a token: set RAY_AUTH_MODE=token, with the cluster's token in "
                "~/.ray/auth_token or RAY_AUTH_TOKEN")
    return "start one with `ray start --head`, or check --ray / RAY_ADDRESS"


def _unreachable(address: str, seconds: float = 5.0) -> str | None:
    """Why nothing answers at ADDRESS (host:port, ray://host:port), or None when something does
    (or the address is not host:port, such as "auto": Ray judges those)."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as err:
        return err.strerror or str(err) or type(err).__name__
    return None


def _one_line(err) -> str:
    text = str(err).strip()
    line = next((l.strip() for l in text.splitlines() if l.strip()), type(err).__name__)
    return line if len(line) <= 300 else line[:297] + "..."
