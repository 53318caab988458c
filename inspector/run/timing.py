"""How long the kernel and its reference take: device time on the attached chip (a TPU, or the GPU
of a GPU target), measured by that chip's family (``Family.measure``), else the median wall-clock
time of a few runs (in interpret mode where the kernel was checked that way)."""
from __future__ import annotations

import statistics
import time

from ..base.chips import Chip
from ..compilation.target import Target
from ..families import family_of
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .result import Timing


def device_timing(kernel: Target, reference: Target, chip: Chip, chip_name: str, seed: int, runs: int) -> Timing:
    """On the attached ``chip`` (this process has it open): each target's device time, as its
    family measures it (wall-clock time there is mostly dispatch and synchronisation for programs
    under a millisecond); ``chip_name`` labels the measurement."""
    family = family_of(chip)
    k = family.measure(kernel, chip_name=chip_name, seed=seed, runs=max(runs, 3))
    r = family.measure(reference, chip_name=chip_name, seed=seed, runs=max(runs, 3))
    how = k.method.split(" (")[0].split(",")[0]  # "jax.profiler trace", "CUPTI", "wall clock"
    return Timing(kernel_s=k.seconds, reference_s=r.seconds, runs=k.runs,
                  note=f"device time on the {k.device_kind} ({how}), median of {k.runs} runs")


def median_time(fn, args, kwargs, runs: int, sim: Chip | None, options: dict | None = None) -> float | None:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        if sim is not None:
            outcome = interpreted.run(fn, args, kwargs, sim, cores=1, check=False, **(options or {}))
            err = outcome.error
        else:
            _, err = interpreted.plain(fn, args, kwargs)
        if err is not None:
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if times else None
