"""Capture each pallas_call's Mosaic MLIR while it is lowered for a TPU.

The module is also serialized (as bytecode) into the custom call, but reading it back needs the
Mosaic serde pass; catching it where Pallas hands it to the custom-call builder is simpler, and
is the same module ``pallas_call(debug=True)`` prints.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from ..pallas.model import MosaicKernel
from .tracing import user_frame


@contextlib.contextmanager
def capture_mosaic() -> Iterator[list[MosaicKernel]]:
    """Yield a list that fills with MosaicKernel records as pallas_calls lower for TPU. Where this
    jax lays the lowering out differently, the list stays empty (the Mosaic view says so)."""
    try:
        from jax._src.pallas.mosaic import pallas_call_registration as reg
        original = reg._lower_to_custom_call
    except (ImportError, AttributeError):
        yield []
        return

    found: list[MosaicKernel] = []

    def recording(ctx, *args, mosaic_module, name=None, **kwargs):
        frame = user_frame(getattr(ctx, "traceback", None))
        source = f"{frame[0]}:{frame[1]}" if frame else None
        found.append(MosaicKernel(name=name or "pallas_call", source=source, mlir=str(mosaic_module)))
        return original(ctx, *args, mosaic_module=mosaic_module, name=name, **kwargs)

    reg._lower_to_custom_call = recording
    try:
        yield found
    finally:
        reg._lower_to_custom_call = original
