"""Capture each pallas_call's Mosaic MLIR while it is lowered for a TPU.

The module is also serialized (as bytecode) into the custom call, but reading it back needs the
Mosaic serde pass; catching it where Pallas hands it to the custom-call builder is simpler, and
is the same module ``pallas_call(debug=True)`` prints.
"""
from __future__ import annotations

import contextlib
import dataclasses


@dataclasses.dataclass
class MosaicKernel:
    name: str
    source: str | None  # file:line of the pallas_call
    mlir: str


@contextlib.contextmanager
def capture_mosaic():
    """Yield a list that fills with MosaicKernel records as pallas_calls lower for TPU."""
    from jax._src import source_info_util
    from jax._src.pallas.mosaic import pallas_call_registration as reg

    found: list[MosaicKernel] = []
    original = reg._lower_to_custom_call

    def recording(ctx, *args, mosaic_module, name=None, **kwargs):
        frame = source_info_util.user_frame(getattr(ctx, "traceback", None))
        source = f"{frame.file_name}:{frame.start_line}" if frame else None
        found.append(MosaicKernel(name=name or "pallas_call", source=source, mlir=str(mosaic_module)))
        return original(ctx, *args, mosaic_module=mosaic_module, name=name, **kwargs)

    reg._lower_to_custom_call = recording
    try:
        yield found
    finally:
        reg._lower_to_custom_call = original
