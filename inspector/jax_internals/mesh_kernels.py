"""Kernels over a core mesh, read into the same ``PallasCall`` records as a pallas_call.

``pl.kernel(body, mesh=...)`` traces to an ``mpmd_map`` equation (one body per mesh), and
``pl.core_map(mesh)`` inside ``pl.run_state`` to a ``core_map`` equation whose body closes over
the caller's refs. Neither has a grid of BlockSpecs: the body runs once per core of the mesh
(TensorCores, or a SparseCore's scalar / vector subcores) with its operands where the mesh keeps
them (HBM, memory_space ANY), and moves blocks itself: ``pltpu.emit_pipeline`` (walked here as a
call of its own when its grid and BlockSpecs were noted while tracing, ``pipelines.py``),
``sync_copy`` / ``async_copy`` (counted as DMAs), run_scoped VMEM (counted in the budget).

Reads jax/_src/pallas/mpmd.py and core.py (jax 0.10.x): mpmd_map's params ``jaxprs``, ``meshes``,
``out_avals``, ``input_output_aliases``; core_map's ``jaxpr``, ``mesh``.
"""
from __future__ import annotations

import hashlib
import itertools
import math
from types import SimpleNamespace
from typing import Callable

from ..base.pallas_model import GRID_LETTERS, BlockSpecInfo, FoundCall, PallasCall, ScratchInfo
from .evaluate import KERNEL_PRIMITIVES  # noqa: F401 (re-exported for stages and run)
from .body_dots import body_dots
from .kernel_body import Body, cost_estimate, short_src, memory_space
from .pipelines import PipelineRecord, is_pipeline_scope, pipeline_for, runs_pipeline_on_given_buffers
from .tracing import eqn_frame

MESH_KERNELS = ("mpmd_map", "core_map")
_MODELLED_SPACES = ("vmem", "smem", "semaphore", "any", "hbm")
_SERIAL = itertools.count()


def is_mesh_kernel(eqn) -> bool:
    return eqn.primitive.name in MESH_KERNELS


def _core_type(mesh) -> str:
    kind = type(mesh).__name__
    return {"TensorCoreMesh": "TensorCore", "VectorSubcoreMesh": "SparseCore vector subcore",
            "ScalarSubcoreMesh": "SparseCore scalar subcore"}.get(kind, kind)


def _space(aval, mesh) -> str:
    """The ref's memory space; a ref that names none is where the mesh keeps operands."""
    if getattr(aval, "memory_space", None) is None:
        return memory_space(SimpleNamespace(memory_space=getattr(mesh, "default_memory_space", None)))
    return memory_space(aval)


def _semantics(mesh, n: int) -> list[str]:
    found = [str(s).split(".")[-1].lower() for s in getattr(mesh, "dimension_semantics", None) or ()]
    return (found + ["parallel"] * n)[:n]


def _parts(eqn):
    """(body jaxpr, [(kernel var, role, outer aval)], scratch vars, mesh, name, style, bodies)."""
    p = eqn.params
    if eqn.primitive.name == "mpmd_map":
        jaxpr, mesh = p["jaxprs"][0], p["meshes"][0]
        n_in, n_out = len(eqn.invars), len(p["out_avals"])
        refs = [(v, "input", eqn.invars[i].aval) for i, v in enumerate(jaxpr.invars[:n_in])]
        refs += [(v, "output", p["out_avals"][i]) for i, v in enumerate(jaxpr.invars[n_in:n_in + n_out])]
        scratch = list(jaxpr.invars[n_in + n_out:])
        name = p.get("name") or getattr(jaxpr.debug_info, "func_name", None) or "kernel"
        return jaxpr, refs, scratch, mesh, str(name), "pl.kernel", len(p["jaxprs"])
    jaxpr, mesh = p["jaxpr"], p["mesh"]
    from jax._src.state.types import WriteEffect

    written = {id(e.input) for e in jaxpr.effects if isinstance(e, WriteEffect)}
    refs = [(v, "output" if id(v) in written else "input", eqn.invars[i].aval) for i, v in enumerate(jaxpr.constvars)]
    name = p.get("name") or getattr(p.get("debug_info"), "func_name", None) or "core_map"
    return jaxpr, refs, list(jaxpr.invars), mesh, str(name), "core_map", 1


def _operand(var, role: str, position: int, label: str, mesh) -> BlockSpecInfo:
    aval = getattr(var, "aval", var)
    inner = getattr(aval, "inner_aval", aval)
    shape = [int(d) for d in getattr(inner, "shape", ())]
    space = _space(aval, mesh)
    return BlockSpecInfo(operand=label, role=role, position=position, array_shape=shape, dtype=str(inner.dtype),
                         block_shape=list(shape), dim_kinds=["blocked"] * len(shape), memory_space=space,
                         buffer_count=None, index_map="the whole array (the kernel copies what it needs)",
                         fixed_window=True, fixed_index=[0] * len(shape), resident=space == "vmem")


def _whole(rank: int, n_grid: int) -> Callable:
    """The index map of an operand the kernel sees whole: block 0 at every core."""
    import numpy as np

    return lambda *idx: tuple(np.zeros(len(idx[0]) if idx else 1, np.int64) for _ in range(rank))


def _dim(d) -> tuple[str, int | None]:
    if d is None or type(d).__name__ == "Squeezed":
        return "squeezed", None
    if isinstance(d, int):
        return "blocked", d
    return type(d).__name__.lower(), getattr(d, "block_size", None)


def _pipeline_index_map(spec, n_grid: int, rank: int) -> Callable:
    import jax
    import jax.numpy as jnp

    fn = getattr(spec, "index_map", None)
    if fn is None:
        return _whole(rank, n_grid)

    def one(*idx):
        out = fn(*idx)
        out = out if isinstance(out, tuple) else (out,)
        # a pl.ds (BoundedSlice / Element dims) gives an element offset: its start
        return tuple(jnp.asarray(getattr(b, "start", b), jnp.int32) for b in out)

    if n_grid == 0:
        f0 = jax.jit(one)
        return lambda *idx: f0()
    return jax.jit(jax.vmap(one))


def _ref_space(space: str) -> str:
    """Where a ref handed to emit_pipeline lives: "any" (HBM) for memory_space ANY/HBM, else on the
    chip ("default" is a pallas_call's block ref, which is in VMEM)."""
    return "smem" if "smem" in space else "any" if ("any" in space or "hbm" in space) else "vmem"


def pipeline_call(record: PipelineRecord, kernel: str, number: int) -> FoundCall:
    """One noted emit_pipeline as a call of its own: its grid over the refs it was given."""
    from ..base.user_code import short_path

    operands, maps = [], []
    n_grid = len(record.grid)
    letters = list(GRID_LETTERS[:n_grid].ljust(n_grid, "g"))
    for pos, (spec, (shape, dtype, ref_space)) in enumerate(zip(record.specs, record.refs)):
        role = "input" if pos < len(record.in_specs) else "output"
        dims = getattr(spec, "block_shape", None)
        kinds, block = zip(*(_dim(d) for d in dims)) if dims is not None else (["blocked"] * len(shape), list(shape))
        space = str(getattr(spec, "memory_space", None) or "").lower()
        space = "smem" if "smem" in space else "any" if ("any" in space or "hbm" in space) else "vmem"
        fn = getattr(spec, "index_map", None)
        code = getattr(fn, "__code__", None)
        operands.append(BlockSpecInfo(
            operand=f"{'in' if role == 'input' else 'out'}[{pos if role == 'input' else pos - len(record.in_specs)}]",
            role=role, position=pos if role == "input" else pos - len(record.in_specs), array_shape=list(shape),
            dtype=dtype, block_shape=list(block), dim_kinds=list(kinds), memory_space=space,
            buffer_count=getattr(getattr(spec, "pipeline_mode", None), "buffer_count", None),
            source_space=_ref_space(ref_space),
            index_map=f"({', '.join(letters)}) -> {getattr(fn, '__name__', 'block 0')}",
            index_map_source=f"{short_path(code.co_filename)}:{code.co_firstlineno}" if code else None))
        maps.append(_pipeline_index_map(spec, n_grid, len(block)))
    where = f"{short_path(record.source[0])}:{record.source[1]}" if record.source else None
    sem = (record.dimension_semantics + ["arbitrary"] * n_grid)[:n_grid]
    info = PallasCall(
        name=f"{kernel} pipeline {number}", source=where, kernel_source=None, grid=list(record.grid), grid_names=letters,
        grid_dynamic=[g is None for g in record.grid], dimension_semantics=sem, scalar_prefetch=0, prefetch_bytes=0,
        operands=operands, scratch=[], dmas=[], vmem_limit_bytes=None, num_stages=None, step_flops=0.0,
        step_flops_min=0.0, step_transcendentals=0.0, dots=[], intermediates_bytes=[], style="emit_pipeline")
    return FoundCall(info=info, index_maps=maps, signature=f"emit_pipeline|{next(_SERIAL)}")


def body_pipelines(body, kernel: str, copies: int | None) -> tuple[list[FoundCall], list[str], list[float]]:
    """Each emit_pipeline a kernel body ran, as a call to walk, or why it cannot be walked; and how
    many times each runs in all (``copies``: how many times the body runs, on every core or grid
    step; a pipeline split over the core axis runs once in all; None: not known)."""
    from ..base.user_code import short_path

    pipelines: list[FoundCall] = []
    unwalked: list[str] = []
    runs: list[float] = []
    for scope, (_, most) in zip([s for s in body.run_scoped if is_pipeline_scope(s)], body.pipeline_runs):
        record = pipeline_for(scope)
        frame = eqn_frame(scope)
        where = f"{short_path(frame[0])}:{frame[1]}" if frame else "its kernel"
        if record is None:
            unwalked.append(f"the emit_pipeline at {where}: its grid and BlockSpecs were not noted while tracing "
                            "(traced before the inspector looked, or a jax that lays pipelines out differently)")
        elif any(g is None for g in record.grid):
            unwalked.append(f"the emit_pipeline at {where}: its grid is computed inside the kernel at run time")
        else:
            pipelines.append(pipeline_call(record, kernel, len(pipelines) + 1))
            if copies is not None:
                runs.append(most * (1 if record.core_axis else copies))
    for scope in body.run_scoped:
        if runs_pipeline_on_given_buffers(scope):
            frame = eqn_frame(scope)
            where = f"{short_path(frame[0])}:{frame[1]}" if frame else "its kernel"
            unwalked.append(f"the emit_pipeline in the scope at {where} runs on buffers it is given (allocations=), "
                            "whose copies may not be the blocks its index maps name (a BufferedRef of the kernel's "
                            "own can gather rows or update in place); its copies are counted with the body's DMAs")
    return pipelines, unwalked, runs


def read_mesh_kernel(eqn, live: list[bool] | None = None, forced_interpret: bool = False) -> FoundCall:
    """A pl.kernel (mpmd_map) or core_map equation as a PallasCall: grid = the mesh (one step per
    core), operands whole where the mesh keeps them, scratch_types and run_scoped buffers, the
    body's DMAs and flops, and each emit_pipeline in the body as a call to walk."""
    from ..base.user_code import short_path

    jaxpr, refs, scratch_vars, mesh, name, style, bodies = _parts(eqn)
    info = getattr(jaxpr, "debug_info", None) or eqn.params.get("debug_info")
    arg_names = list(getattr(info, "arg_names", None) or [])
    operands, maps, names = [], [], {}
    counts = {"input": 0, "output": 0}
    for i, (var, role, _) in enumerate(refs):
        label = arg_names[i] if i < len(arg_names) and arg_names[i] else f"ref{i}"
        op = _operand(var, role, counts[role], label, mesh)
        counts[role] += 1
        op.unused = role == "output" and live is not None and counts[role] - 1 < len(live) and not live[counts[role] - 1]
        operands.append(op)
        maps.append(_whole(len(op.array_shape), len(mesh.shape)))
        names[id(var)] = label
    if eqn.primitive.name == "mpmd_map":
        for i, o in (eqn.params.get("input_output_aliases") or {}).items():
            outs = [op for op in operands if op.role == "output"]
            if o < len(outs) and i < len(operands):
                outs[o].aliased_input = operands[i].operand
    scratch = []
    for k, v in enumerate(scratch_vars):
        aval = v.aval
        inner = getattr(aval, "inner_aval", aval)
        names[id(v)] = arg_names[len(refs) + k] if len(refs) + k < len(arg_names) else f"scratch {k}"
        scratch.append(ScratchInfo(shape=[int(d) for d in getattr(inner, "shape", ())],
                                   dtype=str(getattr(inner, "dtype", "")), memory_space=memory_space(aval)))
    body = Body(names)
    flops_lo, flops_hi = body.visit(jaxpr, (1.0, 1.0))
    dots = body_dots(jaxpr)
    cores = math.prod(int(n) for n in mesh.shape.values())
    pipelines, unwalked, runs = body_pipelines(body, name, cores)
    spaces = {s.memory_space for s in scratch + body.scoped}
    odd = sorted(spaces - set(_MODELLED_SPACES))
    unfollowed = (f"{', '.join(odd)} buffers are not modelled" if odd else
                  f"an MPMD kernel of {bodies} bodies: only the first is counted" if bodies > 1 else None)
    frame = eqn_frame(eqn)
    grid: list[int | None] = [int(n) for n in mesh.shape.values()]
    call = PallasCall(
        name=name, source=f"{short_path(frame[0])}:{frame[1]}" if frame else None,
        kernel_source=short_src(getattr(info, "func_src_info", None)), grid=grid,
        grid_names=[str(a) for a in mesh.shape.keys()], grid_dynamic=[False] * len(grid),
        dimension_semantics=_semantics(mesh, len(grid)), scalar_prefetch=0, prefetch_bytes=0, operands=operands,
        scratch=scratch + body.scoped, dmas=body.dmas,
        vmem_limit_bytes=getattr(eqn.params.get("compiler_params"), "vmem_limit_bytes", None), num_stages=None,
        step_flops=flops_hi, step_flops_min=flops_lo, step_transcendentals=body.trans, dots=body.dots,
        int8_matmuls=body.int8_matmuls, mxu_passes=body.mxu_passes or 1,
        intermediates_bytes=sorted(body.sizes, reverse=True)[:8], unknown_loops=body.unknown_loops,
        body=dots,
        cost_estimate=cost_estimate(eqn.params.get("cost_estimate")),
        interpret=bool(eqn.params.get("interpret")) and not forced_interpret,
        style=style, core_type=_core_type(mesh), vmem_unfollowed=unfollowed)
    # by content: a jaxpr's id can pass to another kernel's once it is freed (grid_walk caches walks by this)
    signature = hashlib.sha256(f"{style}|{name}|{grid}|{jaxpr}".encode()).hexdigest()
    return FoundCall(info=call, index_maps=maps, signature=signature, pipelines=pipelines, unwalked_pipelines=unwalked,
                     pipeline_runs=runs)
