"""Every pallas_call in a traced program: grid, dimension semantics, BlockSpecs with readable
and evaluable index maps, scratch, and what the kernel body computes per grid step.

Reads jax's internal GridMapping/BlockMapping (jax/_src/pallas/core.py, pinned 0.10.2).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

GRID_LETTERS = "ijklmn"
_BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "//", "rem": "%", "and": "&", "or": "|",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_TRANSCENDENTAL = {"exp", "log", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "pow", "exp2", "log1p", "expm1", "erf"}


@dataclasses.dataclass
class BlockSpecInfo:
    operand: str  # the kernel's name for the ref (q_ref), else jax's origin (args[0], outputs)
    role: str  # input | output
    position: int  # index among the pallas_call's inputs or outputs
    array_shape: list[int]
    dtype: str
    block_shape: list[int | None]  # None: a squeezed dimension (pl.Squeezed / None in the BlockSpec)
    dim_kinds: list[str]  # blocked | squeezed | element | bounded per dimension
    memory_space: str  # vmem | any | smem | ...
    buffer_count: int | None  # pl.Buffered(n), None for the default
    index_map: str  # "(i, j, k) -> (i, j, 0)"

    @property
    def block_elements(self) -> int:
        return math.prod(b or 1 for b in self.block_shape)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def block_bytes(self) -> int:
        return self.block_elements * self.itemsize


@dataclasses.dataclass
class ScratchInfo:
    shape: list[int]
    dtype: str
    memory_space: str  # vmem | smem | semaphore ...


@dataclasses.dataclass
class PallasCall:
    name: str
    source: str | None  # file:line of the pallas_call
    kernel_source: str | None  # the kernel function and where it is defined
    grid: list[int]
    grid_names: list[str]
    dimension_semantics: list[str]  # per grid axis; "arbitrary" when unspecified
    scalar_prefetch: int
    prefetch_bytes: int  # the scalar-prefetch operands, which live in SMEM for the whole kernel
    operands: list[BlockSpecInfo]
    scratch: list[ScratchInfo]
    vmem_limit_bytes: int | None  # CompilerParams(vmem_limit_bytes=...)
    num_stages: int | None  # Triton compiler params, when given
    step_flops: float  # of the kernel body, one grid step, every pl.when branch taken
    step_transcendentals: float
    dots: list[list[int]]  # (m, k, n) of each matmul in the body
    intermediates_bytes: list[int]  # sizes of the body's array values, largest first (top 8)

    @property
    def steps(self) -> int:
        return math.prod(self.grid) if self.grid else 1


@dataclasses.dataclass
class FoundCall:
    """A PallasCall with what the grid walk needs and the Report does not carry."""

    info: PallasCall
    index_maps: list[Callable]  # per operand: f(*grid_index_arrays) -> tuple of block-index arrays
    kernel_jaxpr: object
    signature: str  # same grid, shapes, index maps and prefetch data: the same walk
    prefetch_known: bool = False  # scalar-prefetch operands are constants, so the walk can use them


def _dim_kind(dim) -> tuple[str, int | None]:
    name = type(dim).__name__
    if name == "Squeezed":
        return "squeezed", None
    if name == "Blocked":
        return "blocked", dim.block_size
    if name == "Element":
        return "element", dim.block_size
    if name == "BoundedSlice":
        return "bounded", dim.block_size
    return name.lower(), getattr(dim, "block_size", None)


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
        call = lambda name: [(f"{name}({', '.join(a[0] for a in args)})", _ATOM)]
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


def _index_map_callable(closed, prefetch: list | None, n_grid: int) -> Callable:
    """f(*grid index arrays) -> block index arrays. Index maps that read scalar-prefetch refs get
    them discharged into plain values and bound to the prefetch data (when it is a constant)."""
    import jax
    from jax._src import core
    from jax._src.state import discharge

    if prefetch is None:
        def one(*idx):
            return tuple(core.eval_jaxpr(closed.jaxpr, closed.consts, *idx))
    else:
        pure = discharge.discharge_state(closed)
        values = [jax.numpy.asarray(v) for v in prefetch]

        def one(*idx):
            outs = core.eval_jaxpr(pure.jaxpr, pure.consts, *idx, *values)
            return tuple(outs[:len(closed.jaxpr.outvars)])  # the rest are the (unchanged) refs

    return jax.jit(jax.vmap(one))


# Primitives that call a jaxpr with their own operands, and the param that holds it.
_CALL_PARAMS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
                "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr", "custom_jvp_call": "call_jaxpr"}


def _constants(closed_jaxpr) -> dict:
    """Values known before run time: the program's constants, followed into nested jit calls."""
    known = {id(v): np.asarray(c) for v, c in zip(closed_jaxpr.jaxpr.constvars, closed_jaxpr.consts)}

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            inner = eqn.params.get(_CALL_PARAMS.get(eqn.primitive.name, ""))
            if inner is not None:
                j = getattr(inner, "jaxpr", inner)
                for outer, var in zip(eqn.invars, j.invars):
                    value = _literal_value(outer, known)
                    if value is not None:
                        known[id(var)] = value
                for var, c in zip(j.constvars, getattr(inner, "consts", ())):
                    known[id(var)] = np.asarray(c)
                visit(j)

    visit(closed_jaxpr.jaxpr)
    return known


def _literal_value(v, known: dict):
    if hasattr(v, "val"):
        return np.asarray(v.val)
    return known.get(id(v))


def _memory_space(aval) -> str:
    space = getattr(aval, "memory_space", None)
    text = str(space).lower() if space is not None else "vmem"
    if text in ("", "none", "default"):  # TPU blocks without a memory space live in VMEM
        return "vmem"
    for known in ("vmem", "smem", "any", "hbm", "semaphore", "sem"):
        if known in text:
            return known
    return text or "vmem"


def _body_costs(jaxpr) -> tuple[float, float, list[list[int]], list[int]]:
    """Flops (2 per multiply-add of each dot), transcendental elements, matmul dims and the
    largest array values of a kernel body, nested branches included."""
    from jax._src import core

    flops = trans = 0.0
    dots: list[list[int]] = []
    sizes: list[int] = []
    stack = [jaxpr]
    while stack:
        j = stack.pop()
        # Loads are views of the VMEM blocks and stored values go straight to their buffer: only
        # the values in between (the scores of an attention block, say) need VMEM of their own.
        stored = {id(e.invars[1]) for e in j.eqns if e.primitive.name in ("swap", "store") and len(e.invars) > 1}
        for eqn in j.eqns:
            for v in eqn.outvars if eqn.primitive.name not in ("get", "load", "swap", "store") else ():
                if id(v) in stored:
                    continue
                aval = getattr(v, "aval", None)
                shape = getattr(aval, "shape", None)
                if shape and hasattr(aval, "dtype") and len(shape) >= 1:
                    sizes.append(math.prod(shape) * np.dtype(aval.dtype).itemsize)
            p = eqn.primitive.name
            if p == "dot_general":
                (lc, _), _ = eqn.params["dimension_numbers"]
                lhs, out = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
                k = math.prod(lhs[d] for d in lc)
                flops += 2.0 * math.prod(out) * k
                m = math.prod(out[:-1]) if len(out) > 1 else 1
                dots.append([int(m), int(k), int(out[-1]) if out else 1])
            elif p in _TRANSCENDENTAL:
                trans += math.prod(eqn.outvars[0].aval.shape)
            for sub in core.jaxprs_in_params(eqn.params):
                stack.append(sub)
    return flops, trans, dots, sorted(sizes, reverse=True)[:8]


def _semantics(compiler_params, ndim: int) -> list[str]:
    sem = getattr(compiler_params, "dimension_semantics", None)
    if not sem:
        return ["arbitrary"] * ndim
    return [str(s).split(".")[-1].lower().replace("dimensionsemantics", "") for s in sem]


def _short_src(src: str | None) -> str | None:
    """'kernel at /abs/path/file.py:48' -> 'kernel at path/file.py:48'."""
    from ..target import short_path

    if not src or " at " not in src:
        return src
    name, _, where = src.rpartition(" at ")
    path, _, line = where.rpartition(":")
    return f"{name} at {short_path(path)}:{line}" if path else src


def _signature(gm, prefetch) -> str:
    import hashlib

    parts = [repr(tuple(gm.grid))] + [f"{bm.block_shape}|{bm.array_aval}|{bm.index_map_jaxpr}" for bm in gm.block_mappings]
    parts += [hashlib.sha256(np.ascontiguousarray(p).tobytes()).hexdigest() for p in prefetch or []]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def find_pallas_calls(closed_jaxpr, eqn_sources: dict | None = None) -> list[FoundCall]:
    """Every pallas_call in the program (inside jit, custom_vjp, scan, cond, vmap'd code too)."""
    from jax._src import source_info_util

    from ..stages import _walk_eqns
    from ..target import short_path

    found = []
    known = _constants(closed_jaxpr)
    for eqn in _walk_eqns(closed_jaxpr.jaxpr):
        if eqn.primitive.name != "pallas_call":
            continue
        p = eqn.params
        gm = p["grid_mapping"]
        grid = [int(g) for g in gm.grid]
        names = [str(n) for n in gm.grid_names] if gm.grid_names else list(GRID_LETTERS[:len(grid)])
        n_in = gm.num_inputs
        kernel = p["jaxpr"]
        info = getattr(kernel, "debug_info", None)
        arg_names = list(getattr(info, "arg_names", None) or [])
        operands, maps = [], []
        prefetch = [_literal_value(v, known) for v in eqn.invars[:gm.num_index_operands]]
        prefetch = prefetch if prefetch and all(p is not None for p in prefetch) else None
        for pos, bm in enumerate(gm.block_mappings):
            role = "input" if pos < n_in else "output"
            index = pos if role == "input" else pos - n_in
            kinds, block = zip(*(_dim_kind(d) for d in bm.block_shape)) if bm.block_shape else ((), ())
            prefetch_names = [f"s{i}" for i in range(gm.num_index_operands)]
            text = expr_text(bm.index_map_jaxpr.jaxpr, names + prefetch_names)
            ref = gm.num_index_operands + pos
            label = arg_names[ref] if ref < len(arg_names) and arg_names[ref] else str(bm.origin)
            operands.append(BlockSpecInfo(
                operand=label, role=role, position=index,
                array_shape=[int(d) for d in bm.array_aval.shape], dtype=str(bm.array_aval.dtype),
                block_shape=list(block), dim_kinds=list(kinds), memory_space=_memory_space(bm.transformed_block_aval),
                buffer_count=getattr(bm.pipeline_mode, "buffer_count", None),
                index_map=f"({', '.join(names)}) -> ({', '.join(text)})",
            ))
            maps.append(_index_map_callable(bm.index_map_jaxpr, prefetch, len(grid)))
        scratch = [ScratchInfo([int(d) for d in getattr(a, "shape", ())], str(getattr(a, "dtype", "")), _memory_space(a))
                   for a in gm.scratch_avals]
        flops, trans, dots, sizes = _body_costs(kernel)
        frame = source_info_util.user_frame(eqn.source_info.traceback)
        cp = p.get("compiler_params")
        found.append(FoundCall(PallasCall(
            name=str(p.get("name") or getattr(info, "func_name", "pallas_call")),
            source=f"{short_path(frame.file_name)}:{frame.start_line}" if frame else None,
            kernel_source=_short_src(getattr(info, "func_src_info", None)),
            grid=grid, grid_names=names, dimension_semantics=_semantics(cp, len(grid)),
            scalar_prefetch=int(gm.num_index_operands),
            prefetch_bytes=sum(math.prod(v.aval.shape) * np.dtype(v.aval.dtype).itemsize
                               for v in eqn.invars[:gm.num_index_operands]),
            operands=operands, scratch=scratch,
            vmem_limit_bytes=getattr(cp, "vmem_limit_bytes", None), num_stages=getattr(cp, "num_stages", None),
            step_flops=flops, step_transcendentals=trans, dots=dots, intermediates_bytes=sizes,
        ), maps, kernel, _signature(gm, prefetch), prefetch is not None))
    return found
