"""The compile paths a ``Backend`` is handed (``base.families.CompilePath``): libtpu's deviceless
topologies, jax's local backends, and the refusal of a spec-only chip (the GPU family's own,
XLA:GPU's deviceless topologies, is ``families/gpu/compile/path.py``).

The families (``inspector/families/``) pick one per chip; ``own_path`` is the path a chip row
names by itself (a libtpu topology, a local platform of jax, else none), for a ``Backend`` made
without one.
"""
from __future__ import annotations

import contextlib

from ..base.chips import Chip
from ..base.environment import libtpu_available
from ..jax_internals import tpu_topology
from .kernel_failures import compile_would_abort, failed_kernel

# jax's local platforms a chip row may name, and whether Pallas TPU kernels are interpreted there
# (the CPU: they cannot compile; a local GPU lowers its own kernels)
LOCAL_PLATFORMS = {"cpu": True, "gpu": False}


class LibtpuPath:
    """A TPU chip compiled deviceless by libtpu on a host-sized topology (one chip of it, or a
    slice's every device); Mosaic's MLIR is captured while lowering, a failed kernel kept."""

    platform = "tpu"
    interprets_pallas = False
    keeps_kernel_dumps = False  # Mosaic's dumps come from a compile of their own (mosaic/passes.py)
    pallas_backend: str | None = None  # Mosaic TPU, Pallas's default on a TPU

    def __init__(self, chip: Chip):
        self.chip = chip

    def available(self) -> str | None:
        if libtpu_available():
            return None
        from ..jax_internals import jax_version
        return (f"target {self.chip.name} needs libtpu, which is not installed: pip install "
                f"'jax[tpu]=={jax_version()}' (the libtpu of your jax; local targets such as cpu work without it)")

    def mesh(self):
        assert self.chip.topology is not None  # every TPU row has one
        return tpu_topology.tpu_mesh(self.chip.topology)

    def devices(self) -> tuple:
        assert self.chip.topology is not None
        return tpu_topology.topology_devices(self.chip.topology)

    def device_count(self) -> int:
        return self.chip.devices

    def lowering_capture(self) -> contextlib.AbstractContextManager[list]:
        from ..jax_internals.mosaic import capture_mosaic
        return capture_mosaic()

    def failed_kernel(self, stages, lowering_err: Exception | None = None):
        return failed_kernel(stages, lowering_err)

    def would_abort(self, stages, closed_jaxpr):
        return compile_would_abort(stages, closed_jaxpr)

    def compile_options(self) -> dict:
        return {}


class LocalPath:
    """jax's own backend of this machine (``cpu``, a local ``gpu``)."""

    keeps_kernel_dumps = False
    pallas_backend: str | None = None

    def __init__(self, chip: Chip):
        self.chip = chip
        self.platform = chip.name
        self.interprets_pallas = LOCAL_PLATFORMS.get(chip.name, False)

    def available(self) -> str | None:
        if self.interprets_pallas:  # the CPU: jax always has it
            return None
        import jax
        if any(d.platform == self.platform for d in jax.devices()):
            return None
        return (f"--target {self.platform}: jax sees no {self.platform.upper()} here (install jax[cuda12] on a GPU "
                "machine), use cpu or a TPU target")

    def mesh(self):
        return None

    def devices(self) -> tuple:
        import jax
        return tuple(jax.devices(self.platform))

    def device_count(self) -> int:
        return len(self.devices())

    def lowering_capture(self) -> contextlib.AbstractContextManager[list]:
        return contextlib.nullcontext([])

    def failed_kernel(self, stages, lowering_err: Exception | None = None):
        return None

    def would_abort(self, stages, closed_jaxpr):
        return None

    def compile_options(self) -> dict:
        """On the CPU, LLVM without optimization: see ``xla_compile.machine_code_options``."""
        return {"xla_backend_optimization_level": 0} if self.interprets_pallas else {}


class SpecOnlyPath(LocalPath):
    """A chip known by its figures only (budgets and roofline): it cannot compile here."""

    def available(self) -> str | None:
        return (f"{self.chip.name} has no XLA target config: a spec-only target (budgets and roofline); it cannot compile here. "
                "Compile with --target gpu on a machine with a GPU, or a TPU target")


def own_path(chip: Chip):
    """The path a chip row names by itself: its libtpu topology, its XLA:GPU target config, a local
    platform of jax, else none."""
    if chip.topology is not None:
        return LibtpuPath(chip)
    if chip.target_config:  # XLA:GPU's deviceless compile of the row's target config
        from ..families.gpu.compile.path import GpuCompilePath
        return GpuCompilePath(chip)
    return LocalPath(chip) if chip.name in LOCAL_PLATFORMS else SpecOnlyPath(chip)
