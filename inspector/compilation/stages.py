"""Trace, lower and compile a Target once; keep every stage's text and XLA's own analyses.

``capture`` returns a Capture: the Stages (plain data: texts, counts, XLA's analyses, a compile
error; cached on disk, sent between processes) and the Program (the traced jaxpr and the
example values, jax objects that stay in this process for the analyses that read them). Neither
is mutated after capture. A compile failure is kept as data (``Stages.compile_error``). The
compile result is cached on disk keyed by the lowered module itself (see compile_cache), and in
this process by (target, inputs, params, backend).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time

import inspector.compilation.compile_cache as compile_cache
from .backends import Backend
from ..base.chips import SIMULATED_CHIP, SPARSE_CORE_CHIP, get_chip
from .compile_errors import parse_compile_error
from ..base.errors import TargetFailure
from ..hlo.mlir_sources import with_sources
from ..jax_internals import tracing
from ..jax_internals.chip_lookup import simulated_chip
from ..jax_internals.interpret import gpu_kernels_interpreted
from ..jax_internals.mesh_kernels import KERNEL_PRIMITIVES
from ..jax_internals.pipelines import recording_pipelines
from .kernel_failures import has_pallas, lowering_failure
from ..base.pallas_model import MosaicKernel
from ..base.progress import slow_step
from .sharding import resolve_specs
from .stage_records import Capture, JaxprEqn, Program, Stages
from .target import Target
from ..base.user_code import describe_error, short_path
from .xla_compile import compile_lowered, machine_code_options


def _eqn_record(eqn) -> JaxprEqn:
    frame = tracing.eqn_frame(eqn)
    return JaxprEqn(primitive=eqn.primitive.name, source=f"{short_path(frame[0])}:{frame[1]}" if frame else None,
                    outputs=tracing.eqn_outputs(eqn))


def example_values(target: Target) -> tuple:
    """The flat inputs in the order the traced program takes them; abstract ones (shape specs) as None."""
    import jax

    leaves = jax.tree.leaves((tuple(target.args), dict(target.kwargs)))
    return tuple(None if isinstance(x, jax.ShapeDtypeStruct) or not hasattr(x, "shape") else x for x in leaves)


def _trace(target: Target, backend: Backend):
    import jax

    fn = functools.partial(target.fn, **target.params)
    fn.__name__ = target.name  # type: ignore[attr-defined]  # a partial takes attributes; jit names the module after it
    specs = None
    if target.shardings is not None:
        specs = tuple(resolve_specs(target.shardings, backend.mesh, target.args, target.arg_names, target.spec))
    args, kwargs = backend.place(target.args, specs), backend.place(target.kwargs)
    try:
        return jax.jit(fn).trace(*args, **kwargs)
    except Exception as err:
        raise TargetFailure(describe_error(err, target.file, f"raised while tracing {target.name}")) from err


def _relative(text: str) -> str:
    """Source paths in the printed jaxpr relative to the working directory, as everywhere else."""
    return text.replace(os.getcwd() + os.sep, "")


def _attach_sources(kernels: list[MosaicKernel], eqns: list[JaxprEqn]) -> None:
    """Lowering keeps no traceback for pallas_call; the kernels lower in the order of their eqns."""
    calls = [e for e in eqns if e.primitive in KERNEL_PRIMITIVES]
    if len(calls) == len(kernels):
        for kernel, eqn in zip(kernels, calls):
            kernel.source = kernel.source or eqn.source




@contextlib.contextmanager
def _interpret_context(backend: Backend, chip: str = SIMULATED_CHIP):
    """On the CPU, Pallas TPU kernels can only run interpreted; pallas_call decides that when it
    is traced, so the whole trace and lowering run under TPU interpret mode, with chip lookups
    (emit_pipeline's) answered for a TPU rather than refused for the CPU."""
    if not backend.path.interprets_pallas:
        yield
        return
    from jax.experimental.pallas import tpu as pltpu

    gpu_kernels_interpreted()
    with pltpu.force_tpu_interpret_mode(), simulated_chip(get_chip(chip).jax_chip_version):
        yield


_MEMO: dict = {}


def forget_captures() -> None:
    """Drop every capture this process keeps (``--watch``: the file changed under them)."""
    _MEMO.clear()


@contextlib.contextmanager
def captures_forgotten_after():
    """What the captures inside the block add to this process's memo is dropped when it ends,
    what was there before stays (a tune sweep lowers hundreds of candidates, one after another)."""
    before = set(_MEMO)
    try:
        yield
    finally:
        for key in set(_MEMO) - before:
            _MEMO.pop(key, None)


class _Same:
    """A memo-key part equal only to the very same object (two functions named alike are two
    keys). It holds the object, so its id cannot be reused by another while the entry lives."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def _memo_key(target: Target, backend: Backend, compile: bool, jaxpr_text: bool):
    def shapes(tree):
        import jax
        return tuple((str(getattr(x, "shape", x)), str(getattr(x, "dtype", ""))) for x in jax.tree.leaves(tree))

    shardings = target.shardings if isinstance(target.shardings, (str, type(None))) else _Same(target.shardings)
    return (target.spec, _Same(target.fn), target.source_hash, shapes(target.args), shapes(target.kwargs),
            tuple(sorted((k, repr(v)) for k, v in target.params.items())), backend.chip.name, compile, jaxpr_text,
            repr(target.mesh), shardings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Lowering:
    """A trace and lowering, kept in this process for the compile that may follow: the capture
    up to StableHLO (no compile), and jax's Lowered (None when lowering failed)."""

    captured: Capture
    lowered: object | None
    module_text: str = ""  # the lowered module with its locations: the compile cache's key


def _lower(target: Target, backend: Backend, *, jaxpr_text: bool, memo: bool) -> _Lowering:
    """Trace and lower ``target`` (``backend`` already carries the target's mesh); with ``memo``,
    reuse (and keep) this process's lowering of the same function, inputs, params and backend:
    the terminal UI asks for the lowering first (its jaxpr and StableHLO show at once), then for
    the compile, which starts from this very lowering instead of tracing again."""
    key = ("lowering",) + _memo_key(target, backend, False, jaxpr_text)
    if memo and key in _MEMO:
        return _MEMO[key]
    try:
        lowering = _trace_and_lower(target, backend, jaxpr_text, SIMULATED_CHIP)
    except TargetFailure as err:  # a SparseCore program asks its chip for SparseCores: simulate one that has them
        if not backend.path.interprets_pallas or "SparseCore" not in str(err):
            raise
        lowering = _trace_and_lower(target, backend, jaxpr_text, SPARSE_CORE_CHIP)
    if memo:
        _MEMO[key] = lowering
    return lowering


def _traced(target: Target, backend: Backend):
    """jax's Traced of ``target``, its jaxpr's equations as records, and whether its kernels are
    ours to interpret (Pallas on the CPU); run inside ``_interpret_context``."""
    with slow_step(f"tracing {target.name} (jax runs the Python function once)"), backend.trace_context(), \
            recording_pipelines():
        traced = _trace(target, backend)
    eqns = [_eqn_record(e) for e in tracing.walk_eqns(traced.jaxpr.jaxpr)]
    return traced, eqns, backend.path.interprets_pallas and has_pallas(eqns)


def _trace_and_lower(target: Target, backend: Backend, jaxpr_text: bool, simulated: str) -> _Lowering:
    timings = {}
    t0 = time.perf_counter()
    with backend.context(), _interpret_context(backend, simulated):
        traced, eqns, interpret = _traced(target, backend)
        closed = traced.jaxpr
        timings["trace_s"] = time.perf_counter() - t0
        mosaic_capture = backend.path.lowering_capture()
        t1 = time.perf_counter()
        with mosaic_capture as mosaic:
            # A lowering error (a Pallas block shape Mosaic refuses, say) is a compile failure:
            # a finding, with the jaxpr still there for the other analyses.
            try:
                lowered, lowering_error = traced.lower(), None
            except Exception as err:
                lowered, lowering_error = None, err
        timings["lower_s"] = time.perf_counter() - t1
        module_text = lowered.as_text(debug_info=True) if lowered is not None else ""
        _attach_sources(mosaic, eqns)
        stages = Stages(
            backend=backend.chip.name, platform=backend.platform, device_kind=backend.device_kind,
            jaxpr=_relative(tracing.print_jaxpr(closed)) if jaxpr_text else None,
            jaxpr_eqns=eqns,
            stablehlo=with_sources(module_text),
            mosaic=list(mosaic), pallas_interpreted=interpret, timings=timings,
            simulated_chip=simulated if interpret else None,
            mesh=backend.mesh_axes, devices=backend.devices if backend.mesh_axes else 1,
            compile_error=lowering_failure(lowering_error, interpreted=interpret) if lowering_error is not None else None,
        )
    failure = backend.path.failed_kernel(stages, lowering_error) if lowering_error is not None else None
    program = Program(closed_jaxpr=closed, example_values=example_values(target), interpreted=interpret, failure=failure)
    return _Lowering(captured=Capture(stages, program), lowered=lowered, module_text=module_text)


def traced_program(target: Target, backend: Backend, *, memo: bool = True) -> Program:
    """The traced program alone, for the analyses that read only the jaxpr (the VMEM estimate of
    a sweep's candidates): no lowering, which for Pallas on the CPU (interpret mode) costs more
    than the trace, and no printed jaxpr. A lowering this process keeps serves; ``memo`` keeps
    (and reuses) the trace otherwise. No lowering means no lowering error: a kernel Mosaic
    would refuse still traces."""
    tracing.exclude_own_frames()  # as capture does: the eqns' sources are the user's frames
    backend = backend.with_mesh(target.mesh)
    for jaxpr_text in (True, False):
        if memo and (lowering := _MEMO.get(("lowering",) + _memo_key(target, backend, False, jaxpr_text))):
            return lowering.captured.program
    key = ("trace",) + _memo_key(target, backend, False, False)
    if memo and key in _MEMO:
        return _MEMO[key]

    def trace(simulated: str) -> Program:
        with backend.context(), _interpret_context(backend, simulated):
            traced, _, interpret = _traced(target, backend)
            return Program(closed_jaxpr=traced.jaxpr, example_values=example_values(target), interpreted=interpret)
    try:
        program = trace(SIMULATED_CHIP)
    except TargetFailure as err:  # as _lower: a SparseCore program is traced for a chip that has them
        if not backend.path.interprets_pallas or "SparseCore" not in str(err):
            raise
        program = trace(SPARSE_CORE_CHIP)
    if memo:
        _MEMO[key] = program
    return program


def lowered_program(target: Target, backend: Backend, *, memo: bool = True) -> tuple[Capture, object | None, str]:
    """The capture up to StableHLO, jax's Lowered (None when lowering failed) and the lowered
    module's text with locations (the compile cache's key), for a compile made elsewhere (the
    libtpu dumps, in a process of their own). ``memo=False`` for a lowering that must not be
    kept or reused (one made under a patched lowering rule)."""
    lowering = _lower(target, backend.with_mesh(target.mesh), jaxpr_text=False, memo=memo)
    return lowering.captured, lowering.lowered, lowering.module_text


def compile_is_cached(target: Target, backend: Backend, *, use_cache: bool | str = True, buffers: bool = False,
                      memo: bool = True) -> bool:
    """Whether ``capture(..., compile=True)`` would take its compile from the disk cache (so no
    compiler runs): the lowering is this process's (memoised), the cache is only read."""
    if not use_cache or use_cache == compile_cache.REFRESH:
        return False
    tracing.exclude_own_frames()  # as capture does: the module's locations are the user's frames only
    lowering = _lower(target, backend.with_mesh(target.mesh), jaxpr_text=True, memo=memo)
    if lowering.lowered is None:
        return False
    hit = compile_cache.load(compile_cache.key(lowering.module_text, backend.chip.name))
    return hit is not None and (not buffers or bool(hit.get("buffers")))


def capture(target: Target, backend: Backend, *, compile: bool = True, jaxpr_text: bool = True,
            use_cache: bool = True, memo: bool = True, buffers: bool = False, dump_to: str | None = None,
            dump_metadata: bool = True) -> Capture:
    """Every stage of ``target`` on ``backend``; compiles only when ``compile`` is set. ``memo``:
    reuse (and keep) this process's capture of the same function, inputs, params and backend; the
    Python API traces afresh each call (a function may read globals changed since), and the on-disk
    compile cache, keyed by the lowered module, still spares the compile. A compile starts from
    this process's lowering when ``memo`` kept one (``compile=False`` first, then the compile:
    traced once). ``buffers`` adds the compiler's buffer assignment (a dump in the compile: --view
    memory, check). ``dump_to``: a folder for XLA's pass-by-pass dumps (hlo/passes.py), with
    each instruction's metadata unless ``dump_metadata`` is off; such a compile is never memoised
    or cached, since its point is the files it writes (the lowering it starts from may be)."""
    tracing.exclude_own_frames()
    backend = backend.with_mesh(target.mesh)
    keep = memo and not dump_to
    key = _memo_key(target, backend, compile, jaxpr_text) + (buffers,)
    if keep and compile and key in _MEMO:
        return _MEMO[key]
    lowering = _lower(target, backend, jaxpr_text=jaxpr_text, memo=memo)
    if not compile or lowering.lowered is None:
        return lowering.captured  # stopped after lowering: by request, or by a lowering error
    lowered_stages = lowering.captured.stages
    aborting = backend.path.would_abort(lowered_stages, lowering.captured.program.closed_jaxpr)
    if aborting is not None:  # libtpu would end this process: the error it would give is the result
        error, failure = aborting
        return Capture(dataclasses.replace(lowered_stages, compile_error=error, timings=dict(lowered_stages.timings),
                                           mosaic=list(lowered_stages.mosaic)),
                       dataclasses.replace(lowering.captured.program, failure=failure))
    with backend.context(), _interpret_context(backend):
        t2 = time.perf_counter()
        result, cached = compile_lowered(lowering.lowered, backend, use_cache, buffers=buffers, dump_to=dump_to,
                                  dump_metadata=dump_metadata, module_text=lowering.module_text)
        compile_s = time.perf_counter() - t2
    timings = {**lowered_stages.timings, "compile_s": compile_s}
    if result.get("seconds") is not None:  # the compiler's own time for this module, also when it came from the cache
        timings["compiler_s"] = result["seconds"]
    stages = dataclasses.replace(lowered_stages, timings=timings,
                                 mosaic=list(lowered_stages.mosaic), hlo=result["hlo"], cost=result["cost"],
                                 memory=result["memory"], buffers=result.get("buffers"), compile_cached=cached,
                                 kernel_dumps=result.get("kernel_dumps"),
                                 compile_options={} if cached else machine_code_options(backend),
                                 compile_error=parse_compile_error(result["error"]) if result["error"] else None)
    program = lowering.captured.program
    if result["error"]:  # what explains it is kept; inspector.mosaic explains (mosaic.explain.explain_capture)
        program = dataclasses.replace(program, failure=backend.path.failed_kernel(stages))
    captured = Capture(stages, program)
    if keep:
        _MEMO[key] = captured
    return captured

