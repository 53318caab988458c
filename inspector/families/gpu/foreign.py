"""A Pallas kernel written for the other family, asked to compile: jax's own lowering error names
neither the kernel nor the cause. A Pallas TPU kernel (Mosaic's CompilerParams) for a GPU reads "To
use Pallas on GPU, install jaxlib GPU"; a Pallas GPU kernel (Triton's or Mosaic GPU's CompilerParams)
for a TPU reads "Compiler params for platform gpu ...". The capture's error is said as what it is,
in one line: the kernel, where, and which targets it compiles for (a TPU kernel gets no shared-memory
budget either: pallas/budgets.py ``budget``). So is
a Mosaic GPU kernel (Hopper and later) asked for an older GPU, which compiles but cannot run."""
from __future__ import annotations

import dataclasses

from ...base.chips import Chip

STATUS = "WRITTEN_FOR_TPU"  # the compile error's status once said (explaining twice changes nothing)
GPU_STATUS = "WRITTEN_FOR_GPU"
GPU_BACKENDS = {"triton": "Triton's", "mosaic_gpu": "Mosaic GPU's"}  # PallasCall.written_for -> whose CompilerParams


def _foreign_calls(captured, written_for) -> list:
    """The Pallas calls of a program whose lowering failed that are written for ``written_for`` (a
    set of PallasCall.written_for); none where the kernels cannot be read (jax's message stands)."""
    error = captured.stages.compile_error
    if error is None or error.status != "LOWERING_FAILED" or captured.program.closed_jaxpr is None:
        return []
    from ...pallas.discovery import find_pallas_calls  # (numpy, jax: only for a failure)

    try:
        calls = [found.info for found in find_pallas_calls(captured.program.closed_jaxpr)]
    except Exception:
        return []
    return [c for c in calls if c.written_for in written_for]


def _where(calls: list) -> str:
    return ", ".join(f"{c.name}" + (f" at {c.source}" if c.source else "") for c in calls[:3])


def explain_tpu_kernels(captured, chip: Chip):
    """``captured`` with a lowering failure of a program holding Pallas TPU kernels said as that."""
    tpu = _foreign_calls(captured, {"mosaic_tpu"})  # Mosaic's CompilerParams
    if tpu:
        error = captured.stages.compile_error
        error.message = (f"{_where(tpu)}: a Pallas TPU kernel (Mosaic's CompilerParams), which cannot compile for a GPU "
                         f"({chip.name}): compile it for a TPU (--target tpu-v5e), or write it with Pallas's Triton "
                         "backend (jax.experimental.pallas.triton)")
        error.status = STATUS
    return captured


def explain_gpu_kernels(captured, chip: Chip):
    """``captured`` with a lowering failure of a program holding Pallas GPU kernels (Triton's or
    Mosaic GPU's CompilerParams) said as that, for a TPU target."""
    gpu = _foreign_calls(captured, set(GPU_BACKENDS))
    if gpu:
        error = captured.stages.compile_error
        whose = " and ".join(dict.fromkeys(GPU_BACKENDS[c.written_for] for c in gpu))
        error.message = (f"{_where(gpu)}: a Pallas GPU kernel ({whose} CompilerParams), which cannot compile for a TPU "
                         f"({chip.name}): compile it for a GPU (--target h100), or write it with Pallas's TPU "
                         "backend (jax.experimental.pallas.tpu)")
        error.status = GPU_STATUS
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
