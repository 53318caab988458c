"""Run a program on the attached TPU under jax's profiler and read each op's device time.

This runs in a process of its own (``measure_target`` starts it with ``environment.chip_env``): the
only process of the inspector that opens the chip, and only for as long as the runs take. A chip
that another process holds is ``ChipBusy`` (one line, exit 4), never a traceback.
"""
from __future__ import annotations

import functools
import math
import time

from ..base.environment import chip_failure
from ..base.errors import NoChip
from .model import Measurement
from .profile import UnreadableTrace, newest_trace, read_profile, summary

# what a measurement aims for: enough runs for a stable median, within a bounded time
MIN_RUNS, MAX_RUNS, TARGET_SECONDS = 3, 100, 0.3
def tpu_devices():
    """jax's TPU devices, opening the chip; ChipBusy/NoChip when it cannot be had."""
    import jax

    try:
        devices = jax.devices("tpu")
    except RuntimeError as err:
        failure = chip_failure(err)
        if failure is None:
            raise
        raise failure from err
    if not devices:
        raise NoChip("jax sees no TPU here")
    return devices


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("jax", "jaxlib", "libtpu"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def measure_compiled(compiled, args, kwargs, *, chip_name: str, runs: int | None = None,
                     target_seconds: float = TARGET_SECONDS) -> Measurement:
    """Run ``compiled`` (a jax Compiled on the TPU) ``runs`` times under the profiler (by default as
    many as fill ``target_seconds``, 3 to 100) after one warm-up run; each op's device time."""
    import tempfile

    import jax

    devices = tpu_devices()
    jax.block_until_ready(compiled(*args, **kwargs))  # warm-up: first-run transfers and allocations
    if runs is None:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args, **kwargs))
        once = max(time.perf_counter() - t0, 1e-6)
        runs = int(min(MAX_RUNS, max(MIN_RUNS, math.ceil(target_seconds / once))))
    with tempfile.TemporaryDirectory(prefix="inspector-trace-") as folder:
        with jax.profiler.trace(folder):
            out = None
            for _ in range(runs):
                out = compiled(*args, **kwargs)
            jax.block_until_ready(out)
        data = jax.profiler.ProfileData.from_file(newest_trace(folder))
        run_seconds, kernels = read_profile(data, runs)
    median, fastest, slowest = summary(run_seconds)
    kernels.sort(key=lambda k: -k.seconds)
    return Measurement(chip=chip_name, device_kind=devices[0].device_kind, versions=versions(), runs=len(run_seconds),
                       seconds=median, seconds_min=fastest, seconds_max=slowest, kernels=kernels,
                       method=f"jax.profiler trace, {len(run_seconds)} runs after a warm-up; device time of each "
                              "HLO op (plane /device:TPU:0, line XLA Ops); the program's is the median run")


def measure_function(fn, args, kwargs, *, chip_name: str, runs: int | None = None) -> Measurement:
    """``fn`` jitted, compiled for the attached chip and measured."""
    import jax

    tpu_devices()
    compiled = jax.jit(fn).lower(*args, **kwargs).compile()
    return measure_compiled(compiled, args, kwargs, chip_name=chip_name, runs=runs)


def measure_target(target, *, chip_name: str, seed: int = 0, runs: int | None = None) -> Measurement:
    """The target's function on random inputs of its example shapes, measured on the chip."""
    from ..compilation.target_inputs import make_inputs

    tpu_devices()
    args, kwargs = make_inputs(target, seed)
    return measure_function(functools.partial(target.fn, **target.params), args, kwargs, chip_name=chip_name, runs=runs)


__all__ = ["UnreadableTrace", "measure_compiled", "measure_function", "measure_target", "tpu_devices"]
