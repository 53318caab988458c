"""A failed Pallas TPU lowering or Mosaic compile, explained: which kernel, the user's source line
of the failing operation, the rule it broke and the usual fix (inspector.mosaic.error_kinds).

The source line comes from what the failure carries: the MLIR location of the failing op in a
Mosaic compile error (``at location: loc(...)``), or the jaxpr equation jax was lowering (the
user frames it chains onto a lowering error). Where neither names a line (an error about a
BlockSpec, VMEM out of memory) the pallas_call's own line stands in, and ``source_of`` says so.
"""
from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Sequence

from ..base.chips import Chip
from ..base.findings import CODES, Finding
from ..jax_internals import jax_version
from ..base.units import fmt_bytes
from .error_kinds import ALTERNATIVES, NO_ALTERNATIVE, UNKNOWN, ErrorKind, classify, fill
from ..base.user_code import short_path
from .locations import Frame, error_location, strip_error_location

if TYPE_CHECKING:  # (numpy)
    from ..pallas.model import MosaicKernel, PallasCall

_OP_INVOLVED = re.compile(r"The MLIR operation involved:\s*\n\s*(.+)")
_NOISE = re.compile(r"^\s*(Please report a bug at|Please file an issue at)[^\n]*\n?", re.M)
_WINDOW = re.compile(r"window params for (input|output) (\d+)")
_VECTOR = re.compile(r"vector<((?:\d+x)*)(\w+)>")
_MLIR_DTYPES = {"f8E5M2": "float8_e5m2", "f8E4M3FN": "float8_e4m3fn", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
                "i4": "int4", "i8": "int8", "i16": "int16", "i32": "int32", "i1": "bool", "bf16": "bfloat16",
                "f16": "float16", "f32": "float32", "f64": "float64", "i64": "int64"}


@dataclasses.dataclass(kw_only=True)
class MosaicFailure:
    """One failed kernel: where, which rule, what to do. Plain data (it travels in Stages)."""

    kind: str  # an ErrorKind name ("unknown" when no row of the table recognised the message)
    code: str  # the finding code
    title: str
    kernel: str | None  # the pallas_call's name
    source: str | None  # file:line of the failing operation (or of the pallas_call: see source_of)
    source_of: str  # "op" (the compiler's location), "eqn" (the equation jax was lowering), "pallas_call", "none"
    op: str | None  # the MLIR operation the compiler names
    compiler: str  # the compiler's own words, without the location line
    error_code: str | None  # E2003 and the like
    rule: str | None
    fix: str | None
    details: dict = dataclasses.field(default_factory=dict)  # what the message and the kernel say (dim, primitive, ...)
    frames: list[str] = dataclasses.field(default_factory=list)  # file:line function, innermost first
    pallas_call: str | None = None  # file:line of the pallas_call
    seen: str = ""  # the versions and chips the kind was seen with

    @property
    def headline(self) -> str:
        where = " ".join(p for p in (f"in {self.kernel}" if self.kernel else "", f"at {self.source}" if self.source else "") if p)
        if self.kind == UNKNOWN.name:
            return f"Mosaic error {where}: {_first_line(self.compiler)}".replace("  ", " ")
        code = f" ({self.error_code})" if self.error_code else ""
        return f"{self.title}{code} {where}".rstrip()

    def finding(self, chip: str, view: str = "mosaic", data: dict | None = None, message: str | None = None) -> Finding:
        """The finding: the headline, the rule and the fix; ``data`` names the source line
        (``source``), the kernel, the rule and fix, the compiler's words, and what the message
        captured. ``data`` and ``message`` given: the VMEM finding's own, extended."""
        body = message or f"{chip}: {self.headline}"
        if self.kind == UNKNOWN.name:
            text = body + ("" if self.source else " (no source line in the message)")
        else:
            text = f"{body}. Rule: {self.rule} Fix: {self.fix}"
        declared = CODES[self.code].fields if self.code in CODES else ()
        fields: dict[str, Any] = {"chip": chip, "kind": self.kind, "kernel": self.kernel, "source": self.source,
                  "source_of": self.source_of, "op": self.op, "rule": self.rule, "fix": self.fix,
                  "compiler": self.compiler, "error_code": self.error_code, "pallas_call": self.pallas_call,
                  "frames": list(self.frames), "seen": self.seen}
        fields.update({k: v for k, v in self.details.items() if k in declared and k not in fields})
        fields["details"] = {k: v for k, v in self.details.items() if k not in fields}
        return Finding("error", self.code, text, kernel=self.kernel, view=view, data={**fields, **(data or {})})


def _first_line(text: str) -> str:
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    return line if len(line) <= 300 else line[:297] + "..."


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
    from ..pallas.vmem import budget  # (numpy: only for a VMEM failure)

    try:
        b = budget(call, chip)
    except Exception:  # the estimate is an aside here: the compiler's figure stands alone
        return {}
    if b is None:
        return {}
    return {"estimate_bytes": b.total_bytes, "estimate_limit_bytes": b.limit_bytes, "estimate_limit_source": b.limit_source}


def vmem_note(data: dict) -> str:
    if "estimate_bytes" not in data:
        return ""
    return (f"; the inspector's estimate: {fmt_bytes(data['estimate_bytes'])} of {fmt_bytes(data['estimate_limit_bytes'])} "
            f"({data['estimate_limit_source']})")



def _is_mosaic(error, lowering_err: BaseException | None) -> bool:
    if error.vmem is not None:
        return True
    if lowering_err is not None:
        from ..jax_internals.mosaic import raised_in_pallas_tpu_lowering

        return raised_in_pallas_tpu_lowering(lowering_err)
    return "Mosaic" in error.message or bool(re.search(r"\bE2\d{3}\b", error.message))


def explain_compile_error(error, *, chip: Chip, kernels: list[MosaicKernel], closed_jaxpr,
                          lowering_err: BaseException | None = None) -> MosaicFailure | None:
    """The MosaicFailure of a TPU compile (or lowering) failure of a program with Pallas kernels;
    None when the failure is not a kernel's (an HBM refusal, a lowering error outside Pallas).
    ``error``: the parsed CompileError; ``lowering_err``: the exception, when lowering failed."""
    if not chip.is_tpu or error.hbm is not None or error.interpreter_limit or not _is_mosaic(error, lowering_err):
        return None
    from ..pallas.discovery import find_pallas_calls  # (numpy, jax: only for a failure)

    try:
        calls = [found.info for found in find_pallas_calls(closed_jaxpr)]
    except Exception:  # the kernels cannot be read: the explanation names less, it still stands
        calls = []
    frames = []
    if lowering_err is not None:
        from ..jax_internals.mosaic import lowering_frames  # (numpy)

        frames = lowering_frames(lowering_err)
    named = error.vmem.kernel if error.vmem else None
    failure = explain_failure(error.message, chip=chip, kernels=kernels, calls=calls, frames=frames,
                              lowering=lowering_err is not None, named_kernel=named)
    if error.vmem is not None:
        call = next((c for c in calls if c.name == failure.kernel), calls[0] if len(calls) == 1 else None)
        failure.details.update(vmem_estimate(call, chip))
    return failure


def explain_bad_block(bad, *, chip: Chip, kernels: list[MosaicKernel]) -> MosaicFailure:
    """The failure a compile would abort with (block_guard), explained like any other."""
    return explain_failure(bad.message, chip=chip, kernels=kernels, named_kernel=bad.kernel, details={
        "index_map_source": bad.index_map_source, "operand": bad.operand, "role": bad.role, "index": bad.index,
        "index_map": bad.index_map})
