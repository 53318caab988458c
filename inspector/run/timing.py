"""How long the kernel and its reference take: device time from jax's profiler on a TPU, else the
median wall-clock time of a few runs (in interpret mode where the kernel was checked that way)."""
from __future__ import annotations

import statistics
import time

from ..compilation.backends import attached_chip
from ..base.chips import Chip
from ..measure.on_chip import measure_function
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .result import Timing


def device_timing(kernel, reference, args, kwargs, runs: int) -> Timing:
    """On a TPU: each function's device time from jax's profiler (wall-clock time there is mostly
    dispatch and synchronisation for programs under a millisecond)."""
    chip = attached_chip()
    name = chip.name if chip is not None else "tpu"
    k = measure_function(kernel, args, kwargs, chip_name=name, runs=max(runs, 3))
    r = measure_function(reference, args, kwargs, chip_name=name, runs=max(runs, 3))
    return Timing(kernel_s=k.seconds, reference_s=r.seconds, runs=k.runs,
                  note=f"device time on the {k.device_kind} (jax profiler), median of {k.runs} runs")


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
