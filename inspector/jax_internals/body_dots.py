"""Which matmul results a Pallas TPU kernel body holds in VMEM (measured with libtpu 0.0.42.1 on
1,005 deviceless compiles: BENCHMARKS.md, "The VMEM estimate against libtpu").

- A dot result a reduction must see whole before it is used whole (softmax's scores: max(s), then
  exp(s - max)) is held: libtpu's VMEM beyond the blocks was 0.61x the largest such result, less
  the register file, or more in every compile that fit (maxdiffusion's cross attention on v6e, which
  sums its exponentials on the MXU); where the chain feeds a second reduction (the sum of the
  exponentials on the VPU), 1.05x or more in every such compile that fit (vmem.py).
  A result only reduced, or only partly used after, need not be: a running max over 1024-wide
  score chunks took 0.33x of one chunk. One whose softmax is stored whole into an output block as
  wide is held too, though the chain ends in a ref that could hold it (PallasBench's qk-softmax,
  held out, its q and k placed: 0.95-1.00x beside the block; the team's log-softmax of matmul
  scores 0.93-1.02x).
- A dot result only accumulated into a ref (``acc[...] += dot``) or stored streams: 0-0.46x.
- A loop unrolled into straight-line code (``scan`` with ``unroll``, as ``pl.loop(unroll=True)``
  gives) keeps its iterations' dot results live together: flash attention over a 4096-wide kv
  block in 1024-wide chunks needed about four chunks' scores at once. An unrolled loop without
  matmuls keeps its trips' values: sglang's biased top-k, 7 trips of a (256, 2048) f32 block.
- A value that element-wise ops carry into a store of its own size is built in that ref, not
  beside it, unless a reduction must see it whole on the way (a softmax, above): sglang's fused
  MLP kept nothing beyond the blocks (held out, round three).
- A (rows, 1) statistic (a row max or sum, a mean) takes one lane of rows / 8 vregs, as many as a
  (rows, 128) f32 value: flash attention with 128-wide kv blocks kept several of them, an RMSNorm
  none (vmem.STATISTICS_ROOM_SHARE).
"""
from __future__ import annotations

import math
import types
from typing import Any

import ml_dtypes
import numpy as np

from ..pallas.model import BodyFacts
from .tracing import sub_jaxprs

_STORES = frozenset({"swap", "store", "masked_swap"})
_REDUCTIONS = frozenset({"reduce_max", "reduce_min", "reduce_sum", "argmax", "argmin"})
# ops that go element by element: a chain of them carries the whole value on
_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "max", "min", "neg", "exp", "exp2", "log", "tanh", "logistic",
                          "convert_element_type", "select_n", "abs", "sqrt", "rsqrt", "integer_pow", "square"})
_REF_OPS = _STORES | {"get", "load", "masked_load"}
# what a chain that streams into reductions may pass through (_streams_into_reductions)
_STREAMING = _ELEMENTWISE | {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "broadcast_in_dim"}
# not a value of its own: a concatenation (or a stack) is its parts, whose vregs Mosaic lays side by
# side, and so is what element-wise ops make of it, vreg by vreg (jaxite's Toeplitz matrix, 64 MiB
# concatenated from 2 MiB chunks and cast to bf16 for a matmul: libtpu used 10 MiB; xma's causal
# conv, 4 rolled copies of its block stacked, weighted and summed: libtpu used nothing beyond the blocks)
_NOT_VALUES = _REF_OPS | {"concatenate", "stack"}
_SAME_ARRAY = frozenset({"reshard"})  # annotations of an array's sharding, no op of their own (_inlined)
_SAME_VALUE = frozenset({"pjit", "jit", "reshape", "broadcast_in_dim", "squeeze", "expand_dims"})


def _tiled_bytes(var) -> int:
    """A 2-D value in its (8 x packing, 128) vreg tiles, uncapped (a (rows, 1) statistic: 512 bytes
    a row); other ranks as _nbytes."""
    shape = [int(d) for d in getattr(var.aval, "shape", ())]
    if len(shape) != 2:
        return _nbytes(var)
    rows, cols = shape
    return _tile_bytes(rows, cols, np.dtype(var.aval.dtype).itemsize)


def _tile_bytes(rows: int, cols: int, itemsize: int) -> int:
    """A (rows, cols) value's bytes in (8 x packing, 128) vreg tiles of 4 KiB."""
    return -(-rows // (8 * max(1, 4 // itemsize))) * -(-cols // 128) * 4096


def _nbytes(var) -> int:
    """A value's bytes in the vector registers, or in VMEM where it spills: its two minor dims in
    (8 x packing, 128) tiles of 4 KiB, so a (rows, 64) f32 value takes twice its elements' bytes
    (flax's LayerNorm at dim 64 needed 47.69 MiB on v6e where its values' elements are 16 MiB
    each: held out, round eight). Never more than twice: tpu-inference's RoPE gathers with
    (128, 8, 128, 1) int32 indices, 0.5 MiB of elements and 64 MiB of tiles, which Mosaic never
    lays out whole (the kernel fits 64 MiB on TPU7x)."""
    aval = var.aval
    try:
        size = np.dtype(aval.dtype).itemsize
        shape = [int(d) for d in aval.shape]
    except TypeError:
        return 0
    elements = int(math.prod(shape)) * size
    if len(shape) < 2:
        return elements
    rows = 8 * max(1, 4 // size)
    return min(int(math.prod(shape[:-2])) * -(-shape[-2] // rows) * -(-shape[-1] // 128) * 4096, 2 * elements)


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
    it goes, as Mosaic sees it (MaxKernel's Dense + clip + tanh, held out round ten: jnp.clip's
    result, stored whole into the output block, was counted as a value of its own). A reshard
    (what a trace for a TPU's abstract mesh puts on jnp.where's operands) is its operand: the CPU
    trace has none, and Mosaic sees the same value."""
    if not any(_jit_body(e) is not None or e.primitive.name in _SAME_ARRAY for e in jaxpr.eqns):
        return jaxpr
    eqns: list = []

    def inline(j, env: dict, fresh: bool) -> list:
        for e in j.eqns:
            ins = [env.get(id(v), v) for v in e.invars]
            if e.primitive.name in _SAME_ARRAY and len(ins) == len(e.outvars) == 1:
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
    (MaxKernel's Dense + SiLU, held out round ten: ``x @ w_ref[...].T`` with a 4 MiB weight, libtpu
    needed only the blocks)."""
    if eqn.primitive.name != "transpose":
        return False
    uses = users.get(id(eqn.outvars[0]), [])
    return bool(uses) and all(u is not None and u.primitive.name == "dot_general" for u in uses)


def _users(jaxpr) -> dict[int, list]:
    users: dict[int, list] = {}
    for e in jaxpr.eqns:
        for v in e.invars:
            if not hasattr(v, "val"):  # literals are not values of the body
                users.setdefault(id(v), []).append(e)
    for v in jaxpr.outvars:
        users.setdefault(id(v), []).append(None)  # leaves this jaxpr: used somewhere we do not follow
    return users


def _streamed(out, users) -> bool:
    """Only stored into a ref, or added (or cast) once on the way there."""
    for _ in range(3):
        uses = users.get(id(out), [])
        if len(uses) != 1 or uses[0] is None:
            return False
        if uses[0].primitive.name in _STORES:
            return True
        if uses[0].primitive.name not in ("add", "convert_element_type"):
            return False
        out = uses[0].outvars[0]
    return False


def _uses(var, jaxpr, users_of) -> list:
    """The equations that read ``var``, looking into cond branches (pl.when) for those that read it there."""
    found = []
    for e in users_of(jaxpr).get(id(var), []):
        if e is None:
            continue
        name = e.primitive.name
        subs = sub_jaxprs(e.params)
        if name == "cond" and subs:
            args = list(e.invars[1:])
            for sub in subs:
                if len(sub.invars) == len(args):
                    for a, inner in zip(args, sub.invars):
                        if a is var:
                            found += [(u, j) for u, j in _uses(inner, sub, users_of)]
            continue
        found.append((e, jaxpr))
    return found


def _elements(var) -> int | None:
    shape = getattr(getattr(var, "aval", None), "shape", None)
    return None if shape is None else int(math.prod(shape))


def _stored_elements(store) -> int | None:
    return _elements(store.invars[1]) if len(store.invars) > 1 else None  # swap / store: ref, value, indices...


def _in_chain(use, size) -> bool:
    """An element-wise op (or a reshape, a jitted helper) that makes a value of ``size`` elements."""
    return use.primitive.name in _ELEMENTWISE | _SAME_VALUE and len(use.outvars) == 1 and \
        _elements(use.outvars[0]) == size


def _chain_uses(var, jaxpr, users_of, steps: int, once: bool = False):
    """Each value element-wise ops of its size make of ``var``, level by level for ``steps``
    levels (``var`` the first), with the equations that read it; ``once``: each value once."""
    size, frontier, seen = _elements(var), [(var, jaxpr)], {id(var)}
    for _ in range(steps):
        nxt = []
        for v, j in frontier:
            uses = _uses(v, j, users_of)
            yield v, uses
            for u, jj in uses:
                if _in_chain(u, size) and not (once and id(u.outvars[0]) in seen):
                    seen.add(id(u.outvars[0]))
                    nxt.append((u.outvars[0], jj))
        frontier = nxt


def _reduced_then_used_whole(var, jaxpr, users_of, stored: bool = False) -> int:
    """Softmax's pattern: the value (through element-wise ops) feeds a reduction and an element-wise
    op of its own size, which cannot start before the reduction has seen all of it; unless the
    chain stores a value of that size whole, into an output block it can be built in (with
    ``stored``, only where it does). How many reductions the chain feeds (softmax's max, and the sum
    of its exponentials), 0 without the pattern."""
    if _built_in_ref(var, jaxpr, users_of) != stored:
        return 0
    size, pattern, reductions = _elements(var), False, 0
    for _, uses in _chain_uses(var, jaxpr, users_of, 8):  # how far down the chain the pattern is looked for
        # a jitted helper (jnp.where's) counts as one element-wise op, a reshape or broadcast of
        # size-1 dims (jnp.matmul on 3-D values) as none
        pattern |= any(u.primitive.name in _ELEMENTWISE and _in_chain(u, size) for u, _ in uses) and \
            any(u.primitive.name in _REDUCTIONS for u, _ in uses)
        reductions += sum(u.primitive.name in _REDUCTIONS for u, _ in uses)
    return reductions if pattern else 0


def _built_in_ref(var, jaxpr, users_of, unreduced: bool = False) -> bool:
    """Whether element-wise ops of its size carry the value into a store of that size: Mosaic can
    build it in that ref (an output block, an accumulator) instead of a VMEM temporary of its own;
    with ``unreduced``, only where no reduction reads the chain on the way.
    A chain that a reduction must see whole first (a softmax's exponentials, summed, then divided)
    is built there only in a ref as wide as the value: AMLeng's softmax, f32 exponentials stored as
    bf16, took one f32 copy of its block beyond the blocks (held out, round eight: 23.8 MiB where
    16 are blocks on v5e); an accumulator cast on its way out streams (sglang's fused MLP)."""
    size, reduced = _elements(var), False
    for _, uses in _chain_uses(var, jaxpr, users_of, 10):  # how far down the chain the store is looked for
        reduced |= any(u.primitive.name in _REDUCTIONS for u, _ in uses)
        if reduced and unreduced:
            return False
        if any(u.primitive.name in _STORES and _stored_elements(u) == size and
               (not reduced or _nbytes(u.invars[1]) >= _nbytes(var)) for u, _ in uses):
            return True
    return False


def _reduced_row(var, jaxpr, users_of) -> bool:
    """A value computed element-wise, wider than one vreg's 128 lanes, that a reduction must see
    whole before the chain that stores it goes on (x - mean, then its variance; exp(x - max), then its
    sum). Mosaic builds a one-vreg-wide one in its ref as it goes (tests/data/row_reductions.py's
    shifted_square at 128 lanes: nothing beyond the blocks), not a wider one: at 256 to 2048 lanes
    libtpu kept 0.36-1.44x of it beyond the blocks (less as it grows: 2.1-2.2 MiB of shifted_square's
    4 and 6 MiB at 1024 lanes), so it is room a "fits" leaves, not certain."""
    shape = tuple(getattr(getattr(var, "aval", None), "shape", ()))
    return bool(shape) and shape[-1] > 128 and not _built_in_ref(var, jaxpr, users_of, unreduced=True)


def _chain(var, jaxpr, users_of) -> set[int]:
    """The values element-wise ops of its size make of ``var``, as far as _built_in_ref looks."""
    return {id(v) for v, _ in _chain_uses(var, jaxpr, users_of, 11, once=True)}


def _meets_another_result(var, jaxpr, users_of) -> bool:
    """Whether the chain of a matmul result meets another's (SwiGLU's silu(x @ w1) * (x @ w3)): only
    one of them can be built in the output block, the other is whole beside it (pallas-forge's
    SwiGLU and GeGLU, held out round eleven: libtpu kept 0.92-2.03 results beyond the blocks, where
    both were taken as built in the ref)."""
    own = _chain(var, jaxpr, users_of)
    return any(e.primitive.name == "dot_general" and e.outvars[0] is not var and
               own & _chain(e.outvars[0], jaxpr, users_of) for e in jaxpr.eqns)


def _only_reduced(var, jaxpr, users_of) -> bool:
    """A value only reductions read streams into them, vreg by vreg: LayerNorm's squared
    deviations, summed for the variance (flax's, held out round eight, kept 2.44 MiB beside its
    blocks where that (1024, 1024) f32 value is 4)."""
    uses = _uses(var, jaxpr, users_of)
    return bool(uses) and all(u.primitive.name in _REDUCTIONS for u, _ in uses) and \
        len(uses) == len(users_of(jaxpr).get(id(var), []))


def _streams_into_reductions(eqn, var, jaxpr, users_of) -> bool:
    """A value an element-wise op, an iota or a tile makes whose chain of element-wise ops of its
    size ends only in reductions streams into them vreg by vreg, whole nowhere: a cross-entropy's
    masked label logits, its tiled row max and the exponentials of logits read from a scratch ref,
    each summed (tests/data/second_values.py's ce_lse and ce_tiled kept 0.10-0.66 of one (b, v) f32
    value beyond their blocks and scratch, where counting one certain said "does not fit" of four
    compiles that fit). Not a value the chain also stores, nor one a reduction sees before another
    op goes on with it (a log-softmax's block and shifted logits, kept whole)."""
    if eqn.primitive.name not in _STREAMING | {"iota", "tile"}:
        return False
    size, frontier, seen, ended = _elements(var), [(var, jaxpr)], {id(var)}, False
    while frontier:
        v, j = frontier.pop()
        if None in users_of(j).get(id(v), [None]):  # an output of its jaxpr, or read by nothing
            return False
        uses = _uses(v, j, users_of)
        if len(uses) > 1 and any(u.primitive.name in _REDUCTIONS for u, _ in uses):
            return False  # a reduction sees it before another op goes on with it: whole
        for u, jj in uses:
            if u.primitive.name in _REDUCTIONS:
                ended = True
            elif u.primitive.name in _STREAMING | {"pjit", "jit"} and len(u.outvars) == 1 and \
                    _elements(u.outvars[0]) == size:
                if id(u.outvars[0]) not in seen:
                    seen.add(id(u.outvars[0]))
                    frontier.append((u.outvars[0], jj))
            else:
                return False
    return ended


def _statistic_bytes(var) -> int:
    """A (rows, 1) value's vreg tiles: one lane of each (a row max, a sum, a mean or a variance), as
    many vregs as a (rows, 128) f32 value; 0 for any other shape."""
    shape = tuple(getattr(getattr(var, "aval", None), "shape", ()))
    return _tiled_bytes(var) if shape[1:] == (1,) and len(shape) == 2 and shape[0] >= 8 else 0


def _row_reduction_bytes(eqn) -> int:
    """A reduction of a 2-D value along its rows (a row sum, max or min: (rows, d) to (rows,)): its
    result's bytes as a (rows, 1) statistic in vreg tiles; 0 for any other equation."""
    if eqn.primitive.name not in _REDUCTIONS or not eqn.invars or len(eqn.outvars) != 1:
        return 0
    shape = tuple(getattr(getattr(eqn.invars[0], "aval", None), "shape", ()))
    if len(shape) != 2 or tuple(eqn.params.get("axes", ())) != (1,) or shape[0] < 8:
        return 0
    return _tile_bytes(shape[0], 1, np.dtype(eqn.outvars[0].aval.dtype).itemsize)


def _unroll(eqn) -> int:
    if eqn.primitive.name != "scan":
        return 1
    length = int(eqn.params.get("length", 1))
    unroll = eqn.params.get("unroll", 1)
    return length if unroll is True else max(1, min(int(unroll), length))


def _largest_value(jaxpr) -> int:
    sizes = [_nbytes(v) for e in jaxpr.eqns if e.primitive.name not in _NOT_VALUES for v in e.outvars
             if getattr(v.aval, "shape", None)]
    return max(sizes + [_largest_value(sub) for e in jaxpr.eqns for sub in sub_jaxprs(e.params)], default=0)


def _of_parts(eqn, parts: set[int]) -> bool:
    """A concatenation, or an element-wise op (or a reshape) of one of the same size."""
    name = eqn.primitive.name
    if name in ("concatenate", "stack"):  # jnp.stack is a primitive of its own in jax 0.10
        return True
    if name not in _ELEMENTWISE | _SAME_VALUE - {"pjit", "jit"} or len(eqn.outvars) != 1:
        return False
    size = _elements(eqn.outvars[0])
    return any(id(v) in parts and _elements(v) == size for v in eqn.invars)


def _computed_operand_bytes(dot, jaxpr) -> int:
    """The bytes of a matmul's operands the body computes (RoPE's rotation), which the MXU needs
    whole beside its result; not a block read as it is, or only cast, transposed or reshaped on the
    way (maxtext's ragged attention casts its bf16 k block to f32: libtpu held no copy of it)."""
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    total = 0
    for operand in dot.invars[:2]:
        v = operand
        while (e := producers.get(id(v))) is not None and \
                e.primitive.name in _SAME_VALUE | {"transpose", "convert_element_type"}:
            v = e.invars[0]
        e = producers.get(id(v))
        if e is not None and e.primitive.name not in _REF_OPS:
            total += _nbytes(operand)
    return total


def _split_bytes(dot) -> int:
    """A matmul of f32 operands at HIGHEST precision runs as bf16 passes over each operand's three
    bf16 parts: 1.5x the operands' bytes (TPU7x kept about that beyond the blocks: vmem.py)."""
    lhs, rhs = dot.invars[:2]
    if "HIGHEST" not in str(dot.params.get("precision")) or \
            any(getattr(v.aval, "dtype", None) != np.float32 for v in (lhs, rhs)):
        return 0
    return 3 * (_nbytes(lhs) + _nbytes(rhs)) // 2


def _has_f8_operand(dot) -> bool:
    return any(np.dtype(v.aval.dtype).name.startswith("float8") for v in dot.invars[:2])


def _mxu_operand_bytes(dot, f8_as_bf16: bool = False) -> int:
    """A matmul's two operands in vreg tiles as the MXU takes them; with ``f8_as_bf16``, 8-bit
    float operands as bf16, which Mosaic converts them to on a chip whose MXU does not take fp8.
    The matmul's lowering holds these operand vregs across its passes over the other operand;
    what the 64 registers cannot hold, the register allocator spills into VMEM."""
    total = 0
    for v in dot.invars[:2]:
        size = _nbytes(v)
        dtype = np.dtype(v.aval.dtype)
        if f8_as_bf16 and dtype.name.startswith("float8"):
            size = _nbytes(types.SimpleNamespace(aval=types.SimpleNamespace(shape=v.aval.shape, dtype=ml_dtypes.bfloat16)))
        total += size
    return total


def body_dots(jaxpr) -> BodyFacts:
    held = summed = summed_operands = values = largest = in_ref = split = carry = met = reduced_row = stored = 0
    operands = operands_f8 = 0
    unbuilt: list[int] = []  # per stretch, as stretches
    computed = [0, 0]  # the two largest values computed element-wise
    whole = 0  # the largest of them that does not stream into reductions
    stretches: list[int] = []
    cache: dict[int, dict] = {}
    statistics: dict[int, int] = {}  # size in tiles: how many of that size
    row_reductions: dict[int, int] = {}  # the same, of reductions along rows (_row_reduction_bytes)
    row_lanes: dict[int, int] = {}  # the widest value each size's reductions along rows reduce

    def users_of(j) -> dict:
        if id(j) not in cache:
            cache[id(j)] = _users(j)
        return cache[id(j)]

    def walk(j) -> tuple[int, int]:
        nonlocal held, summed, summed_operands, values, largest, in_ref, split, carry, met, reduced_row, whole, stored
        nonlocal operands, operands_f8
        j = _inlined(j)
        users = users_of(j)
        here = loose = 0
        parts: set[int] = set()  # values that are a concatenation's parts (above)
        for e in j.eqns:
            if e.primitive.name not in _NOT_VALUES:
                for v in e.outvars:
                    if size := _statistic_bytes(v):
                        statistics[size] = statistics.get(size, 0) + 1
            if size := _row_reduction_bytes(e):
                row_reductions[size] = row_reductions.get(size, 0) + 1
                row_lanes[size] = max(row_lanes.get(size, 0), int(e.invars[0].aval.shape[1]))
            if _of_parts(e, parts):
                parts.update(id(v) for v in e.outvars)
            elif e.primitive.name not in _NOT_VALUES and not _transposed_operand(e, users):
                for v in e.outvars:
                    if getattr(v.aval, "shape", None) and not _only_reduced(v, j, users_of):
                        if _built_in_ref(v, j, users_of):
                            in_ref = max(in_ref, _nbytes(v))
                            if e.primitive.name != "dot_general" and _reduced_row(v, j, users_of):
                                reduced_row = max(reduced_row, _nbytes(v))
                        else:
                            largest = max(largest, _nbytes(v))
                            if e.primitive.name != "dot_general":
                                computed[:] = sorted(computed + [_nbytes(v)], reverse=True)[:2]
                                if not _streams_into_reductions(e, v, j, users_of):
                                    whole = max(whole, _nbytes(v))
            if e.primitive.name == "dot_general":
                split += _split_bytes(e)
                operands = max(operands, _mxu_operand_bytes(e))
                if _has_f8_operand(e):
                    operands_f8 = max(operands_f8, _mxu_operand_bytes(e, f8_as_bf16=True))
                size = _nbytes(e.outvars[0])
                if not _streamed(e.outvars[0], users):
                    here += size
                    if _meets_another_result(e.outvars[0], j, users_of):
                        loose += size
                        met = max(met, size)
                    elif not _built_in_ref(e.outvars[0], j, users_of, unreduced=True):
                        loose += size
                    reductions = _reduced_then_used_whole(e.outvars[0], j, users_of)
                    if reductions:
                        held = max(held, size)
                    if reductions > 1 and size >= summed:
                        summed, summed_operands = size, _computed_operand_bytes(e, j)
                    if _reduced_then_used_whole(e.outvars[0], j, users_of, stored=True):
                        stored = max(stored, size)
            times = _unroll(e)
            if times == 1 and e.primitive.name in ("scan", "while"):
                carries = e.outvars[:int(e.params.get("num_carry", len(e.outvars)))]
                carry = max(carry, sum(_tiled_bytes(v) for v in carries if getattr(v.aval, "shape", ())))  # not the index
            for sub in sub_jaxprs(e.params):
                inner, inner_loose = walk(sub)
                if times > 1:
                    here += inner * times
                    loose += inner_loose * times
                    if not inner:  # a loop of matmuls is counted by its results (above)
                        values = max(values, _largest_value(sub) * times)
        stretches.append(here)
        unbuilt.append(loose)
        return here, loose

    walk(jaxpr)
    statistic = max(statistics, default=0)
    return BodyFacts(held_bytes=held, unrolled_bytes=max(stretches, default=0), unrolled_values_bytes=values,
                     largest_value_bytes=largest, computed_value_bytes=whole, second_computed_bytes=computed[1],
                     split_operand_bytes=split, mxu_operand_bytes=operands, mxu_operand_f8_bf16_bytes=operands_f8,
                     in_ref_bytes=in_ref, summed_bytes=summed, stored_held_bytes=stored,
                     summed_operand_bytes=summed_operands, loop_carry_bytes=carry,
                     unrolled_unbuilt_bytes=max(unbuilt, default=0), met_bytes=met, statistic_bytes=statistic,
                     statistic_count=statistics.get(statistic, 0),
                     statistic_reductions=row_reductions.get(statistic, 0),
                     statistic_lanes=row_lanes.get(statistic, 0), reduced_row_bytes=reduced_row)
