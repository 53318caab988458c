"""What a measurement on the chip gives: plain data, JSON-serialisable."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelMeasure:
    """One HLO op of the program as the chip ran it: device time per run of the program (all its
    launches: an op inside a loop runs many times), and how many launches that was."""

    name: str
    seconds: float  # device time per program run, summed over its launches
    launches: float  # launches per program run
    min_seconds: float  # the fastest single launch
    max_seconds: float  # the slowest single launch


@dataclasses.dataclass(kw_only=True)
class Measurement:
    """A program run ``runs`` times on the attached chip under jax's profiler."""

    chip: str  # the chip table's name (tpu-v5e)
    device_kind: str  # what jax reports ("TPU v5 lite")
    versions: dict[str, str]  # jax, jaxlib, libtpu
    runs: int
    seconds: float  # the program's device time per run (median over runs of the module's span)
    seconds_min: float
    seconds_max: float
    kernels: list[KernelMeasure]
    method: str  # how it was measured, one line
    unmatched: list[str] = dataclasses.field(default_factory=list)  # measured ops the Report has no kernel for

    def kernel(self, name: str) -> KernelMeasure | None:
        return next((k for k in self.kernels if k.name == name), None)

    @property
    def kernels_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)
