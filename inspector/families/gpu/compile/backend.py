"""What the shared ``Backend`` (compilation/backends.py) asks of the GPU family for a GPU chip row:
the deviceless cuda topology's devices, or the one-line reason it cannot compile here."""
from __future__ import annotations

from ....base.chips import Chip
from ....base.errors import UsageError
from .path import GpuCompilePath


def gpu_devices(chip: Chip) -> tuple:
    """The compile-only devices of ``chip`` (its ``chip.devices`` GPUs), or UsageError saying why
    this chip cannot compile here (no target config, no CUDA plugin)."""
    path = GpuCompilePath(chip)
    why = path.available()
    if why is not None:
        raise UsageError(f"--target {chip.name}: {why}")
    try:
        return path.devices(chip)
    except RuntimeError as err:  # the plugin refused the topology
        raise UsageError(f"--target {chip.name}: XLA:GPU's deviceless topology failed: {err}") from err
