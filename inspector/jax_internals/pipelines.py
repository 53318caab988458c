"""What each ``pltpu.emit_pipeline`` was asked to do: its grid, BlockSpecs and the refs it pipelines.

Tracing inlines a pipeline into its kernel (a ``run_scoped`` of its buffers around a loop), which
keeps the buffer shapes but loses the grid and the index maps. While a program is traced under
``recording_pipelines()``, each pipeline that runs is noted, with the source line that ran it;
afterwards ``pipeline_for(run_scoped eqn)`` finds the note of the pipeline that equation came
from (same source line, same block shapes). A pipeline traced before recording began (a jit
cache hit), or in a jax laid out differently, has no note: the caller says it is not walked.

Reads jax/_src/pallas/mosaic/pipeline.py (0.10.x): ``_emit_pipeline`` is what ``emit_pipeline``
(without the emit_pipeline primitive, jax's default) and ``emit_pipeline_with_allocations`` call.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from typing import Any

from .tracing import eqn_frame, user_frame

_LOCK = threading.RLock()
_RECORDED: dict[tuple[str, int], list["PipelineRecord"]] = {}  # per source line, the latest first
_KEEP_PER_LINE = 64  # distinct pipelines per source line (a sweep of block sizes traces many)


@dataclasses.dataclass
class PipelineRecord:
    """One emit_pipeline as written: grid (ints, or None for a size computed at run time), the flat
    BlockSpecs (inputs first) and the (shape, dtype, memory space) of the refs they window."""

    grid: list[int | None]
    in_specs: list[Any]  # pl.BlockSpec
    out_specs: list[Any]
    refs: list[tuple[list[int], str, str]]
    dimension_semantics: list[str]
    core_axis: str | None
    source: tuple[str, int] | None

    @property
    def specs(self) -> list[Any]:
        return self.in_specs + self.out_specs

    def key(self) -> tuple:
        """What tells two pipelines of one line apart: grid, blocks, refs, semantics."""
        return (tuple(self.grid), tuple(sorted(self.block_shapes())), tuple(map(str, self.refs)),
                tuple(self.dimension_semantics), self.core_axis)

    def block_shapes(self) -> set[tuple[int, ...]]:
        """The VMEM windows it allocates: the block without its squeezed dims."""
        shapes = set()
        for spec in self.specs:
            dims = getattr(spec, "block_shape", None)
            if dims is not None:
                shapes.add(tuple(int(getattr(d, "block_size", d)) for d in dims
                                 if d is not None and type(d).__name__ != "Squeezed"))
        return shapes


def _semantics(values) -> list[str]:
    return [str(s).split(".")[-1].lower() for s in values or ()]


def _ref_info(ref) -> tuple[list[int], str, str]:
    return [int(d) for d in ref.shape], str(ref.dtype), str(getattr(getattr(ref, "aval", ref), "memory_space", "")).lower()


def _record(grid, in_specs, out_specs, params: dict, refs) -> None:
    import jax
    from jax._src import source_info_util
    from jax._src.pallas.mosaic import pipeline

    flat_in = [s for s in jax.tree.leaves(pipeline._normalize_specs(in_specs), is_leaf=lambda x: x is None) if s is not None]
    flat_out = [s for s in jax.tree.leaves(pipeline._normalize_specs(out_specs), is_leaf=lambda x: x is None) if s is not None]
    flat_refs = jax.tree.leaves(refs, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    source = user_frame(source_info_util.current().traceback)
    record = PipelineRecord(
        grid=[int(g) if isinstance(g, int) else None for g in grid], in_specs=flat_in, out_specs=flat_out,
        refs=[_ref_info(r) for r in flat_refs], dimension_semantics=_semantics(params.get("dimension_semantics")),
        core_axis=params.get("core_axis_name"), source=source)
    if source is None:
        return
    with _LOCK:
        kept = [r for r in _RECORDED.get(source, []) if r.key() != record.key()]  # the same pipeline: its latest note
        _RECORDED[source] = [record, *kept][:_KEEP_PER_LINE]


_ACTIVE = [0, None]  # how many recordings are active (threads may trace at once), and jax's own function


@contextlib.contextmanager
def recording_pipelines():
    """Note every emit_pipeline traced while active. The patch is shared by overlapping recordings
    (the TUI traces off its main thread) and undone, on every path, when the last one ends."""
    try:
        from jax._src.pallas.mosaic import pipeline
        pipeline._emit_pipeline  # noqa: B018 (present in this jax?)
    except (ImportError, AttributeError):  # a jax without it: pipelines go unwalked, said where they show
        yield
        return
    with _LOCK:
        if _ACTIVE[0] == 0:
            _ACTIVE[1] = original = pipeline._emit_pipeline

            def emit(body, *, grid, in_specs=(), out_specs=(), **params):
                run = original(body, grid=grid, in_specs=in_specs, out_specs=out_specs, **params)

                def recorded(*refs, **kwargs):
                    try:
                        _record(grid, in_specs, out_specs, params, refs)
                    except Exception:  # noting is best effort: the pipeline itself must trace as before
                        pass
                    return run(*refs, **kwargs)
                return recorded

            pipeline._emit_pipeline = emit
        _ACTIVE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[0] -= 1
            if _ACTIVE[0] == 0:
                pipeline._emit_pipeline = _ACTIVE[1]


def is_pipeline_scope(eqn) -> bool:
    """A run_scoped equation that emit_pipeline made for its buffers: the innermost frame of jax's
    pipeline.py on its traceback is the pipeline function itself (a sync_copy inside the pipeline
    makes run_scoped equations of its own, deeper down)."""
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    if tb is None:
        return False
    try:
        inner = next((f for f in tb.frames if f.file_name.endswith("pallas/mosaic/pipeline.py")), None)
    except Exception:
        return False
    return inner is not None and inner.function_name.rsplit(".", 1)[-1] == "pipeline"


_PIPELINE_STEPS = ("scan", "while", "cond", "dma_start", "dma_wait")


def is_pipeline_copy(eqn) -> bool:
    """A DMA that emit_pipeline's own code starts (a block copy in or out), not one the body it
    runs starts by hand (pltpu.make_async_copy in the pipeline's body): jax's pipeline.py is
    nearer the copy than any frame of the user's code."""
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    try:
        from jax._src import source_info_util

        for f in tb.frames if tb is not None else ():
            if f.file_name.endswith("pallas/mosaic/pipeline.py"):
                return True
            if source_info_util.is_user_filename(f.file_name):
                return False
    except Exception:
        return True  # unreadable: as before, a copy inside a pipeline's scope is the pipeline's
    return True


def _in_pipeline_function(eqn) -> bool:
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    try:
        return tb is not None and any(f.file_name.endswith("pallas/mosaic/pipeline.py")
                                      and f.function_name.rsplit(".", 1)[-1] == "pipeline" for f in tb.frames)
    except Exception:
        return False


def runs_pipeline_on_given_buffers(eqn) -> bool:
    """A run_scoped of the kernel's own (``pl.run_scoped`` / ``pl.with_scoped``) in which an
    emit_pipeline runs on buffers it was handed (``pipeline(..., allocations=...)``): the pipeline
    makes no scope of its own, so its loop and copies sit directly in this one."""
    if eqn.primitive.name != "run_scoped" or is_pipeline_scope(eqn):
        return False
    inner = getattr(eqn.params.get("jaxpr"), "eqns", ())
    return any(e.primitive.name in _PIPELINE_STEPS and _in_pipeline_function(e) for e in inner)


def pipeline_for(eqn) -> PipelineRecord | None:
    """The note of the emit_pipeline a run_scoped equation came from, or None."""
    frame = eqn_frame(eqn)
    with _LOCK:
        candidates = list(_RECORDED.get(frame, [])) if frame else []
    if len(candidates) > 1:
        windows = {tuple(int(d) for d in v.aval.shape[1:]) for v in eqn.params["jaxpr"].invars
                   if hasattr(v.aval, "shape") and len(v.aval.shape) > 1}
        windows |= {tuple(int(d) for d in v.aval.shape) for v in eqn.params["jaxpr"].invars if hasattr(v.aval, "shape")}
        candidates = [c for c in candidates if c.block_shapes() <= windows] or candidates
    # the pipeline's loop runs its grid's steps: a note of the same line and blocks but another grid
    # (the kernel traced at other sizes, by another call whose trace jax's cache then reused) is not it
    lengths = {int(e.params["length"]) for e in eqn.params["jaxpr"].eqns
               if e.primitive.name == "scan" and _in_pipeline_function(e)}
    if lengths:
        candidates = [c for c in candidates if None in c.grid or math.prod(g or 0 for g in c.grid) in lengths]
    return candidates[0] if candidates else None
