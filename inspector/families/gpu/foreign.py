"""A Pallas kernel written for a TPU (Mosaic's CompilerParams), asked to compile for a GPU: jax's
own lowering error then reads "To use Pallas on GPU, install jaxlib GPU", which is not the cause.
The capture's error is said as what it is, in one line: the kernel, where, and which targets it
compiles for (a TPU kernel gets no shared-memory budget either: pallas/vmem.py ``budget``). So is
a Mosaic GPU kernel (Hopper and later) asked for an older GPU, which compiles but cannot run."""
from __future__ import annotations

import dataclasses

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


HOPPER_ONLY = "HOPPER_ONLY"


def explain_mosaic_gpu_kernels(captured, chip: Chip):
    """``captured`` with an error where it holds Mosaic GPU kernels and ``chip`` is older than
    Hopper: XLA:GPU compiles one (the custom call's module becomes machine code only when it runs,
    and Mosaic GPU lowers for sm_90 when it sees no GPU), but it cannot run there."""
    stages = captured.stages
    capability = (chip.compute_capability or "").rstrip("a")
    if not capability or float(capability) >= 9 or captured.program.closed_jaxpr is None \
            or (stages.compile_error is not None and stages.compile_error.status == HOPPER_ONLY):
        return captured
    from ...compilation.compile_errors import CompileError
    from ...compilation.stage_records import Capture
    from ...pallas.discovery import find_pallas_calls  # (numpy, jax: only for a GPU before Hopper)

    try:
        calls = [found.info for found in find_pallas_calls(captured.program.closed_jaxpr)]
    except Exception:  # the kernels cannot be read: the compile's verdict stands
        return captured
    mosaic = [c for c in calls if c.written_for == "mosaic_gpu"]  # Mosaic GPU's CompilerParams
    if not mosaic:
        return captured
    where = ", ".join(f"{c.name}" + (f" at {c.source}" if c.source else "") for c in mosaic[:3])
    error = CompileError(message=f"{where}: a Mosaic GPU kernel (plgpu), which runs on Hopper and later only: {chip.name} "
                                 f"is sm_{capability.replace('.', '')}; check it on --target h100 or h200, or write it "
                                 "with Pallas's Triton backend (jax.experimental.pallas.triton)", status=HOPPER_ONLY)
    return Capture(dataclasses.replace(stages, compile_error=error), captured.program)
