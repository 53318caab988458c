"""Compile in a fresh process with libtpu's dump flags, within a time and memory limit, and read
what it wrote once; the dump folder is removed on every path.

libtpu reads LIBTPU_INIT_ARGS when its backend starts, so the dumps need a process of their own
(``child``). One child serves several compiles (jax imports once); between two, this side reads
the folder and empties it. The child is killed when a compile passes its time or memory limit;
a libtpu abort (SIGABRT: a check that fails, a chip its simulation refuses) ends it too. Either
way what it wrote before is still read, and the abort's reason is taken from its output.

The folder is removed by ``DumpSession.__exit__``; should this process be killed first (the CLI
kills its worker on Ctrl-C, the terminal UI on cancel), a janitor (``sh``, in a session of its own,
reading a pipe only this process holds) wakes when the pipe closes, kills the child and removes
the folder. A folder left by a machine that went down is removed by a later run, once stale.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO

from ..base.tempdirs import new_folder, remove
from .dumps import DUMP_LABELS, abort_reason, llo_files, read_profiles, read_text
from .child import receive, send

PREFIX = "inspector-libtpu-"
_STALE_S = 6 * 3600
_LOG_TAIL = 1 << 16
_BOOT = ("import sys,json,os;sys.path[:]=json.loads(os.environ.pop('INSPECTOR_SYS_PATH'));"
         "from inspector.libtpu.child import main;main(int(sys.argv[1]),sys.argv[2])")
# Each line on its stdin is the pid of a new child, or "done" once that child is gone; at EOF it
# kills the child still running, if any, and removes the folder.
_JANITOR = ('c=; while read p; do c=$p; done; '
            'case "$c" in ""|done) ;; *) kill -9 "$c" 2>/dev/null; sleep 0.2 ;; esac; rm -rf -- "$1"')


@dataclasses.dataclass
class Outcome:
    """One compile in the child, and everything it wrote."""

    status: str  # ok | compile-error | aborted | time-limit | memory-limit | no-answer
    wall_seconds: float
    peak_rss_bytes: int | None
    detail: str | None = None  # why it failed, in one line
    hlo: str | None = None  # the optimized HLO, when the compile finished
    cycles: dict[str, int] = dataclasses.field(default_factory=dict)  # HLO op -> simulated cycles
    llo: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)  # HLO op -> {label: file text}
    unreadable: list[str] = dataclasses.field(default_factory=list)  # dump files that could not be read, and why


def libtpu_flags(folder: str, *, profile: bool, bundles: bool) -> list[str]:
    flags = []
    if profile:
        flags.append(f"--xla_jf_dump_static_llo_profile_to={os.path.join(folder, 'profile')}")
    if bundles:
        flags += [f"--xla_jf_dump_to={os.path.join(folder, 'llo')}", "--xla_jf_dump_llo_text=true",
                  f"--xla_jf_dump_llo_pass_label_regex={DUMP_LABELS}",
                  "--xla_mosaic_enable_llo_source_annotations=true"]
    return flags


class DumpSession:
    """A child that compiles with the dump flags; ``run`` one request at a time. Use as a context
    manager: leaving it ends the child and removes the folder."""

    def __init__(self, topology: str, *, profile: bool, bundles: bool):
        self.topology, self.profile, self.bundles = topology, profile, bundles
        self.folder: str | None = None
        self._proc: subprocess.Popen | None = None
        self._janitor: subprocess.Popen | None = None
        self._results: int | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> "DumpSession":
        sweep_stale()
        # owned by this process (inspector.base.tempdirs): when the janitor dies with it (Ray kills a
        # cancelled task's worker with all its children), the next run's sweep removes the folder
        self.folder = new_folder(PREFIX.removeprefix("inspector-").rstrip("-"))
        try:
            self._janitor = subprocess.Popen(["/bin/sh", "-c", _JANITOR, "janitor", os.path.dirname(self.folder)],
                                             stdin=subprocess.PIPE,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def _folder(self) -> str:
        assert self.folder is not None, "inside the with block only (__enter__ makes it)"
        return self.folder

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _start(self) -> None:
        for sub in ("profile", "llo"):
            os.makedirs(os.path.join(self._folder, sub), exist_ok=True)
        env = dict(os.environ)
        own = " ".join(libtpu_flags(self._folder, profile=self.profile, bundles=self.bundles))
        env["LIBTPU_INIT_ARGS"] = f"{env.get('LIBTPU_INIT_ARGS', '')} {own}".strip()  # the user's flags stay
        env["INSPECTOR_SYS_PATH"] = json.dumps(sys.path)
        read_fd, write_fd = os.pipe()
        self._log = open(os.path.join(self._folder, "child.log"), "wb")
        try:
            self._proc = subprocess.Popen([sys.executable, "-P", "-c", _BOOT, str(write_fd), self.topology], stdin=subprocess.PIPE,
                                          stdout=self._log, stderr=self._log, pass_fds=(write_fd,), env=env,
                                          process_group=0)
        finally:
            os.close(write_fd)
        self._results = read_fd
        self._tell_janitor(str(self._proc.pid))

    def _tell_janitor(self, line: str) -> None:
        if self._janitor is None or self._janitor.stdin is None:
            return
        try:
            self._janitor.stdin.write(f"{line}\n".encode())
            self._janitor.stdin.flush()
        except OSError:
            pass

    def restart(self) -> None:
        """A new child (after an abort or a kill), same folder and flags."""
        self._stop_child()
        self._start()

    def run(self, request, *, seconds: float, memory_bytes: int) -> Outcome:
        """Compile ``request`` (a jax_internals.aot.CompileRequest) within the limits."""
        if not self.alive:
            self.restart()
        proc, results = self._proc, self._results
        assert proc is not None and proc.stdin is not None and results is not None  # alive, or _start made them
        start = time.perf_counter()
        try:
            send(proc.stdin.fileno(), request)
        except OSError:
            pass  # the child is gone: its exit says why, below
        answer, status, peak = None, None, None
        deadline = start + max(seconds, 0.0)
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                status = "time-limit"
                break
            ready, _, _ = select.select([results], [], [], min(left, 0.1))
            if ready:
                answer = receive(results)
                break
            rss = _rss(proc.pid)
            peak = max(peak or 0, rss or 0) or None
            if rss is not None and rss > memory_bytes:
                status = "memory-limit"
                break
        wall = time.perf_counter() - start
        if answer is None:
            status = status or self._ended()
            self._stop_child()
            outcome = Outcome(status, wall, peak)
            if outcome.status == "aborted":
                outcome.detail = abort_reason(self._log_tail())
            elif status == "time-limit":
                outcome.detail = f"stopped after {seconds:.0f} s (the time budget)"
            elif status == "memory-limit":
                outcome.detail = f"stopped at {memory_bytes / 2**30:.1f} GiB (the memory budget)"
        else:
            outcome = Outcome(answer["status"], answer["wall_seconds"], answer["peak_rss_bytes"] or peak,
                              _one_line(answer["error"]), answer["hlo"])
        self._collect(outcome)
        return outcome

    def _ended(self) -> str:
        assert self._proc is not None  # run's child, not yet stopped
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "no-answer"
        return "aborted" if code == -signal.SIGABRT or code == 128 + signal.SIGABRT else "no-answer"

    def _collect(self, outcome: Outcome) -> None:
        """Read what the compile wrote, then empty the folders for the next one."""
        profile_dir, llo_dir = os.path.join(self._folder, "profile"), os.path.join(self._folder, "llo")
        outcome.cycles, problems = read_profiles(profile_dir)
        outcome.unreadable += problems
        for op, files in llo_files(llo_dir).items():
            texts = {}
            for label, path in files.items():
                try:
                    texts[label] = read_text(path)
                except (OSError, UnicodeDecodeError) as err:
                    outcome.unreadable.append(f"{os.path.basename(path)}: {err}")
            outcome.llo[op] = texts
        for sub in (profile_dir, llo_dir):
            shutil.rmtree(sub, ignore_errors=True)
            os.makedirs(sub, exist_ok=True)

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._folder, "child.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - _LOG_TAIL))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _stop_child(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                try:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                except OSError:
                    self._proc.kill()
            self._proc.wait()
            self._tell_janitor("done")
            if self._proc.stdin:
                try:
                    self._proc.stdin.close()
                except OSError:
                    pass
            self._proc = None
        if self._results is not None:
            os.close(self._results)
            self._results = None

    def _release_janitor(self) -> None:
        janitor, self._janitor = self._janitor, None
        assert janitor is not None and janitor.stdin is not None  # close() checks; started with stdin=PIPE
        try:
            janitor.stdin.close()  # EOF: the child is gone and the folder too; it finds nothing to do
        except OSError:
            pass
        try:
            janitor.wait(timeout=5)
        except subprocess.TimeoutExpired:
            janitor.kill()

    def close(self) -> None:
        try:
            self._stop_child()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self.folder:
                remove(self.folder)
            if self._janitor is not None:
                self._release_janitor()


# Sessions kept for reuse while ``kept_sessions`` is active: {key: [DumpSession, ...]}, the key
# what a child is started with (``_kind``); the longest unused kinds are closed past the limit.
_KEPT: dict | None = None
_KEPT_LIMIT: int | None = None  # how many children stay, at most (None: all)
_KEEP_RSS_BYTES = 3 << 29  # a child that grew past 1.5 GiB is not kept: its memory would count against the next compile
# what changes between two calls of one process without changing what a child starts with
_UNREAD_ENVIRONMENT = frozenset({"PYTEST_CURRENT_TEST"})


def _kind(topology: str, profile: bool, bundles: bool) -> tuple:
    """What a child reads once, at its start: its flags, its topology, and the environment and
    module path it inherits (a caller that changed LIBTPU_INIT_ARGS or XLA_FLAGS since the child
    started needs a child of its own)."""
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k not in _UNREAD_ENVIRONMENT))
    return topology, profile, bundles, environment, tuple(sys.path)


@contextlib.contextmanager
def kept_sessions(limit: int | None = None):
    """While active, ``open_sessions`` starts each kind of child once and reuses it: a process that
    estimates many programs in a row (a tuner's worker) pays libtpu's start-up once, not per
    program. ``limit``: how many children stay between estimates at most (the kinds used longest
    ago close first). Leaving it closes them (their folders go as with any session)."""
    global _KEPT, _KEPT_LIMIT
    outer = _KEPT, _KEPT_LIMIT
    if _KEPT is None:
        _KEPT, _KEPT_LIMIT = {}, limit
    try:
        yield
    finally:
        if outer[0] is None:
            kept = _KEPT
            _KEPT, _KEPT_LIMIT = outer
            for sessions in kept.values():
                for session in sessions:
                    session.close()


@contextlib.contextmanager
def fresh_sessions():
    """Inside, each estimate starts its children and ends them, as outside ``kept_sessions``
    (the kept ones stay for after)."""
    global _KEPT
    outer, _KEPT = _KEPT, None
    try:
        yield
    finally:
        _KEPT = outer


@contextlib.contextmanager
def open_sessions(topology: str, *, profile: bool, bundles: bool, count: int = 1):
    """``count`` DumpSessions for one estimate (compiles that may run side by side): fresh ones, or
    under ``kept_sessions`` the kept ones, as many as there are."""
    key = _kind(topology, profile, bundles)
    kept = [] if _KEPT is None else _KEPT.pop(key, [])
    sessions = kept[:count] + [DumpSession(topology, profile=profile, bundles=bundles).__enter__()
                               for _ in range(count - len(kept[:count]))]
    extra = kept[count:]
    try:
        yield sessions
    except BaseException:
        for session in sessions + extra:
            session.close()
        raise
    if _KEPT is None:
        for session in sessions + extra:
            session.close()
        return
    for session in sessions:
        if session.alive and session._proc is not None and (_rss(session._proc.pid) or 0) > _KEEP_RSS_BYTES:
            session._stop_child()  # the next run starts a fresh one
    _KEPT[key] = sessions + extra  # the newest last: dicts keep their order
    _close_past_limit()


def _close_past_limit() -> None:
    assert _KEPT is not None
    while _KEPT_LIMIT is not None and sum(map(len, _KEPT.values())) > _KEPT_LIMIT:
        oldest = next(iter(_KEPT))
        sessions = _KEPT[oldest]
        sessions.pop(0).close()
        if not sessions:
            del _KEPT[oldest]


@contextlib.contextmanager
def open_session(topology: str, *, profile: bool, bundles: bool):
    """A DumpSession for one estimate: a fresh one, or under ``kept_sessions`` the kept one."""
    with open_sessions(topology, profile=profile, bundles=bundles) as (session,):
        yield session


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    return line if len(line) <= 300 else line[:297] + "..."


def sweep_stale() -> None:
    """Remove dump folders of processes that were killed along with their janitor (a reboot)."""
    for old in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*")):
        try:
            if time.time() - os.stat(old).st_mtime > _STALE_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
