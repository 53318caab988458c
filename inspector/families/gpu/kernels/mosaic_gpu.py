"""Mosaic GPU kernels' launches, read from the StableHLO. A Mosaic GPU kernel (Pallas's Hopper
backend, ``plgpu``) is no Triton fusion: it reaches XLA:GPU as a ``mosaic_gpu_v2`` custom call whose
backend config holds the kernel's whole MLIR module (bytecode), compiled to machine code only when
it first runs on a GPU. So no thunk launch dims and no PTX come out of a deviceless compile; the
module's ``gpu.launch`` holds the grid, the threads and the dynamic shared memory Mosaic GPU chose
(the figure it checks at lowering against the limit). Registers are not known before it runs."""
from __future__ import annotations

import re

from ....jax_internals.mosaic_gpu_module import read_module
from .thunks import Thunk

_CALL = re.compile(r"stablehlo\.custom_call @mosaic_gpu(?:_v2)?\(.*?\bmodule = \"((?:[^\"\\]|\\.)*)\"")
_ESCAPE = re.compile(rb"\\(\\|[0-9A-Fa-f]{2})")


def _unescape(text: str) -> bytes:
    """An MLIR string attribute's bytes: ``\\XX`` is a byte in hex, ``\\\\`` a backslash (MLIR
    prints every other byte as the printable ASCII it is)."""
    return _ESCAPE.sub(lambda m: b"\\" if m.group(1) == b"\\" else bytes([int(m.group(1), 16)]), text.encode("utf-8"))


def mosaic_launches(stablehlo: str) -> list[Thunk]:
    """Each Mosaic GPU kernel the lowered program calls, in order, as a launch."""
    found = []
    for match in _CALL.finditer(stablehlo):
        launch = read_module(_unescape(match.group(1)))
        if launch is not None:
            found.append(Thunk(index=0, kind="kMosaicGpu", name=launch.name, grid=launch.grid, threads=launch.threads,
                               shared_memory_bytes=launch.shared_memory_bytes))
    return found
