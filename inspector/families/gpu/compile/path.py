"""The GPU family's compile path (docs/backends.md, ``CompilePath``): what the shared compile
(``compilation/``) asks of a family, for a GPU chip row with an XLA target config. The devices are
the deviceless cuda topology's; no lowering hook is needed (a Pallas-Triton or Mosaic GPU kernel is
a custom call the StableHLO holds whole), and no kernel aborts the process, so a GPU compile needs no
child of its own. The compile's dumps (``compilation.xla_compile.buffer_dump_options``) hold the
thunk sequence and the PTX beside the buffer assignment."""
from __future__ import annotations

import contextlib
from typing import ContextManager

from ....base.chips import Chip
from ....jax_internals.cuda_topology import chip_devices, mesh_of, unavailable
from .errors import SharedMemoryRefusal, shared_memory_refusal


class GpuCompilePath:
    """How a GPU chip row compiles here: XLA:GPU on the cuda topology its target config describes."""

    platform = "cuda"
    interprets_pallas = False
    keeps_kernel_dumps = True  # the thunk sequence and the PTX: each kernel's launch, registers and spills
    pallas_backend: str | None = "triton"  # Pallas's GPU default is Mosaic GPU (Hopper and later): Triton compiles on every row

    def __init__(self, chip: Chip):
        self.chip = chip
        self._devices: tuple | None = None

    def available(self) -> str | None:
        """Why this chip cannot compile here (one line), or None when it can."""
        return unavailable(self.chip)

    def devices(self) -> tuple:
        """The compile-only devices of the chip (``chip.devices`` GPUs of one node), made once."""
        if self._devices is None:
            self._devices = chip_devices(self.chip)
        return self._devices

    def mesh(self):
        """A one-axis mesh over the topology's first GPU (the program's own mesh spans them all)."""
        return mesh_of(list(self.devices()[:1]))

    def device_count(self) -> int:
        return self.chip.devices

    def lowering_capture(self) -> ContextManager[list]:
        return contextlib.nullcontext([])

    def failed_kernel(self, stages, lowering_err: Exception | None = None):
        return None  # the refusal's figures are in its message (shared_memory)

    def would_abort(self, stages, closed_jaxpr):
        return None  # XLA:GPU refuses with a status, it does not abort the process

    def compile_options(self) -> dict:
        return {}  # the machine code is what the GPU views read: compiled as XLA would

    def shared_memory(self, text: str) -> SharedMemoryRefusal | None:
        """The compiler's shared-memory figures in a refusal (the twin of ``CompileError.vmem``)."""
        return shared_memory_refusal(text)
