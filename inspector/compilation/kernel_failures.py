"""A Pallas TPU kernel that fails to lower or compile, said as the kernel's fault or not: a known
interpreter limit on the CPU is not; a kernel Mosaic refuses gets its kernel, source line, rule and
fix (inspector.mosaic); a constant block index out of range, which makes libtpu abort the whole
process while it compiles, is the error the compile would give, found without compiling."""
from __future__ import annotations

from .backends import Backend
from .compile_errors import CompileError
from ..jax_internals.interpret import known_limit
from ..jax_internals.mesh_kernels import KERNEL_PRIMITIVES
from ..jax_internals.pallas import block_specs
from ..mosaic.block_guard import bad_block_indices
from ..mosaic.explain import explain_bad_block, explain_compile_error
from .stage_records import JaxprEqn, Stages


def lowering_failure(err: Exception, interpreted: bool = False) -> CompileError:
    """``interpreted``: the lowering ran Pallas TPU kernels through the interpreter (the CPU), so
    a known interpreter limit is that, not a fault of the kernel."""
    limit = known_limit(err) if interpreted else None
    return CompileError(message=f"{type(err).__name__} while lowering: {str(err).strip()}",
                        status="INTERPRETER_LIMIT" if limit else "LOWERING_FAILED", interpreter_limit=limit)


def explain_kernel_failure(stages: Stages, backend: Backend, closed_jaxpr, lowering_err: Exception | None = None) -> None:
    """A Pallas TPU kernel that failed to lower or compile: its kernel, source line, rule and fix
    (inspector.mosaic); the compiler's words stay in the message."""
    if not backend.chip.is_tpu or not has_pallas(stages.jaxpr_eqns):
        return
    error = stages.compile_error
    assert error is not None  # both callers call it for a failed lowering or compile
    error.mosaic = explain_compile_error(error, chip=backend.chip, kernels=stages.mosaic,
                                         closed_jaxpr=closed_jaxpr, lowering_err=lowering_err)


def compile_would_abort(stages: Stages, backend: Backend, closed_jaxpr) -> CompileError | None:
    """A constant block index out of range makes libtpu abort the process while it compiles
    (inspector.mosaic.block_guard): the error it would give, without compiling."""
    if not backend.chip.is_tpu or not has_pallas(stages.jaxpr_eqns):
        return None
    try:
        bad = bad_block_indices(block_specs(closed_jaxpr))
    except Exception:  # BlockSpecs this jax lays out differently: the compile decides, as before
        return None
    if not bad:
        return None
    return CompileError(message=bad[0].message, status="BLOCK_INDEX_OUT_OF_RANGE",
                        mosaic=explain_bad_block(bad[0], chip=backend.chip, kernels=stages.mosaic))


def has_pallas(eqns: list[JaxprEqn]) -> bool:
    """Whether the jaxpr has a Pallas kernel (pallas_call, pl.kernel, core_map)."""
    return any(e.primitive in KERNEL_PRIMITIVES for e in eqns)  # pallas_call, pl.kernel, core_map
