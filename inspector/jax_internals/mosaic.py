"""Capture each pallas_call's Mosaic MLIR while it is lowered for a TPU; read what jax's Pallas
TPU lowering says about itself (the primitives it lowers) and what its errors carry (the user's
source line of the failing operation).

The module is also serialized (as bytecode) into the custom call, but reading it back needs the
Mosaic serde pass; catching it where Pallas hands it to the custom-call builder is simpler, and
is the same module ``pallas_call(debug=True)`` prints.
"""
from __future__ import annotations

import contextlib
import os
import traceback as traceback_module
from typing import Iterator, cast

from ..base.pallas_model import MosaicKernel
from .tracing import PACKAGE_DIR, user_frame


def _texts(mosaic_module) -> tuple[str, list[str]]:
    """The module's text with each op's ``// file:line`` (as the StableHLO tab has them, so a view
    can link an op to the jaxpr and the bundles), and the user's source lines its operations come
    from (in order of first appearance): read from the module printed with its locations."""
    from ..hlo.mlir_sources import with_sources
    from ..hlo.mlir_locations import source_lines

    try:
        text = mosaic_module.operation.get_asm(enable_debug_info=True)
    except Exception:  # an MLIR binding without that printer: the kernel still shows, without lines
        return str(mosaic_module), []
    return with_sources(text).rstrip("\n"), source_lines(text)


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
        mlir, lines = _texts(mosaic_module)
        found.append(MosaicKernel(name=name or "pallas_call", source=source, mlir=mlir, lines=lines))
        return original(ctx, *args, mosaic_module=mosaic_module, name=name, **kwargs)

    reg._lower_to_custom_call = recording
    try:
        yield found
    finally:
        reg._lower_to_custom_call = original


def lowerable_primitives(core: str = "tc") -> list[str] | None:
    """The jax primitives jax's Pallas TPU lowering has a rule for on ``core`` ("tc": the
    TensorCore; "sc_vector_subcore", "sc_scalar_subcore"), sorted; None where this jax keeps
    its rules elsewhere."""
    try:
        from jax._src.pallas.mosaic import lowering
        rules = lowering.lowering_rules
        for kernel_type, table in rules.items():
            if str(getattr(kernel_type, "value", kernel_type)).lower() == core.lower():
                return sorted(p.name for p in table)
    except Exception:
        return None
    return None


def compile_error_text(err: BaseException) -> str:
    """The compiler's message with its MLIR location. jax re-raises a Mosaic compile failure as
    ``MosaicError`` with the ``at location: loc(...)`` line removed (and the location turned into
    a traceback); the runtime error it came from, its cause, still holds the line."""
    text = str(err)
    cause = err.__cause__
    if type(err).__name__ == "MosaicError" and cause is not None and "loc(" in str(cause):
        return str(cause)
    return text


def _jax_frame(filename: str) -> bool:
    name = filename.replace(os.sep, "/")
    return ("/site-packages/jax/" in name or "/site-packages/jaxlib/" in name or name.startswith(PACKAGE_DIR)
            or "/jax/_src/" in name)


def _chain(err: BaseException) -> list[BaseException]:
    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _lowering_eqns(err: BaseException) -> list:
    """The jaxpr equations Pallas's TPU lowering was in when it raised, outermost first: the
    ``eqn`` of each ``jaxpr_subcomp`` frame of the traceback (the frames outlive the raise). The
    innermost is the failing one; an outer one is the call (a jnp function's jit) that holds it."""
    for candidate in _chain(err):
        found, tb = [], candidate.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_name == "jaxpr_subcomp" and "pallas" in code.co_filename and "eqn" in tb.tb_frame.f_locals:
                found.append(tb.tb_frame.f_locals["eqn"])
            tb = tb.tb_next
        if found:
            return found
    return []


def lowering_frames(err: BaseException) -> list[tuple[str, int, str]]:
    """(file, line, function) of the user's frames, innermost first, of the equation jax was
    lowering when ``err`` was raised: its source_info (read from the lowering's own frame), else
    the traceback of the ``JaxStackTraceBeforeTransformation`` jax chains onto the error."""
    for eqn in reversed(_lowering_eqns(err)):  # inside a jnp function's jit, the user's line is the call's
        frames = _user_frames(getattr(getattr(eqn, "source_info", None), "traceback", None))
        if frames:
            return frames
    for candidate in _chain(err):
        if type(candidate).__name__ == "JaxStackTraceBeforeTransformation" and candidate.__traceback__ is not None:
            # a frame read off a traceback has its line (FrameSummary allows None only when built by hand)
            frames = [(f.filename, cast(int, f.lineno), f.name)
                      for f in traceback_module.extract_tb(candidate.__traceback__) if not _jax_frame(f.filename)]
            if frames:
                return frames[::-1]
    return []


def _user_frames(traceback) -> list[tuple[str, int, str]]:
    """The user's frames of a jax Traceback, innermost first."""
    if traceback is None:
        return []
    try:
        frames = traceback.frames
    except Exception:
        return []
    return [(f.file_name, f.start_line if hasattr(f, "start_line") else f.line_num, f.function_name)
            for f in frames if not _jax_frame(f.file_name)]


def raised_in_pallas_tpu_lowering(err: BaseException) -> bool:
    """The exception came out of jax's Pallas TPU (Mosaic) lowering: a kernel failed to lower, not
    the program around it."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for f in traceback_module.extract_tb(current.__traceback__) if current.__traceback__ else []:
            name = f.filename.replace(os.sep, "/")
            if "/jax/_src/pallas/mosaic/" in name:
                return True
        if "Pallas TPU" in str(current) or "Mosaic" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False
