"""Every pallas_call in a traced program, read into ``inspector.base.pallas_model`` records: grid
(dynamic dimensions evaluated on the example inputs where they decide them), dimension
semantics, BlockSpecs with readable and evaluable index maps, scratch and run_scoped buffers,
the body's DMAs, and what the body computes per grid step.

Reads jax's GridMapping/BlockMapping and the Pallas TPU primitives (jax/_src/pallas, 0.10.x).
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from .variants import program_id_axes
from ..base.pallas_model import GRID_LETTERS, BlockSpecInfo, FoundCall, PallasCall, ScratchInfo, TritonBody
from ..base.user_code import short_path
from .evaluate import operand_values, pallas_occurrences
from .body_dots import body_dots
from .branches import branch_steps
from .kernel_body import Body, bytes_of, cost_estimate, short_src, memory_space
from .vector_work import grid_work
from .kernel_scalars import prefetch_scalars
from .liveness import live_outputs
from .mesh_kernels import body_pipelines, is_mesh_kernel, read_mesh_kernel
from .operand_origins import kernels_in_control_flow, operands_made_by_ops, outputs_read_by_ops
from .output_reads import output_reads
from .row_flow import straight_flows
from .index_maps import dim_kind, index_map_callable, is_dynamic_dim
from .tracing import eqn_frame
from .triton_body import triton_body

_BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "//", "rem": "%", "and": "&", "or": "|",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _literal(v) -> str | None:
    val = getattr(v, "val", None)
    if val is None:
        return None
    try:
        return str(int(val)) if np.ndim(val) == 0 else str(val)
    except (TypeError, ValueError):
        return str(val)


_PRECEDENCE = {"|": 1, "&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "+": 4, "-": 4,
               "*": 5, "//": 5, "%": 5}
_ATOM = 9


def expr_text(jaxpr, names: list[str]) -> list[str]:
    """Readable expressions for the outputs of a small integer jaxpr (an index map), with only
    the parentheses precedence needs: ``min(k, (j * 128 + 127) // 256)``."""
    env: dict = {v: (n, _ATOM) for v, n in zip(jaxpr.invars, names)}

    def read(v) -> tuple[str, int]:
        lit = _literal(v)
        return (lit, _ATOM) if lit is not None else env.get(v, ("?", _ATOM))

    def binop(op: str, a: tuple, b: tuple) -> tuple[str, int]:
        prec = _PRECEDENCE[op]
        left = a[0] if a[1] >= prec else f"({a[0]})"
        right = b[0] if b[1] > prec or (b[1] == prec and op in ("+", "*")) else f"({b[0]})"
        return f"{left} {op} {right}", prec

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        p = eqn.primitive.name
        call = lambda name: [(f"{name}({', '.join(a[0] for a in args)})", _ATOM)]  # noqa: B023 (used in this iteration)
        if p in _BINOPS and len(args) == 2:
            out = [binop(_BINOPS[p], *args)]
        elif p in ("convert_element_type", "copy", "copy_p"):
            out = args[:1]
        elif p == "neg":
            out = [(f"-{args[0][0]}" if args[0][1] == _ATOM else f"-({args[0][0]})", _ATOM)]
        elif p in ("jit", "pjit", "closed_call"):
            name = eqn.params.get("name", "")
            inner = eqn.params.get("jaxpr")
            if name == "floor_divide" and len(args) == 2:
                out = [binop("//", *args)]
            elif name == "remainder" and len(args) == 2:
                out = [binop("%", *args)]
            elif inner is not None:
                texts = expr_text(getattr(inner, "jaxpr", inner), [a[0] if a[1] == _ATOM else f"({a[0]})" for a in args])
                out = [(t, _ATOM if t.isidentifier() or t.isdigit() else 0) for t in texts]
            else:
                out = call(name)
        elif p == "get" and args:
            out = [(f"{args[0][0]}[{', '.join(a[0] for a in args[1:])}]", _ATOM)]
        elif p == "select_n" and len(args) == 3:
            out = [(f"{args[2][0]} if {args[0][0]} else {args[1][0]}", 0)]
        else:
            out = call(p)
        for var, text in zip(eqn.outvars, out):
            env[var] = text
    return [read(v)[0] for v in jaxpr.outvars]


# the module of each Pallas backend's CompilerParams class (jax/_src/pallas, 0.10.x)
_PARAMS_BACKENDS = {"jax._src.pallas.mosaic.core": "mosaic_tpu", "jax._src.pallas.triton.core": "triton",
                    "jax._src.pallas.mosaic_gpu.core": "mosaic_gpu"}


def params_backend(compiler_params) -> str | None:
    """The Pallas backend a pallas_call's compiler_params are written for (None: none given, or a
    class this jax does not name)."""
    return _PARAMS_BACKENDS.get(type(compiler_params).__module__) if compiler_params is not None else None


def _semantics(compiler_params, ndim: int) -> list[str]:
    sem = getattr(compiler_params, "dimension_semantics", None)
    if not sem:
        return ["arbitrary"] * ndim
    out = [str(s).split(".")[-1].lower().replace("dimensionsemantics", "") for s in sem]
    return out + ["arbitrary"] * (ndim - len(out))


def _grid_axes_read(jaxpr, n_grid: int) -> list[int] | None:
    """The grid axes an index map's result depends on (what it reads of its grid indices), found
    backwards from its outputs; an equation that is needed needs all its operands. None when the
    map takes fewer inputs than the grid has axes (a layout this reader does not know)."""
    if len(jaxpr.invars) < n_grid:
        return None
    needed = {id(v) for v in jaxpr.outvars if not hasattr(v, "val")}
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in needed for v in eqn.outvars):
            needed.update(id(v) for v in eqn.invars if not hasattr(v, "val"))
    return [k for k, v in enumerate(jaxpr.invars[:n_grid]) if id(v) in needed]


def _returns_constants(closed) -> bool:
    """An index map whose every output is a literal: the block never moves, whatever the grid
    point or the prefetched scalars (jax's own "trivial window" is the case of all zeros over the
    whole array)."""
    from jax.extend.core import Literal

    outvars = closed.jaxpr.outvars
    return bool(outvars) and all(isinstance(v, Literal) for v in outvars)


def _constant_outputs(closed) -> list[int] | None:
    """The block index an index map returns when it returns literals only."""
    if not _returns_constants(closed):
        return None
    try:
        return [int(v.val) for v in closed.jaxpr.outvars]
    except (TypeError, ValueError):
        return None


def _src_line(src: str | None) -> str | None:
    """'<lambda> at /abs/path/file.py:48' -> 'path/file.py:48'."""
    short = short_src(src)
    return short.rpartition(" at ")[2] if short and " at " in short else None


def _signature(grid, gm, prefetch) -> str:
    parts = [repr(tuple(grid))] + [f"{bm.block_shape}|{bm.array_aval}|{bm.index_map_jaxpr}" for bm in gm.block_mappings]
    parts += [hashlib.sha256(np.ascontiguousarray(p).tobytes()).hexdigest() for p in prefetch or []]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _operand(bm, pos: int, n_in: int, n_idx: int, arg_names: list, index_names: list, grid_names: list) -> BlockSpecInfo:
    """One BlockSpec (a block mapping of jax's grid mapping) as data."""
    role = "input" if pos < n_in else "output"
    kinds, block = zip(*(dim_kind(d) for d in bm.block_shape)) if bm.block_shape else ((), ())
    text = expr_text(bm.index_map_jaxpr.jaxpr, index_names)
    ref = n_idx + pos
    label = arg_names[ref] if ref < len(arg_names) and arg_names[ref] else str(bm.origin)
    return BlockSpecInfo(
        operand=label, role=role, position=pos if role == "input" else pos - n_in,
        array_shape=[int(d) for d in bm.array_aval.shape], dtype=str(bm.array_aval.dtype),
        block_shape=list(block), dim_kinds=list(kinds), memory_space=memory_space(bm.transformed_block_aval),
        buffer_count=getattr(bm.pipeline_mode, "buffer_count", None),
        revisit=getattr(getattr(bm.pipeline_mode, "revisit", None), "value", None),  # RevisitMode.ANY -> "any"
        # an explicit memory space on the block (not jax's "default"): the whole array, resident (the
        # transformed aval: block_aval asserts a BlockSpec has no transforms, as Mosaic GPU's swizzles are)
        resident=str(getattr(bm.transformed_block_aval, "memory_space", None)).lower() == "vmem",
        index_map=f"({', '.join(grid_names)}) -> ({', '.join(text)})",
        fixed_window=_returns_constants(bm.index_map_jaxpr),
        fixed_index=_constant_outputs(bm.index_map_jaxpr),
        grid_axes_read=_grid_axes_read(bm.index_map_jaxpr.jaxpr, len(grid_names)),
        index_map_source=_src_line(getattr(getattr(bm.index_map_jaxpr.jaxpr, "debug_info", None), "func_src_info", None)),
    )


def block_specs(closed_jaxpr) -> list[tuple[str, str | None, list[BlockSpecInfo]]]:
    """(name, file:line, BlockSpecs) of every pallas_call, in program order: the BlockSpecs alone,
    without reading the body or evaluating anything (cheap enough to ask before every compile)."""

    found = []
    for _, eqn in pallas_occurrences(closed_jaxpr.jaxpr):
        p = eqn.params
        if "grid_mapping" not in p:  # pl.kernel / core_map: no BlockSpecs
            continue
        gm = p["grid_mapping"]
        grid = list(gm.grid)
        names = [str(n) for n in gm.grid_names] if gm.grid_names else list(GRID_LETTERS[:len(grid)].ljust(len(grid), "g"))
        n_idx = int(gm.num_index_operands)
        info = getattr(p["jaxpr"], "debug_info", None)
        arg_names = list(getattr(info, "arg_names", None) or [])
        operands = [_operand(bm, pos, gm.num_inputs, n_idx, arg_names, names + [f"s{i}" for i in range(n_idx)], names)
                    for pos, bm in enumerate(gm.block_mappings)]
        frame = eqn_frame(eqn)
        found.append((str(p.get("name") or getattr(info, "func_name", "pallas_call")),
                      f"{short_path(frame[0])}:{frame[1]}" if frame else None, operands))
    return found


def _grid(gm, dynamic_values: list) -> list[int | None]:
    """The grid's sizes; one computed at run time from the value the example inputs give it (None without)."""
    values = iter(dynamic_values)
    grid: list[int | None] = []
    for d in gm.grid:
        if is_dynamic_dim(d):
            v = next(values)
            grid.append(int(np.asarray(v).reshape(-1)[0]) if v is not None else None)
        else:
            grid.append(int(d))
    return grid


def _mark_straight_flows(kernel, operands: list[BlockSpecInfo], n_idx: int, n_in: int) -> None:
    """Which input dims reach the outputs straight (BlockSpecInfo.straight_to): padding read along
    them is harmless."""
    try:
        ref_dims = [[d for d, k in enumerate(op.dim_kinds) if k != "squeezed"] for op in operands]
        flows = straight_flows(kernel, n_idx, n_in, len(operands) - n_in, ref_dims)
    except Exception:  # an analysis that cannot follow the body claims nothing
        flows = [{} for _ in range(n_in)]
    for op, found in zip(operands, flows):
        op.straight_to = found


def _mark_reads(operand: BlockSpecInfo, found) -> None:
    """What the program reads of an output after the kernel (output_reads.Reads), unless all of it."""
    if not found.everything:
        operand.read_boxes = [[list(d) for d in box] for box in found.boxes]
        operand.read_unfollowed, operand.read_overwritten = list(found.unfollowed), list(found.overwritten)


def read_call(eqn, values: list | None, live: list[bool] | None = None, forced_interpret: bool = False,
              made: list[bool] | None = None, read_after: list[bool] | None = None, followed: bool = False,
              reads: list | None = None) -> FoundCall:
    """One pallas_call equation as data. ``values``: the concrete values of its operands where
    the example inputs decide them (None per operand otherwise); ``live``: which outputs the
    program reads (all, when not known); ``made``: which operands the program computes before
    the kernel, ``read_after``: which outputs an op reads after it (operand_origins; none when
    not known); ``followed``: those were followed, not assumed (the kernel is outside loops,
    branches and maps); ``reads``: the elements of each output the program reads
    (output_reads.Reads; all, when not known)."""
    p = eqn.params
    gm = p["grid_mapping"]
    n_dyn = sum(1 for d in gm.grid if is_dynamic_dim(d))
    values = values or [None] * len(eqn.invars)
    grid = _grid(gm, values[:n_dyn])
    names = [str(n) for n in gm.grid_names] if gm.grid_names else list(GRID_LETTERS[:len(grid)].ljust(len(grid), "g"))
    n_idx = int(gm.num_index_operands)
    prefetch_vars = eqn.invars[n_dyn:n_dyn + n_idx]
    prefetch: list | None = [values[n_dyn + i] for i in range(n_idx)]
    prefetch = prefetch if prefetch and all(v is not None for v in prefetch) else None
    kernel = p["jaxpr"]
    info = getattr(kernel, "debug_info", None)
    arg_names = list(getattr(info, "arg_names", None) or [])
    n_in = gm.num_inputs
    operands, maps = [], []
    prefetch_names = [f"s{i}" for i in range(n_idx)]
    for pos, bm in enumerate(gm.block_mappings):
        operand = _operand(bm, pos, n_in, n_idx, arg_names, names + prefetch_names, names)
        operand.unused = operand.role == "output" and live is not None and not live[pos - n_in]
        operand.made_by_op = operand.role == "input" and bool(made) and made[n_dyn + n_idx + pos]  # type: ignore[index]
        operand.read_by_op = operand.role == "output" and bool(read_after) and read_after[pos - n_in]  # type: ignore[index]
        if operand.role == "output" and reads is not None:
            _mark_reads(operand, reads[pos - n_in])
        operands.append(operand)
        maps.append(index_map_callable(bm.index_map_jaxpr, prefetch, len(grid)))
    _mark_straight_flows(kernel, operands, n_idx, n_in)
    # input_output_aliases count the scalar-prefetch operands, then the pipelined inputs
    for i, o in p.get("input_output_aliases", ()) or ():
        if n_in + o < len(operands):
            operands[n_in + o].aliased_input = (operands[i - n_idx].operand if i >= n_idx
                                                else f"scalar-prefetch operand {i}")
    scratch = [ScratchInfo(shape=[int(d) for d in getattr(a, "shape", ())], dtype=str(getattr(a, "dtype", "")),
                           memory_space=memory_space(a))
               for a in gm.scratch_avals]
    ref_names = {id(v): (arg_names[i] if i < len(arg_names) and arg_names[i] else f"ref{i}")
                 for i, v in enumerate(kernel.invars)}
    body = Body(ref_names)
    body.known.update(prefetch_scalars(kernel, prefetch or [], n_idx))
    flops_lo, flops_hi = body.visit(kernel, (1.0, 1.0))
    work = None if None in grid else grid_work(body, kernel, math.prod(grid), branch_steps(kernel, tuple(grid), prefetch))  # type: ignore[arg-type]
    name = str(p.get("name") or getattr(info, "func_name", "pallas_call"))
    # a pipeline nested in the body (emit_pipeline over HBM refs) runs at every grid step
    pipelines, unwalked, runs = body_pipelines(body, name, None if None in grid else math.prod(grid))  # type: ignore[arg-type]
    frame = eqn_frame(eqn)
    dots = body_dots(kernel)
    cp = p.get("compiler_params")
    call = PallasCall(
        name=name, source=f"{short_path(frame[0])}:{frame[1]}" if frame else None,
        kernel_source=short_src(getattr(info, "func_src_info", None)),
        grid=grid, grid_names=names, grid_dynamic=[is_dynamic_dim(d) for d in gm.grid],
        dimension_semantics=_semantics(cp, len(grid)),
        scalar_prefetch=n_idx, prefetch_bytes=sum(bytes_of(v.aval) for v in prefetch_vars),
        operands=operands, scratch=scratch + body.scoped, dmas=body.dmas,
        vmem_limit_bytes=getattr(cp, "vmem_limit_bytes", None), num_stages=getattr(cp, "num_stages", None),
        num_warps=getattr(cp, "num_warps", None), written_for=params_backend(cp),
        step_flops=flops_hi, step_flops_min=flops_lo, step_transcendentals=body.trans, dots=body.dots,
        int8_matmuls=body.int8_matmuls, mxu_passes=body.mxu_passes or 1, grid_work=work,
        intermediates_bytes=sorted(body.sizes, reverse=True)[:8], unknown_loops=body.unknown_loops,
        body=dots,
        cost_estimate=cost_estimate(p.get("cost_estimate")), vmapped_dims=[int(d) for d in gm.vmapped_dims],
        work_before_bytes=_work_before(eqn.invars[n_dyn:], made[n_dyn:] if made else None,
                                       p.get("input_output_aliases")),
        origins_followed=followed and made is not None,
        # True or the interpreter's params, unless the inspector forced interpret mode (the CPU)
        interpret=bool(p.get("interpret")) and not forced_interpret, program_ids=program_id_axes(kernel),
        triton=_triton(cp, kernel, ref_names),
    )
    return FoundCall(info=call, index_maps=maps, signature=_signature(grid, gm, prefetch),
                     prefetch_known=prefetch is not None, pipelines=pipelines, unwalked_pipelines=unwalked,
                     pipeline_runs=runs)


def _triton(cp, kernel, ref_names: dict) -> TritonBody | None:
    """What a GPU target's Triton lowering reads of the body: for Triton's params, or none."""
    if cp is not None and not hasattr(cp, "num_warps"):
        return None
    try:
        return triton_body(kernel, ref_names)
    except Exception as err:  # a body laid out differently: the GPU bounds then say nothing
        return TritonBody(unfollowed=f"{type(err).__name__}: {err}")


def _work_before(operands: list, made: list[bool] | None, aliases) -> int:
    """Bytes of the kernel's operands (scalar prefetch, then inputs) the program computes before
    it, plus the aliased arguments XLA copies first (it keeps the caller's buffer unless donated)."""
    made = made or [False] * len(operands)
    aliased = {i for i, _ in aliases or ()}
    return sum(bytes_of(v.aval) for k, v in enumerate(operands)
               if made[k] or (k in aliased and not hasattr(v, "val")))


def pallas_eqns(closed_jaxpr) -> list:
    return [eqn for _, eqn in pallas_occurrences(closed_jaxpr.jaxpr)]


def read_pallas_calls(closed_jaxpr, example_values: tuple | None = None,
                      forced_interpret: bool = False) -> list[tuple[str, FoundCall | Exception]]:
    """Every pallas_call in the program (inside jit, custom_vjp, scan, cond, vmap'd code too), as
    (name, FoundCall) or (name, the exception) for a call this reader cannot follow.
    ``forced_interpret``: traced under the inspector's own TPU interpret mode."""
    occurrences = list(pallas_occurrences(closed_jaxpr.jaxpr))
    if not occurrences:  # nothing to read (and no TPU layouts to ask libtpu for)
        return []
    try:
        values = operand_values(closed_jaxpr, occurrences, example_values)
    except Exception:  # evaluation is best effort: without values the walk says what it cannot follow
        values = [None] * len(occurrences)
    live = live_outputs(closed_jaxpr)
    made, read_after = operands_made_by_ops(closed_jaxpr), outputs_read_by_ops(closed_jaxpr)
    try:
        reads = output_reads(closed_jaxpr)
    except Exception:  # following the reads is best effort: without it every output counts as read whole
        reads = {}
    nested = kernels_in_control_flow(closed_jaxpr)
    found: list[tuple[str, FoundCall | Exception]] = []
    for (_, eqn), operand_vals in zip(occurrences, values):
        name = str(eqn.params.get("name") or eqn.primitive.name)
        try:
            if is_mesh_kernel(eqn):  # pl.kernel / core_map: a mesh of cores, no BlockSpecs
                found.append((name, read_mesh_kernel(eqn, live.get(id(eqn)), forced_interpret)))
            else:
                found.append((name, read_call(eqn, operand_vals, live.get(id(eqn)), forced_interpret, made.get(id(eqn)),
                                              read_after.get(id(eqn)), followed=id(eqn) not in nested,
                                              reads=reads.get(id(eqn)))))
        except Exception as err:  # a kernel this jax version lays out differently: a finding, not a crash
            found.append((name, err))
    return found
