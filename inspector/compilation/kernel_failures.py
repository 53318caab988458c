"""A Pallas TPU kernel that fails to lower or compile, said as the kernel's fault or not: a known
interpreter limit on the CPU is not; a constant block index out of range, which makes libtpu abort
the whole process while it compiles, is the error the compile would give, found without compiling.

The capture only keeps what explaining a failure needs (``FailedKernel``: the user's frames of the
equation being lowered, read off the exception, which does not outlive the capture); the kernel,
source line, rule and fix are ``inspector.mosaic.explain``'s, an analysis above this layer that
the Report, check and tune call on what was captured.
"""
from __future__ import annotations

from .block_guard import bad_block_indices
from .compile_errors import CompileError
from ..jax_internals.interpret import known_limit
from ..jax_internals.mesh_kernels import KERNEL_PRIMITIVES
from ..jax_internals.mosaic import lowering_frames, raised_in_pallas_tpu_lowering
from ..jax_internals.pallas import block_specs
from .stage_records import FailedKernel, JaxprEqn, Stages


def lowering_failure(err: Exception, interpreted: bool = False) -> CompileError:
    """``interpreted``: the lowering ran Pallas TPU kernels through the interpreter (the CPU), so
    a known interpreter limit is that, not a fault of the kernel."""
    limit = known_limit(err) if interpreted else None
    return CompileError(message=f"{type(err).__name__} while lowering: {str(err).strip()}",
                        status="INTERPRETER_LIMIT" if limit else "LOWERING_FAILED", interpreter_limit=limit)


def failed_kernel(stages: Stages, lowering_err: Exception | None = None) -> FailedKernel | None:
    """What explaining a failed lowering or compile of a program with Pallas TPU kernels needs
    (None where there is nothing to explain: no Pallas kernel; the TPU's compile path calls it,
    ``LibtpuPath.failed_kernel``); ``lowering_err``: the exception, when lowering failed."""
    if not has_pallas(stages.jaxpr_eqns):
        return None
    if lowering_err is None:
        return FailedKernel(lowering=False)
    return FailedKernel(lowering=True, frames=tuple(lowering_frames(lowering_err)),
                        in_pallas_lowering=raised_in_pallas_tpu_lowering(lowering_err))


def compile_would_abort(stages: Stages, closed_jaxpr) -> tuple[CompileError, FailedKernel] | None:
    """A constant block index out of range makes libtpu abort the process while it compiles
    (block_guard): the error it would give, without compiling, and the block to explain it by
    (``LibtpuPath.would_abort``)."""
    if not has_pallas(stages.jaxpr_eqns):
        return None
    try:
        bad = bad_block_indices(block_specs(closed_jaxpr))
    except Exception:  # BlockSpecs this jax lays out differently: the compile decides, as before
        return None
    if not bad:
        return None
    return (CompileError(message=bad[0].message, status="BLOCK_INDEX_OUT_OF_RANGE"),
            FailedKernel(lowering=False, bad_block=bad[0]))


def has_pallas(eqns: list[JaxprEqn]) -> bool:
    """Whether the jaxpr has a Pallas kernel (pallas_call, pl.kernel, core_map)."""
    return any(e.primitive in KERNEL_PRIMITIVES for e in eqns)  # pallas_call, pl.kernel, core_map
