"""Which matmul results a Pallas TPU kernel body holds in VMEM (measured with libtpu 0.0.42.1 on
1,005 deviceless compiles: BENCHMARKS.md, "The VMEM estimate against libtpu").

- A dot result a reduction must see whole before it is used whole (softmax's scores: max(s), then
  exp(s - max)) is held: libtpu's VMEM beyond the blocks was 0.61x the largest such result, less
  the register file, or more in every compile that fit (maxdiffusion's cross attention on v6e, which
  sums its exponentials on the MXU); where the chain feeds a second reduction (the sum of the
  exponentials on the VPU), 1.05x or more in every such compile that fit (pallas/vmem_rules.py).
  A result only reduced, or only partly used after, need not be: a running max over 1024-wide
  score chunks took 0.33x of one chunk. One whose softmax is stored whole into an output block as
  wide is held too, though the chain ends in a ref that could hold it (PallasBench's qk-softmax,
  its q and k placed: 0.95-1.00x beside the block; the team's log-softmax of matmul
  scores 0.93-1.02x).
- A dot result only accumulated into a ref (``acc[...] += dot``) or stored streams: 0-0.46x.
- A loop unrolled into straight-line code (``scan`` with ``unroll``, as ``pl.loop(unroll=True)``
  gives) keeps its iterations' dot results live together: flash attention over a 4096-wide kv
  block in 1024-wide chunks needed about four chunks' scores at once. An unrolled loop without
  matmuls keeps its trips' values: sglang's biased top-k, 7 trips of a (256, 2048) f32 block.
- A value that element-wise ops carry into a store of its own size is built in that ref, not
  beside it, unless a reduction must see it whole on the way (a softmax, above): sglang's fused
  MLP kept nothing beyond the blocks.
- A (rows, 1) statistic (a row max or sum, a mean) takes one lane of rows / 8 vregs, as many as a
  (rows, 128) f32 value: flash attention with 128-wide kv blocks kept several of them, an RMSNorm
  none (pallas/vmem_rules.py, rule row_statistics).
"""
from __future__ import annotations

import types
from typing import Any

import ml_dtypes
import numpy as np

from ..base.pallas_model import BodyFacts, DotLowering
from .tracing import sub_jaxprs
from .value_chains import (ELEMENTWISE, NOT_VALUES, REDUCTIONS, REF_OPS, SAME_ARRAY, SAME_VALUE, TILE_ROWS, built_in_ref,
                           cast_of_block, element_count, feeds_only_matmuls, made_of_indices, meets_another_result,
                           mxu_operand, nbytes, only_reduced, producer_map, reduced_row_whole, reduced_then_used_whole,
                           streamed, streams_into_reductions, tile_bytes, tiled_bytes, user_map)



_JIT_CALLS = frozenset({"pjit", "jit", "closed_call"})


def _jit_body(eqn):
    """The body of a jitted helper's call (jnp.clip's, jnp.where's), when it can be inlined."""
    if eqn.primitive.name not in _JIT_CALLS:
        return None
    body = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    body = getattr(body, "jaxpr", body)
    if body is None or not hasattr(body, "eqns") or body.constvars or len(body.invars) != len(eqn.invars):
        return None
    return body


def _inlined(jaxpr: Any) -> Any:
    """The jaxpr with each jitted helper's equations in place of its call, each call's values fresh
    (a helper called twice has one cached body): what a helper computes is then followed to where
    it goes, as Mosaic sees it (MaxKernel's Dense + clip + tanh: jnp.clip's
    result, stored whole into the output block, was counted as a value of its own). A reshard
    (what a trace for a TPU's abstract mesh puts on jnp.where's operands) is its operand: the CPU
    trace has none, and Mosaic sees the same value."""
    if not any(_jit_body(e) is not None or e.primitive.name in SAME_ARRAY for e in jaxpr.eqns):
        return jaxpr
    eqns: list = []

    def inline(j, env: dict, fresh: bool) -> list:
        for e in j.eqns:
            ins = [env.get(id(v), v) for v in e.invars]
            if e.primitive.name in SAME_ARRAY and len(ins) == len(e.outvars) == 1:
                env[id(e.outvars[0])] = ins[0]
                continue
            body = _jit_body(e)
            if body is not None:
                outs = inline(body, {id(a): b for a, b in zip(body.invars, ins)}, True)
                env.update((id(o), r) for o, r in zip(e.outvars, outs))
                continue
            outs = [types.SimpleNamespace(aval=o.aval) for o in e.outvars] if fresh else list(e.outvars)
            env.update((id(o), r) for o, r in zip(e.outvars, outs))
            eqns.append(types.SimpleNamespace(primitive=e.primitive, params=e.params, invars=ins, outvars=outs))
        return [env.get(id(v), v) for v in j.outvars]

    outvars = inline(jaxpr, {}, False)
    return types.SimpleNamespace(eqns=eqns, invars=jaxpr.invars, outvars=outvars, constvars=jaxpr.constvars)


def _transposed_operand(eqn, users) -> bool:
    """A transpose only matmuls read: the MXU takes the operand transposed, no copy is built
    (MaxKernel's Dense + SiLU: ``x @ w_ref[...].T`` with a 4 MiB weight, libtpu
    needed only the blocks)."""
    if eqn.primitive.name != "transpose":
        return False
    uses = users.get(id(eqn.outvars[0]), [])
    return bool(uses) and all(u is not None and u.primitive.name == "dot_general" for u in uses)


def _statistic_bytes(var) -> int:
    """A (rows, 1) value's vreg tiles: one lane of each (a row max, a sum, a mean or a variance), as
    many vregs as a (rows, 128) f32 value; 0 for any other shape."""
    shape = tuple(getattr(getattr(var, "aval", None), "shape", ()))
    return tiled_bytes(var) if shape[1:] == (1,) and len(shape) == 2 and shape[0] >= TILE_ROWS else 0


def _row_reduction_bytes(eqn) -> int:
    """A reduction of a 2-D value along its rows (a row sum, max or min: (rows, d) to (rows,)): its
    result's bytes as a (rows, 1) statistic in vreg tiles; 0 for any other equation."""
    if eqn.primitive.name not in REDUCTIONS or not eqn.invars or len(eqn.outvars) != 1:
        return 0
    shape = tuple(getattr(getattr(eqn.invars[0], "aval", None), "shape", ()))
    if len(shape) != 2 or tuple(eqn.params.get("axes", ())) != (1,) or shape[0] < TILE_ROWS:
        return 0
    return tile_bytes(shape[0], 1, np.dtype(eqn.outvars[0].aval.dtype).itemsize)


def _unroll(eqn) -> int:
    if eqn.primitive.name != "scan":
        return 1
    length = int(eqn.params.get("length", 1))
    unroll = eqn.params.get("unroll", 1)
    return length if unroll is True else max(1, min(int(unroll), length))


def _largest_value(jaxpr) -> int:
    sizes = [nbytes(v) for e in jaxpr.eqns if e.primitive.name not in NOT_VALUES for v in e.outvars
             if getattr(v.aval, "shape", None)]
    return max(sizes + [_largest_value(sub) for e in jaxpr.eqns for sub in sub_jaxprs(e.params)], default=0)


def _of_parts(eqn, parts: set[int]) -> bool:
    """A concatenation, or an element-wise op (or a reshape) of one of the same size."""
    name = eqn.primitive.name
    if name in ("concatenate", "stack"):  # jnp.stack is a primitive of its own in jax 0.10
        return True
    if name not in ELEMENTWISE | SAME_VALUE - {"pjit", "jit"} or len(eqn.outvars) != 1:
        return False
    size = element_count(eqn.outvars[0])
    return any(id(v) in parts and element_count(v) == size for v in eqn.invars)


def _computed_operand_bytes(dot, jaxpr) -> int:
    """The bytes of a matmul's operands the body computes (RoPE's rotation), which the MXU needs
    whole beside its result; not a block read as it is, or only cast, transposed or reshaped on the
    way (maxtext's ragged attention casts its bf16 k block to f32: libtpu held no copy of it)."""
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    total = 0
    for operand in dot.invars[:2]:
        v = operand
        while (e := producers.get(id(v))) is not None and \
                e.primitive.name in SAME_VALUE | {"transpose", "convert_element_type"}:
            v = e.invars[0]
        e = producers.get(id(v))
        if e is not None and e.primitive.name not in REF_OPS:
            total += nbytes(operand)
    return total


def _split_bytes(dot) -> int:
    """A matmul of f32 operands at HIGHEST precision runs as bf16 passes over each operand's three
    bf16 parts: 1.5x the operands' bytes (TPU7x kept about that beyond the blocks: rule split_f32_operands)."""
    lhs, rhs = dot.invars[:2]
    if "HIGHEST" not in str(dot.params.get("precision")) or \
            any(getattr(v.aval, "dtype", None) != np.float32 for v in (lhs, rhs)):
        return 0
    return 3 * (nbytes(lhs) + nbytes(rhs)) // 2


def _has_f8_operand(dot) -> bool:
    return any(np.dtype(v.aval.dtype).name.startswith("float8") for v in dot.invars[:2])


def _mxu_operand_bytes(dot, f8_as_bf16: bool = False) -> int:
    """A matmul's two operands in vreg tiles as the MXU takes them; with ``f8_as_bf16``, 8-bit
    float operands as bf16, which Mosaic converts them to on a chip whose MXU does not take fp8.
    The matmul's lowering holds these operand vregs across its passes over the other operand;
    what the 64 registers cannot hold, the register allocator spills into VMEM."""
    total = 0
    for v in dot.invars[:2]:
        size = nbytes(v)
        dtype = np.dtype(v.aval.dtype)
        if f8_as_bf16 and dtype.name.startswith("float8"):
            size = nbytes(types.SimpleNamespace(aval=types.SimpleNamespace(shape=v.aval.shape, dtype=ml_dtypes.bfloat16)))
        total += size
    return total


def _as_dtype(v, dtype) -> Any:
    return types.SimpleNamespace(aval=types.SimpleNamespace(shape=v.aval.shape, dtype=dtype))


def _read_from_block(var, producers: dict) -> bool:
    """A matmul operand read from its block as it is, through reshapes and transposes alone (the MXU
    takes an operand transposed: _transposed_operand)."""
    source = producers.get(id(var))
    while source is not None and source.primitive.name in SAME_VALUE | {"transpose"} and source.invars:
        source = producers.get(id(source.invars[0]))
    return source is not None and source.primitive.name in REF_OPS


def _kind(dtype) -> str:
    return "float8" if dtype.name.startswith("float8") else \
        "int8" if dtype.itemsize == 1 and np.issubdtype(dtype, np.integer) else ""


def _lowering(dot, producers: dict) -> DotLowering:
    """What a matmul's lowering may hold in the vector registers. A packed lhs (bf16, 8-bit) is laid
    out anew for the MXU (vreg pairs combined: vcombine on v6e and TPU7x, vor on v5e and v5p, vpack on
    v4) and those vregs are held across the passes over the rhs's tiles; so is a 32-bit lhs the body
    computes (EasyDeL's matmul casts its bf16 blocks to f32: 9.84 MiB beyond the blocks on v6e at
    (2048, 1024) x (1024, 1024)); a 32-bit lhs read from its block as it is is read again from there.
    The rhs is latched into the MXU tile by tile from its block; one the body computes (a weight cast
    or dequantized) exists only in vregs, and an 8-bit one is converted there where the MXU does not
    take it. The result's partial sums are held in 32 bits across the passes over the contracted
    dimension. What the registers cannot hold, the register allocator spills into scoped VMEM
    (libtpu 0.0.42.1's register pressure and spill slots: tests/test_vmem_quantized_matmul.py)."""
    lhs, rhs, out = dot.invars[0], dot.invars[1], dot.outvars[0]
    ldtype, rdtype = np.dtype(lhs.aval.dtype), np.dtype(rhs.aval.dtype)
    held = nbytes(lhs) if ldtype.itemsize < 4 or not _read_from_block(lhs, producers) else 0
    lkind, rkind = _kind(ldtype), _kind(rdtype)
    rhs_held = 0 if _read_from_block(rhs, producers) else nbytes(rhs)
    shape = [int(d) for d in out.aval.shape] or [1]
    return DotLowering(lhs=held, lhs_as_bf16=nbytes(_as_dtype(lhs, ml_dtypes.bfloat16)) if lkind else held,
                       lhs_kind=lkind, rows=int(np.prod(shape[:-1])), cols=shape[-1], rhs=rhs_held,
                       rhs_as_bf16=nbytes(_as_dtype(rhs, ml_dtypes.bfloat16)) if rkind else rhs_held, rhs_kind=rkind)


class _Walk:
    """One walk over a body's jaxprs (nested ones too), gathering what BodyFacts holds."""

    def __init__(self) -> None:
        self.held = self.summed = self.summed_operands = self.values = self.largest = self.in_ref = 0
        self.split = self.carry = self.met = self.reduced_row = self.stored = self.operands = self.operands_f8 = 0
        self.lowerings: set[DotLowering] = set()
        self.operand_chain = 0  # the largest value computed only for a matmul operand
        self.unbuilt: list[int] = []  # per stretch of straight-line code, the results not built in a ref
        self.stretches: list[int] = []  # per stretch, the matmul results it computes
        self.computed = [0, 0]  # the two largest values computed element-wise
        self.whole = 0  # the largest of them that does not stream into reductions, nor is made of indices
        self.statistics: dict[int, int] = {}  # size in tiles: how many of that size
        self.row_reductions: dict[int, int] = {}  # the same, of reductions along rows (_row_reduction_bytes)
        self.row_lanes: dict[int, int] = {}  # the widest value each size's reductions along rows reduce
        # per jaxpr, by id, with the jaxpr itself: a jaxpr the walk made and dropped must not lend
        # its id, and so its map, to another
        self._users: dict[int, tuple[object, dict]] = {}
        self._producers: dict[int, tuple[object, dict]] = {}

    def users_of(self, j) -> dict:
        if id(j) not in self._users:
            self._users[id(j)] = (j, user_map(j))
        return self._users[id(j)][1]

    def producers_of(self, j) -> dict:
        if id(j) not in self._producers:
            self._producers[id(j)] = (j, producer_map(j))
        return self._producers[id(j)][1]

    def walk(self, j) -> tuple[int, int]:
        """The matmul results one stretch computes, and of those the ones not built in a ref."""
        j = _inlined(j)
        users = self.users_of(j)
        here = loose = 0
        parts: set[int] = set()  # values that are a concatenation's parts (NOT_VALUES)
        for e in j.eqns:
            self._statistics(e)
            if _of_parts(e, parts):
                parts.update(id(v) for v in e.outvars)
            elif e.primitive.name not in NOT_VALUES and not _transposed_operand(e, users):
                for v in e.outvars:
                    if getattr(v.aval, "shape", None) and not only_reduced(v, j, self.users_of):
                        self._value(e, v, j)
            if e.primitive.name == "dot_general":
                size, unbuilt = self._dot(e, j, users)
                here, loose = here + size, loose + unbuilt
            times = _unroll(e)
            if times == 1 and e.primitive.name in ("scan", "while"):
                carries = e.outvars[:int(e.params.get("num_carry", len(e.outvars)))]
                self.carry = max(self.carry, sum(tiled_bytes(v) for v in carries if getattr(v.aval, "shape", ())))
            for sub in sub_jaxprs(e.params):
                inner, inner_loose = self.walk(sub)
                if times > 1:
                    here += inner * times
                    loose += inner_loose * times
                    if not inner:  # a loop of matmuls is counted by its results (above)
                        self.values = max(self.values, _largest_value(sub) * times)
        self.stretches.append(here)
        self.unbuilt.append(loose)
        return here, loose

    def _statistics(self, e) -> None:
        if e.primitive.name not in NOT_VALUES:
            for v in e.outvars:
                if size := _statistic_bytes(v):
                    self.statistics[size] = self.statistics.get(size, 0) + 1
        if size := _row_reduction_bytes(e):
            self.row_reductions[size] = self.row_reductions.get(size, 0) + 1
            self.row_lanes[size] = max(self.row_lanes.get(size, 0), int(e.invars[0].aval.shape[1]))

    def _value(self, e, v, j) -> None:
        """A value the body builds: in the ref it is stored into, or beside it; not one element-wise
        ops make only for a matmul's operands (value_chains.feeds_only_matmuls)."""
        size = nbytes(v)
        if feeds_only_matmuls(e, v, j, self.users_of, self.producers_of):
            self.operand_chain = max(self.operand_chain, size)
            return
        if built_in_ref(v, j, self.users_of):
            self.in_ref = max(self.in_ref, size)
            if e.primitive.name != "dot_general" and reduced_row_whole(v, j, self.users_of):
                self.reduced_row = max(self.reduced_row, size)
            return
        self.largest = max(self.largest, size)
        if e.primitive.name != "dot_general":
            self.computed[:] = sorted(self.computed + [size], reverse=True)[:2]
            if not streams_into_reductions(e, v, j, self.users_of) and \
                    not made_of_indices(v, self.producers_of(j)) and not cast_of_block(v, self.producers_of(j)):
                operand = mxu_operand(v, j, self.users_of)  # on its way to the MXU: whole as it reaches it
                self.whole = max(self.whole, size if operand is None else nbytes(operand))

    def _dot(self, e, j, users) -> tuple[int, int]:
        """A matmul: its result's bytes where it is not streamed into a ref, and again where it is not built in one."""
        self.split += _split_bytes(e)
        self.operands = max(self.operands, _mxu_operand_bytes(e))
        if _has_f8_operand(e):
            self.operands_f8 = max(self.operands_f8, _mxu_operand_bytes(e, f8_as_bf16=True))
        self.lowerings.add(_lowering(e, self.producers_of(j)))
        out, size = e.outvars[0], nbytes(e.outvars[0])
        if streamed(out, users):
            return 0, 0
        loose = 0
        if meets_another_result(out, j, self.users_of):
            loose, self.met = size, max(self.met, size)
        elif not built_in_ref(out, j, self.users_of, unreduced=True):
            loose = size
        reductions = reduced_then_used_whole(out, j, self.users_of)
        if reductions:
            self.held = max(self.held, size)
        if reductions > 1 and size >= self.summed:
            self.summed, self.summed_operands = size, _computed_operand_bytes(e, j)
        if reduced_then_used_whole(out, j, self.users_of, stored=True):
            self.stored = max(self.stored, size)
        return size, loose

    def facts(self) -> BodyFacts:
        statistic = max(self.statistics, default=0)
        return BodyFacts(held_bytes=self.held, unrolled_bytes=max(self.stretches, default=0),
                         unrolled_values_bytes=self.values, largest_value_bytes=self.largest,
                         computed_value_bytes=self.whole, second_computed_bytes=self.computed[1],
                         split_operand_bytes=self.split, mxu_operand_bytes=self.operands,
                         mxu_operand_f8_bf16_bytes=self.operands_f8,
                         dot_lowerings=tuple(sorted(self.lowerings)), operand_chain_bytes=self.operand_chain,
                         in_ref_bytes=self.in_ref,
                         summed_bytes=self.summed, stored_held_bytes=self.stored,
                         summed_operand_bytes=self.summed_operands, loop_carry_bytes=self.carry,
                         unrolled_unbuilt_bytes=max(self.unbuilt, default=0), met_bytes=self.met,
                         statistic_bytes=statistic, statistic_count=self.statistics.get(statistic, 0),
                         statistic_reductions=self.row_reductions.get(statistic, 0),
                         statistic_lanes=self.row_lanes.get(statistic, 0), reduced_row_bytes=self.reduced_row)


def body_dots(jaxpr) -> BodyFacts:
    """What a kernel body holds in VMEM beside its blocks (the module's docstring)."""
    walk = _Walk()
    walk.walk(jaxpr)
    return walk.facts()
