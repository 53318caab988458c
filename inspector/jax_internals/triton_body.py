"""A Pallas-Triton kernel body as Triton's shared memory sees it: each ref read (a tile of a block),
whether a loop reads it and whether Triton's software pipeliner surely multi-buffers it, the matmul
operands the body computes, and the largest value it builds. What the GPU shared-memory bounds
(pallas/gpu_smem.py) rest on.

"Pipelined for sure" follows Triton's pipeliner (lib/Dialect/TritonGPU/Transforms/Pipeliner:
AssignLatencies.cpp, LowerLoops.cpp): in an innermost scf.for (a fori_loop of two or more trips,
not unrolled, no carry yielded straight back), a load that feeds a dot's A or B operand is given
latency num_stages - 1 when no load of the loop feeds another load's address, and lowerLoads
allocates that many copies of its tile for the whole loop (cp.async needs 4 contiguous bytes a
thread: a tile row of 16 bytes or more, rows 16-byte aligned). Only loads read at the loop's top
level, used once, straight by the dot, are counted so: the rest may or may not be."""
from __future__ import annotations

import numpy as np

from ..base.pallas_model import TritonBody, TritonLoad
from .kernel_body import bytes_of

_LOOPS = ("scan", "while")
_COPY_BYTES = 16  # a tile row and the ref's row stride, in bytes, for 16-byte cp.async copies


def _subjaxprs(eqn) -> list:
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def _is_ref(aval) -> bool:
    return "Ref" in type(aval).__name__


def _reads(eqn, used: set[int]) -> bool:
    """A ref read: ``get``, a masked ``pl.load``, or a swap or atomic whose old value the body uses
    (``used``: ids of the vars the jaxpr reads)."""
    return bool(eqn.invars) and _is_ref(getattr(eqn.invars[0], "aval", None)) and bool(eqn.outvars) and \
        bool(getattr(eqn.outvars[0].aval, "shape", ())) and \
        (eqn.primitive.name in ("get", "masked_load") or id(eqn.outvars[0]) in used)


def _has_loop(jaxpr) -> bool:
    return any(e.primitive.name in _LOOPS or any(_has_loop(j) for j in _subjaxprs(e)) for e in jaxpr.eqns)


def _itemsize(aval) -> int:
    try:
        return np.dtype(aval.dtype).itemsize
    except TypeError:
        return 4


def _cp_async_sized(eqn) -> bool:
    """The tile's rows and the ref's row stride allow 16-byte asynchronous copies."""
    tile, ref = eqn.outvars[0].aval, eqn.invars[0].aval
    if not tile.shape or not getattr(ref, "shape", ()):
        return False
    size = _itemsize(tile)
    return tile.shape[-1] * size >= _COPY_BYTES and ref.shape[-1] * size % _COPY_BYTES == 0


def _surely_pipelined(scan_eqn) -> set[int]:
    """ids of the ``get`` equations of a scan body that Triton's pipeliner multi-buffers for sure."""
    body = scan_eqn.params["jaxpr"].jaxpr
    unroll = scan_eqn.params.get("unroll", 1)
    n_carry, n_consts = scan_eqn.params.get("num_carry", 0), scan_eqn.params.get("num_consts", 0)
    carries_in = {id(v) for v in body.invars[n_consts:n_consts + n_carry]}
    if scan_eqn.params.get("length", 0) < 2 or unroll not in (1, True) or _has_loop(body) or \
            any(id(v) in carries_in for v in body.outvars[:n_carry]):
        return set()
    # values derived from a load: a load whose address uses one makes the loop's latencies shorter
    loaded: set[int] = set()
    for e in body.eqns:
        if e.primitive.name == "get" and any(id(v) in loaded for v in e.invars[1:]):
            return set()
        if e.primitive.name == "get" or any(id(v) in loaded for v in e.invars):
            loaded.update(id(v) for v in e.outvars)
    uses: dict[int, list] = {}
    for e in body.eqns:
        for pos, v in enumerate(e.invars):
            uses.setdefault(id(v), []).append((e, pos))
    for v in body.outvars:
        uses.setdefault(id(v), []).append((None, -1))
    defs = {id(v): e for e in body.eqns for v in e.outvars}

    def expr(v) -> tuple:
        """The value as its computation, so that two equal indices computed apart compare equal."""
        if hasattr(v, "val"):  # a literal
            return ("literal", repr(v.val))
        e = defs.get(id(v))
        return ("var", id(v)) if e is None else (e.primitive.name, repr(e.params), tuple(expr(i) for i in e.invars))

    sure, seen = set(), set()
    for e in body.eqns:
        if e.primitive.name != "get" or not _cp_async_sized(e):
            continue
        # the same tile read twice is one load once MLIR folds the copies (CSE): counted once
        key = (id(e.invars[0]), tuple(expr(v) for v in e.invars[1:]), repr(e.params))
        (use, *more) = uses.get(id(e.outvars[0]), [(None, -1)])
        if key not in seen and not more and use[0] is not None and use[0].primitive.name == "dot_general" and use[1] in (0, 1):
            sure.add(id(e))
            seen.add(key)
    return sure


def triton_body(kernel, names: dict[int, str]) -> TritonBody:
    """The facts of ``kernel`` (a pallas_call's kernel jaxpr); ``names``: id of a ref var -> its name."""
    loads: list[TritonLoad] = []
    computed = largest = 0

    def walk(jaxpr, in_loop: bool, sure: set[int], names: dict[int, str]) -> None:
        nonlocal computed, largest
        used = {id(v) for e in jaxpr.eqns for v in e.invars} | {id(v) for v in jaxpr.outvars}
        read = {id(e.outvars[0]) for e in jaxpr.eqns if _reads(e, used)}
        for e in jaxpr.eqns:
            prim = e.primitive.name
            for v in e.outvars:
                if getattr(v.aval, "shape", ()) and hasattr(v.aval, "dtype") and not _is_ref(v.aval):
                    largest = max(largest, bytes_of(v.aval))
            if e.outvars and id(e.outvars[0]) in read:
                tile = e.outvars[0].aval
                loads.append(TritonLoad(names.get(id(e.invars[0]), "a ref"), tuple(int(d) for d in tile.shape),
                                        str(tile.dtype), bytes_of(tile), in_loop, id(e) in sure))
            elif prim == "dot_general":
                computed += sum(bytes_of(v.aval) for v in e.invars[:2] if id(v) not in read)
            inner_sure = _surely_pipelined(e) if prim == "scan" else set()
            for sub in _subjaxprs(e):
                # a sub-jaxpr's inputs are the equation's last operands (cond's index, while's
                # cond consts come first): their names carry over
                offset = len(e.invars) - len(sub.invars)
                inner = {id(sv): names[id(v)] for sv, v in zip(sub.invars, e.invars[max(offset, 0):]) if id(v) in names}
                walk(sub, in_loop or prim in _LOOPS, inner_sure, inner)

    walk(kernel, False, set(), names)
    return TritonBody(loads=tuple(loads), computed_operand_bytes=computed, largest_value_bytes=largest)
