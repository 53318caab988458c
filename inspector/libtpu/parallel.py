"""libtpu's compiles run side by side, each in a dump child of its own, within the memory budget.

The results are the same whatever runs at once: each compile is independent, and the estimate
takes their outcomes in the order it planned them. Only the wall time changes with the cores.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time

from ..base import cores
from .runner import Outcome

MAX_WORKERS = 4  # past this, libtpu's compiles contend for memory bandwidth more than they gain


@dataclasses.dataclass(frozen=True)
class Compile:
    """A request for a dump child (a CompileRequest or a ReplayRequest) and its limits."""

    request: object
    seconds: float  # its hard stop
    memory_bytes: int  # its hard stop
    expected_bytes: float  # what the plan expects it to take: what it holds of the budget while it runs


def workers(count: int = MAX_WORKERS) -> int:
    """How many compiles run at once: one a core this process may use (base.cores), at most MAX_WORKERS."""
    return max(1, min(count, cores.available(), MAX_WORKERS))


def run_all(sessions: list, compiles: list[Compile], memory_budget: float, deadline: float = math.inf) -> list[Outcome]:
    """Each compile's outcome, in the order given; one at a time in each of ``sessions`` (dump
    children), while what the running ones expect to take stays within ``memory_budget`` (one
    runs whatever it expects). None starts or runs past ``deadline`` (time.monotonic()): only a
    machine many times slower than the plan expects reaches it."""
    if not compiles:
        return []
    outcomes: list[Outcome | None] = [None] * len(compiles)
    lock = threading.Condition()
    state: dict[str, float] = {"next": 0, "held": 0.0, "running": 0}

    def take() -> int | None:
        with lock:
            while True:
                n = int(state["next"])
                if n >= len(compiles):
                    return None
                need = compiles[n].expected_bytes
                if state["running"] == 0 or state["held"] + need <= memory_budget:
                    state["next"], state["held"], state["running"] = n + 1, state["held"] + need, state["running"] + 1
                    return n
                lock.wait()

    def done(n: int) -> None:
        with lock:
            state["held"] -= compiles[n].expected_bytes
            state["running"] -= 1
            lock.notify_all()

    def work(session) -> None:
        while (n := take()) is not None:
            try:
                c, left = compiles[n], deadline - time.monotonic()
                outcomes[n] = (session.run(c.request, seconds=min(c.seconds, left), memory_bytes=c.memory_bytes) if left > 1
                               else Outcome("no-answer", 0.0, None, detail="not run: the estimate passed its time limit"))
            finally:
                done(n)

    sessions = sessions[:len(compiles)]
    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in sessions[1:]]
    for t in threads:
        t.start()
    work(sessions[0])
    for t in threads:
        t.join()
    return [o if o is not None else Outcome("no-answer", 0.0, None, detail="not run") for o in outcomes]
