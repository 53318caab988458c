"""The tune screen's progress (tune_screen.py): the sweep's Progress relayed from its thread to the
screen's, and the counts the progress line says (done, from the cache, per status, time left)."""
from __future__ import annotations

import dataclasses
from typing import Any

from .tune_table import RANKED


class Relay:
    """The sweep's Progress (inspector.tuning.sweep), from its thread to the screen's."""

    def __init__(self, screen: Any):  # the TuneScreen
        self.screen = screen

    def _post(self, fn, *args) -> None:
        try:
            self.screen.app.call_from_thread(lambda: fn(*args) if self.screen.is_attached else None)
        except RuntimeError:  # the app has stopped: nothing to show
            pass

    def start(self, total: int, done: int, workers: int, runner: str) -> None:
        self._post(self.screen.sweep_started, total, done, workers)

    def advance(self, row) -> None:
        self._post(self.screen.sweep_advanced, row.status)

    def stop(self) -> None:
        pass


@dataclasses.dataclass
class Counts:
    total: int = 0
    done: int = 0
    cached: int = 0
    computed: int = 0
    started: float = 0.0
    workers: int = 1
    statuses: dict = dataclasses.field(default_factory=dict)

    def line(self, now: float) -> str:
        parts = [f"{self.done} of {self.total} done"]
        if self.cached:
            parts.append(f"{self.cached} from the cache")
        parts += [f"{n} {s}" for s, n in self.statuses.items() if s != RANKED and n]
        elapsed = now - self.started
        text = ", ".join(parts) + f"; {elapsed:.0f} s on {self.workers} worker{'s' if self.workers != 1 else ''}"
        if self.computed and self.done < self.total:
            text += f", about {elapsed / self.computed * (self.total - self.done):.0f} s left"
        return text
