"""A Pallas kernel written for a TPU (Mosaic's CompilerParams), asked to compile for a GPU: jax's
own lowering error then reads "To use Pallas on GPU, install jaxlib GPU", which is not the cause.
The capture's error is said as what it is, in one line: the kernel, where, and which targets it
compiles for (a TPU kernel gets no shared-memory budget either: pallas/vmem.py ``budget``)."""
from __future__ import annotations

from ...base.chips import Chip

STATUS = "WRITTEN_FOR_TPU"  # the compile error's status once said (explaining twice changes nothing)


def explain_tpu_kernels(captured, chip: Chip):
    """``captured`` with a lowering failure of a program holding Pallas TPU kernels said as that."""
    error = captured.stages.compile_error
    if error is None or error.status != "LOWERING_FAILED" or captured.program.closed_jaxpr is None:
        return captured
    from ...pallas.discovery import find_pallas_calls  # (numpy, jax: only for a failure)

    try:
        calls = [found.info for found in find_pallas_calls(captured.program.closed_jaxpr)]
    except Exception:  # the kernels cannot be read: jax's own message stands
        return captured
    tpu = [c for c in calls if c.written_for == "mosaic_tpu"]  # Mosaic's CompilerParams
    if not tpu:
        return captured
    where = ", ".join(f"{c.name}" + (f" at {c.source}" if c.source else "") for c in tpu[:3])
    error.message = (f"{where}: a Pallas TPU kernel (Mosaic's CompilerParams), which cannot compile for a GPU "
                     f"({chip.name}): compile it for a TPU (--target tpu-v5e), or write it with Pallas's Triton "
                     "backend (jax.experimental.pallas.triton)")
    error.status = STATUS
    return captured
