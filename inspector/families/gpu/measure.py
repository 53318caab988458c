"""Time measured on the attached NVIDIA GPU (``--measure`` with a GPU target): the program run a
few times, each kernel launch's device time from CUPTI (``jax.experimental.mosaic.gpu.profiler``),
named back to the HLO op it runs, so a measurement sits beside the deviceless compile's kernels.

``attached_gpu`` reads which GPU is there without opening it (jax's CUDA backend takes most of the
GPU's memory when it starts, and the measuring process needs it); ``measure_target`` runs in the
process of its own that ``families/measuring.py`` starts. ``on_gpu`` is the one call that needs the GPU
(its ``launch_times`` is tests/bench/gpu_chip.py's too; a test fakes it); the rest is plain data.
"""
from __future__ import annotations

import functools
import glob
import re
import statistics
import time
from typing import Callable

from ...base.chips import CHIPS, Chip
from ...measure.model import KernelMeasure, Measurement
from .time import launch_names

DRIVER_INFO = "/proc/driver/nvidia/gpus/*/information"  # one per GPU: "Model: NVIDIA H100 80GB HBM3", ...
RUNS = 20  # runs measured after a warm-up run
WALL = "(program)"  # the one "kernel" of a wall-clock measurement
_OP = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", re.MULTILINE)


def attached_gpu() -> Chip | None:
    """The GPU row of the first NVIDIA GPU attached here, by the model name its driver gives (what
    jax's ``device_kind`` reports for it), read without opening the GPU; None where there is no
    NVIDIA driver, no jax CUDA plugin to run on it, or the model is none of the chip table's."""
    from ...base.environment import local_platforms

    models = []
    for path in sorted(glob.glob(DRIVER_INFO)):
        try:
            with open(path) as f:
                models += [line.split(":", 1)[1].strip() for line in f if line.startswith("Model:")]
        except OSError:
            continue
    if not models or "cuda" not in local_platforms():
        return None
    return next((c for c in CHIPS if c.kind == "gpu" and c.device_kind in models), None)


def gpu_device():
    """jax's first GPU, opening it; NoChip where jax sees none."""
    import jax

    from ...base.errors import NoChip

    try:
        devices = jax.devices("gpu")
    except RuntimeError as err:
        raise NoChip(f"jax cannot open a GPU here ({str(err).splitlines()[0][:200]})") from err
    return devices[0]


def launch_times(fn: Callable, args: list, kwargs: dict, runs: int) -> tuple[str, list[list[tuple[str, float]]]]:
    """How it was timed, and per run each kernel launch in order: (its name, milliseconds), as
    CUPTI timed it after a warm-up run. Where CUPTI cannot run (no cupti library), the program's
    wall time per run instead, as one launch named ``WALL``."""
    import jax

    jax.block_until_ready(fn(*args, **kwargs))  # compiled and warmed up outside the measurement
    try:
        from jax.experimental.mosaic.gpu import profiler

        timed_fn = functools.partial(fn, **kwargs) if kwargs else fn  # a jitted fn is measured as it is
        _, timings = profiler.measure(timed_fn, aggregate=False, iterations=runs)(*args)
        per_run: list = [timings] if runs == 1 and timings else list(timings or [])  # one run is not wrapped in a list
        return "CUPTI (jax.experimental.mosaic.gpu.profiler.measure)", [list(run) for run in per_run]
    except Exception as err:  # noqa: BLE001 - the wall time still gives the program's total
        why = f"{type(err).__name__}: {err}"[:200]
    timed = []
    for _ in range(runs):
        started = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        timed.append([(WALL, (time.perf_counter() - started) * 1e3)])
    return f"wall clock (CUPTI failed: {why})", timed


def op_names(hlo: str) -> dict[str, str]:
    """The launch name -> the HLO op it runs: XLA names a fusion's kernel after the op with ``.``
    and ``-`` made ``_``, a Pallas-Triton call's after its kernel function (time.launch_names)."""
    names = {re.sub(r"[.\-]", "_", op): op for op in _OP.findall(hlo)}
    names.update({kernel: op for op, kernel in launch_names(hlo).items()})
    return names


def _op_of(launch: str, names: dict[str, str]) -> str:
    if launch in names:
        return names[launch]
    base = re.sub(r"[._]\d+$", "", launch)  # a kernel function launched by several calls gets a suffix
    return names.get(base, launch)


def measurement(chip_name: str, device_kind: str, method: str, hlo: str, runs: list[list[tuple[str, float]]],
                versions: dict[str, str]) -> Measurement:
    """The runs' launches as a Measurement: each op's device time per run (median over the runs,
    summed over its launches in a run), the program's the median run's launches summed."""
    from ...base.errors import AnalysisFailed

    if not runs or not any(runs):
        raise AnalysisFailed(f"the program launched no kernel on the {chip_name} ({method})")
    names = op_names(hlo)
    per_op: dict[str, list[list[float]]] = {}  # op -> per run, its launches' seconds
    for i, run in enumerate(runs):
        for launch, ms in run:
            per_op.setdefault(_op_of(launch, names), [[] for _ in runs])[i].append(ms * 1e-3)
    kernels = [KernelMeasure(name=op, seconds=statistics.median(sum(r) for r in timed), launches=len(timed[0]),
                             min_seconds=min(min(r) for r in timed if r), max_seconds=max(max(r) for r in timed if r))
               for op, timed in per_op.items() if op != WALL]
    kernels.sort(key=lambda k: -k.seconds)
    totals = [sum(ms for _, ms in run) * 1e-3 for run in runs]
    return Measurement(chip=chip_name, device_kind=device_kind, versions=versions, runs=len(runs),
                       seconds=statistics.median(totals), seconds_min=min(totals), seconds_max=max(totals), kernels=kernels,
                       method=f"{method}, {len(runs)} runs after a warm-up; each kernel launch's device time, named by "
                              "the HLO op it runs; the program's is the median run's kernels summed")


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def on_gpu(fn, args: list, kwargs: dict, runs: int) -> tuple[str, str, str, list[list[tuple[str, float]]]]:
    """``fn`` (jitted) compiled and run on the attached GPU: (jax's device kind, the HLO of its
    compile, how it was timed, each run's launches as ``launch_times`` gives them)."""
    device = gpu_device()
    hlo = fn.lower(*args, **kwargs).compile().as_text() or ""
    method, timed = launch_times(fn, args, kwargs, runs)
    return device.device_kind, hlo, method, timed


def measure_target(target, *, chip_name: str, seed: int = 0, runs: int | None = None) -> Measurement:
    """The target's function on random inputs of its example shapes, measured on the attached GPU
    (``runs`` after a warm-up, default RUNS)."""
    import jax

    from ...compilation.target_inputs import make_inputs

    args, kwargs = make_inputs(target, seed)
    kind, hlo, method, timed = on_gpu(jax.jit(functools.partial(target.fn, **target.params)), list(args), kwargs,
                                      runs or RUNS)
    return measurement(chip_name, kind, method, hlo, timed, versions())
