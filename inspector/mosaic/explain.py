"""A failed Pallas TPU lowering or Mosaic compile, explained: which kernel, the user's source line
of the failing operation, the rule it broke and the usual fix (inspector.mosaic.error_kinds).

The source line comes from what the failure carries: the MLIR location of the failing op in a
Mosaic compile error (``at location: loc(...)``), or the jaxpr equation jax was lowering (the
user frames it chains onto a lowering error). Where neither names a line (an error about a
BlockSpec, VMEM out of memory) the pallas_call's own line stands in, and ``source_of`` says so.

The capture (``inspector.compilation``) keeps what a failure leaves; ``explain_capture`` explains
it, above the compile path, wherever a capture's compile error is shown.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from ..base.chips import Chip
from ..base.mosaic_failure import MosaicFailure
from ..jax_internals import jax_version
from ..base.units import fmt_bytes
from .error_kinds import ALTERNATIVES, NO_ALTERNATIVE, ErrorKind, classify, fill
from ..base.user_code import short_path
from ..hlo.mlir_locations import Frame, error_location, strip_error_location

if TYPE_CHECKING:  # (numpy)
    from ..base.pallas_model import MosaicKernel, PallasCall
    from ..compilation.stage_records import Capture, FailedKernel

_OP_INVOLVED = re.compile(r"The MLIR operation involved:\s*\n\s*(.+)")
_NOISE = re.compile(r"^\s*(Please report a bug at|Please file an issue at)[^\n]*\n?", re.M)
_WINDOW = re.compile(r"window params for (input|output) (\d+)")
_VECTOR = re.compile(r"vector<((?:\d+x)*)(\w+)>")
_MLIR_DTYPES = {"f8E5M2": "float8_e5m2", "f8E4M3FN": "float8_e4m3fn", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
                "i4": "int4", "i8": "int8", "i16": "int16", "i32": "int32", "i1": "bool", "bf16": "bfloat16",
                "f16": "float16", "f32": "float32", "f64": "float64", "i64": "int64"}


def _compiler_words(message: str) -> str:
    text = _NOISE.sub("", strip_error_location(message)).strip()
    return text if len(text) <= 2000 else text[:1997] + "..."


def _frame_text(f: Frame) -> str:
    return f"{f.where} {f.function}" if f.function else f.where


def _kernel_function(call: PallasCall) -> str | None:
    src = call.kernel_source or ""
    return src.rpartition(" at ")[0] or None if " at " in src else None


def _find_kernel(frames: list[Frame], kernels: list[MosaicKernel], calls: list[PallasCall], lowering: bool,
                 named: str | None) -> tuple[str | None, str | None]:
    """(kernel name, pallas_call file:line) of the failing kernel, as sure as the evidence allows."""
    by_name = {c.name: c for c in calls}
    if named:  # the compiler named the HLO instruction: flash_attention_fwd.1 -> flash_attention_fwd
        base = re.sub(r"\.\d+$", "", named)
        for k in kernels:
            if k.name == base:
                return k.name, k.source
        if base in by_name:
            return base, by_name[base].source
    wheres = [f.where for f in frames]
    for k in kernels:
        if any(w in k.lines for w in wheres):
            return k.name, k.source
    functions = {f.function for f in frames if f.function}
    for c in calls:
        fn = _kernel_function(c)
        if fn and (fn in functions or any(f.endswith("." + fn) or fn.endswith("." + f) for f in functions)):
            return c.name, c.source
    if lowering and len(calls) > len(kernels):  # kernels lower in program order: the first not lowered failed
        c = calls[len(kernels)]
        return c.name, c.source
    if len(kernels) == 1 and (not calls or len(calls) == 1):
        return kernels[0].name, kernels[0].source
    if len(calls) == 1:
        return calls[0].name, calls[0].source
    return None, None


def _shape(dims: str, dtype: str) -> str:
    return f"{_MLIR_DTYPES.get(dtype, dtype)}[{','.join(d for d in dims.split('x') if d)}]"


def _shape_change(op: str | None) -> str:
    """For a shape cast: which of the last two dimensions it changes."""
    if not op:
        return ""
    found = _VECTOR.findall(op.split(":", 1)[-1] if ":" in op else op)
    if len(found) < 2:
        return ""
    (a_dims, a_t), (b_dims, b_t) = found[0], found[-1]
    a = [int(d) for d in a_dims.split("x") if d]
    b = [int(d) for d in b_dims.split("x") if d]
    tail = lambda s: tuple(s[-2:])
    if tail(a) == tail(b):
        return f": here {_shape(a_dims, a_t)} -> {_shape(b_dims, b_t)}, the last two dimensions stay"
    return (f": here {_shape(a_dims, a_t)} -> {_shape(b_dims, b_t)} changes the last two dimensions from "
            f"{tail(a)} to {tail(b)}")


def _dtype_subject(found: dict) -> str:
    dtype = _MLIR_DTYPES.get(found.get("mlir_dtype", ""), found.get("mlir_dtype"))
    if found.get("side"):
        return f"a {dtype or 'narrow'} matmul {found['side'].upper()} operand"
    if found.get("mlir_op"):
        return f"{found['mlir_op']} on {dtype} values"
    if found.get("supported"):
        return f"vector arithmetic on {dtype} values (only {found['supported']} are)"
    if found.get("from_dtype"):
        return f"a cast from {found['from_dtype']} to {found['to_dtype']}"
    return "a 64-bit type" if "64-bit" in found.get("_message", "") else "this type"


def _details(kind: ErrorKind, found: dict, message: str, op: str | None, chip: Chip | None) -> dict:
    details = dict(found)
    if chip is not None:
        details["chip"] = chip.name
    if kind.name == "unimplemented-primitive":
        from ..jax_internals.mosaic import lowerable_primitives  # (numpy)

        primitive = found.get("primitive", "")
        lowerable = lowerable_primitives(found.get("core", "tc")) or []
        details.update(alternative=ALTERNATIVES.get(primitive, NO_ALTERNATIVE), lowerable=lowerable,
                       lowerable_count=len(lowerable) or "only some", jax_version=jax_version())
    elif kind.name == "shape-cast":
        details["change"] = _shape_change(op)
    elif kind.name == "dtype":
        details["subject"] = _dtype_subject({**found, "_message": message})
        if found.get("mlir_dtype"):
            details["dtype"] = _MLIR_DTYPES.get(found["mlir_dtype"], found["mlir_dtype"])
    elif kind.name == "vmem-oom" and chip is not None:
        details.update(scoped=fmt_bytes(chip.scoped_vmem_bytes) if chip.scoped_vmem_bytes else "the scoped limit",
                       physical=fmt_bytes(chip.vmem_bytes) if chip.vmem_bytes else "the physical VMEM")
    elif kind.name == "block-index" and "blocks" in found:
        details["last"] = str(int(found["blocks"]) - 1)
    return {k: v for k, v in details.items() if not k.startswith("_")}


def explain_failure(message: str, *, chip: Chip | None = None, kernels: Sequence[MosaicKernel] = (),
                    calls: Sequence[PallasCall] = (), frames: Sequence[tuple[str, int, str]] = (), lowering: bool = False,
                    named_kernel: str | None = None, details: dict | None = None) -> MosaicFailure:
    """Explain one failure. ``message``: the compiler's or the lowering's text (with its MLIR
    location when it has one); ``frames``: the user frames of the equation jax was lowering
    (innermost first); ``kernels``: the kernels that lowered before it; ``calls``: every
    pallas_call of the program (to name a kernel that never lowered, and its BlockSpecs);
    ``named_kernel``: the HLO instruction the compiler named (VMEM); ``details``: what the caller
    knows beyond the text (the block guard's indices)."""
    kind, found = classify(message)
    located = error_location(message)
    given = [Frame(short_path(f), int(line), 0, fn) for f, line, fn in frames]
    chain = located or given
    kernel, pallas_call = _find_kernel(chain, list(kernels), list(calls), lowering, named_kernel)
    op_match = _OP_INVOLVED.search(message)
    op = op_match[1].strip() if op_match else None
    provided = {**_details(kind, found, message, op, chip), **(details or {})}
    window = _WINDOW.search(message)
    if window:
        provided.update(operand_role=window[1], operand_index=int(window[2]))
        call = next((c for c in calls if c.name == kernel), None)
        same_role = [o for o in call.operands if o.role == window[1]] if call else []
        if int(window[2]) < len(same_role):
            provided["operand"] = same_role[int(window[2])].operand
    values = {**kind.defaults, **provided}
    source: str | None
    if chain:
        source, source_of = chain[0].where, "op" if located else "eqn"
    elif values.get("index_map_source"):
        source, source_of = values["index_map_source"], "index_map"
    else:
        source, source_of = pallas_call, "pallas_call" if pallas_call else "none"
    return MosaicFailure(
        kind=kind.name, code=kind.code, title=kind.title, kernel=kernel, source=source, source_of=source_of, op=op,
        compiler=_compiler_words(message), error_code=found.get("error_code"),
        rule=fill(kind.rule, values) if kind.rule else None, fix=fill(kind.fix, values) if kind.fix else None,
        details=provided,
        frames=[_frame_text(f) for f in chain], pallas_call=pallas_call, seen=kind.seen,
    )


def vmem_estimate(call: PallasCall | None, chip: Chip) -> dict:
    """The inspector's own VMEM budget of the kernel, to put beside the compiler's figure."""
    if call is None:
        return {}
    from ..pallas.budgets import budget
    from ..pallas.vmem import estimate_range  # (numpy: only for a VMEM failure)

    try:
        b = budget(call, chip)
    except Exception:  # the estimate is an aside here: the compiler's figure stands alone
        return {}
    if b is None:
        return {}
    return {"estimate_bytes": b.total_bytes, "estimate_certain_bytes": estimate_range(b)[0],
            "estimate_limit_bytes": b.limit_bytes, "estimate_limit_source": b.limit_source}


def _is_mosaic(error, failure: FailedKernel) -> bool:
    if error.vmem is not None:
        return True
    if failure.lowering:
        return failure.in_pallas_lowering
    return "Mosaic" in error.message or bool(re.search(r"\bE2\d{3}\b", error.message))


def explain_compile_error(error, *, chip: Chip, kernels: list[MosaicKernel], closed_jaxpr,
                          failure: FailedKernel) -> MosaicFailure | None:
    """The MosaicFailure of a TPU compile (or lowering) failure of a program with Pallas kernels;
    None when the failure is not a kernel's (an HBM refusal, a lowering error outside Pallas).
    ``error``: the parsed CompileError; ``failure``: what the capture kept of the failure."""
    if error.hbm is not None or error.interpreter_limit or not _is_mosaic(error, failure):
        return None
    from ..pallas.discovery import find_pallas_calls  # (numpy, jax: only for a failure)

    try:
        calls = [found.info for found in find_pallas_calls(closed_jaxpr)]
    except Exception:  # the kernels cannot be read: the explanation names less, it still stands
        calls = []
    named = error.vmem.kernel if error.vmem else None
    explained = explain_failure(error.message, chip=chip, kernels=kernels, calls=calls, frames=list(failure.frames),
                                lowering=failure.lowering, named_kernel=named)
    if error.vmem is not None:
        call = next((c for c in calls if c.name == explained.kernel), calls[0] if len(calls) == 1 else None)
        explained.details.update(vmem_estimate(call, chip))
    return explained


def explain_capture(captured: Capture, chip: Chip) -> Capture:
    """``captured`` with its failed Pallas TPU kernel explained (``compile_error.mosaic``): the
    capture keeps what a failure leaves (``Program.failure``), this analysis, above the compile
    path, reads it. Every caller that shows a capture's compile error calls it (the Report, check,
    tune, Mosaic's passes); ``chip`` is the chip it was compiled for. Explaining twice changes
    nothing."""
    error, failure = captured.stages.compile_error, captured.program.failure
    if error is None or failure is None or error.mosaic is not None:
        return captured
    if failure.bad_block is not None:
        error.mosaic = explain_bad_block(failure.bad_block, chip=chip, kernels=captured.stages.mosaic)
    else:
        error.mosaic = explain_compile_error(error, chip=chip, kernels=captured.stages.mosaic,
                                             closed_jaxpr=captured.program.closed_jaxpr, failure=failure)
    return captured


def explain_bad_block(bad, *, chip: Chip, kernels: list[MosaicKernel]) -> MosaicFailure:
    """The failure a compile would abort with (block_guard), explained like any other."""
    return explain_failure(bad.message, chip=chip, kernels=kernels, named_kernel=bad.kernel, details={
        "index_map_source": bad.index_map_source, "operand": bad.operand, "role": bad.role, "index": bad.index,
        "index_map": bad.index_map})
