"""How a value in a Pallas TPU kernel body goes on: the element-wise chains it feeds, whether a
reduction must see it whole, whether it is built in the ref it is stored into, and its size in
(8 x packing, 128) vreg tiles: what jax_internals/body_dots.py reads a body's VMEM facts from.
"""
from __future__ import annotations

import math

import numpy as np

from .tracing import sub_jaxprs

# how far down a value's element-wise chain a softmax's pattern (a reduction beside an element-wise
# op of its size) is looked for, and a store of its size
PATTERN_LEVELS = 8
STORE_LEVELS = 10
STREAM_HOPS = 3  # adds or casts a value may pass on its way to a store and still stream into it
# a value's vreg tiles are counted up to this many times its elements' bytes: Mosaic never lays out
# whole a value its tiles would blow up more (tpu-inference's RoPE gather indices)
MOST_TILE_GROWTH = 2
# a vreg tile: 8 sublanes of 32-bit words (8 x packing rows of narrower ones) by 128 lanes, 4 KiB
TILE_ROWS, LANES, TILE_BYTES = 8, 128, 4096

STORES = frozenset({"swap", "store", "masked_swap"})
REDUCTIONS = frozenset({"reduce_max", "reduce_min", "reduce_sum", "argmax", "argmin"})
# ops that go element by element: a chain of them carries the whole value on
ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "max", "min", "neg", "exp", "exp2", "log", "tanh", "logistic",
                          "convert_element_type", "select_n", "abs", "sqrt", "rsqrt", "integer_pow", "square",
                          "round", "floor", "ceil", "sign", "clamp"})
REF_OPS = STORES | {"get", "load", "masked_load"}
# what a chain that streams into reductions may pass through (streams_into_reductions)
STREAMING = ELEMENTWISE | {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "broadcast_in_dim"}
# not a value of its own: a concatenation (or a stack) is its parts, whose vregs Mosaic lays side by
# side, and so is what element-wise ops make of it, vreg by vreg (jaxite's Toeplitz matrix, 64 MiB
# concatenated from 2 MiB chunks and cast to bf16 for a matmul: libtpu used 10 MiB; xma's causal
# conv, 4 rolled copies of its block stacked, weighted and summed: libtpu used nothing beyond the blocks)
NOT_VALUES = REF_OPS | {"concatenate", "stack"}
SAME_ARRAY = frozenset({"reshard"})  # annotations of an array's sharding, no op of their own (_inlined)
SAME_VALUE = frozenset({"pjit", "jit", "reshape", "broadcast_in_dim", "squeeze", "expand_dims"})


def tiled_bytes(var) -> int:
    """A 2-D value in its (8 x packing, 128) vreg tiles, uncapped (a (rows, 1) statistic: 512 bytes
    a row); other ranks as nbytes."""
    shape = [int(d) for d in getattr(var.aval, "shape", ())]
    if len(shape) != 2:
        return nbytes(var)
    rows, cols = shape
    return tile_bytes(rows, cols, np.dtype(var.aval.dtype).itemsize)


def tile_bytes(rows: int, cols: int, itemsize: int) -> int:
    """A (rows, cols) value's bytes in (8 x packing, 128) vreg tiles of 4 KiB."""
    return -(-rows // (TILE_ROWS * max(1, 4 // itemsize))) * -(-cols // LANES) * TILE_BYTES


def nbytes(var) -> int:
    """A value's bytes in the vector registers, or in VMEM where it spills: its two minor dims in
    (8 x packing, 128) tiles of 4 KiB, so a (rows, 64) f32 value takes twice its elements' bytes
    (flax's LayerNorm at dim 64 needed 47.69 MiB on v6e where its values' elements are 16 MiB
    each). Never more than twice: tpu-inference's RoPE gathers with
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
    rows = TILE_ROWS * max(1, 4 // size)
    tiles = int(math.prod(shape[:-2])) * -(-shape[-2] // rows) * -(-shape[-1] // LANES)
    return min(tiles * TILE_BYTES, MOST_TILE_GROWTH * elements)


def user_map(jaxpr) -> dict[int, list]:
    users: dict[int, list] = {}
    for e in jaxpr.eqns:
        for v in e.invars:
            if not hasattr(v, "val"):  # literals are not values of the body
                users.setdefault(id(v), []).append(e)
    for v in jaxpr.outvars:
        users.setdefault(id(v), []).append(None)  # leaves this jaxpr: used somewhere we do not follow
    return users


def streamed(out, users) -> bool:
    """Only stored into a ref, or added (or cast) once on the way there."""
    for _ in range(STREAM_HOPS):
        uses = users.get(id(out), [])
        if len(uses) != 1 or uses[0] is None:
            return False
        if uses[0].primitive.name in STORES:
            return True
        if uses[0].primitive.name not in ("add", "convert_element_type"):
            return False
        out = uses[0].outvars[0]
    return False


def readers(var, jaxpr, users_of) -> list:
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
                            found += [(u, j) for u, j in readers(inner, sub, users_of)]
            continue
        found.append((e, jaxpr))
    return found


def element_count(var) -> int | None:
    shape = getattr(getattr(var, "aval", None), "shape", None)
    return None if shape is None else int(math.prod(shape))


def stored_elements(store) -> int | None:
    return element_count(store.invars[1]) if len(store.invars) > 1 else None  # swap / store: ref, value, indices...


def in_chain(use, size) -> bool:
    """An element-wise op (or a reshape, a jitted helper) that makes a value of ``size`` elements."""
    return use.primitive.name in ELEMENTWISE | SAME_VALUE and len(use.outvars) == 1 and \
        element_count(use.outvars[0]) == size


def chain_uses(var, jaxpr, users_of, steps: int, once: bool = False):
    """Each value element-wise ops of its size make of ``var``, level by level for ``steps``
    levels (``var`` the first), with the equations that read it; ``once``: each value once."""
    size, frontier, seen = element_count(var), [(var, jaxpr)], {id(var)}
    for _ in range(steps):
        nxt = []
        for v, j in frontier:
            uses = readers(v, j, users_of)
            yield v, uses
            for u, jj in uses:
                if in_chain(u, size) and not (once and id(u.outvars[0]) in seen):
                    seen.add(id(u.outvars[0]))
                    nxt.append((u.outvars[0], jj))
        frontier = nxt


def reduced_then_used_whole(var, jaxpr, users_of, stored: bool = False) -> int:
    """Softmax's pattern: the value (through element-wise ops) feeds a reduction and an element-wise
    op of its own size, which cannot start before the reduction has seen all of it; unless the
    chain stores a value of that size whole, into an output block it can be built in (with
    ``stored``, only where it does). How many reductions the chain feeds (softmax's max, and the sum
    of its exponentials), 0 without the pattern."""
    if built_in_ref(var, jaxpr, users_of) != stored:
        return 0
    size, pattern, reductions = element_count(var), False, 0
    for _, uses in chain_uses(var, jaxpr, users_of, PATTERN_LEVELS):
        # a jitted helper (jnp.where's) counts as one element-wise op, a reshape or broadcast of
        # size-1 dims (jnp.matmul on 3-D values) as none
        pattern |= any(u.primitive.name in ELEMENTWISE and in_chain(u, size) for u, _ in uses) and \
            any(u.primitive.name in REDUCTIONS for u, _ in uses)
        reductions += sum(u.primitive.name in REDUCTIONS for u, _ in uses)
    return reductions if pattern else 0


def built_in_ref(var, jaxpr, users_of, unreduced: bool = False) -> bool:
    """Whether element-wise ops of its size carry the value into a store of that size: Mosaic can
    build it in that ref (an output block, an accumulator) instead of a VMEM temporary of its own;
    with ``unreduced``, only where no reduction reads the chain on the way.
    A chain that a reduction must see whole first (a softmax's exponentials, summed, then divided)
    is built there only in a ref as wide as the value: AMLeng's softmax, f32 exponentials stored as
    bf16, took one f32 copy of its block beyond the blocks (23.8 MiB where
    16 are blocks on v5e); an accumulator cast on its way out streams (sglang's fused MLP)."""
    size, reduced = element_count(var), False
    for _, uses in chain_uses(var, jaxpr, users_of, STORE_LEVELS):
        reduced |= any(u.primitive.name in REDUCTIONS for u, _ in uses)
        if reduced and unreduced:
            return False
        if any(u.primitive.name in STORES and stored_elements(u) == size and
               (not reduced or nbytes(u.invars[1]) >= nbytes(var)) for u, _ in uses):
            return True
    return False


def reduced_row_whole(var, jaxpr, users_of) -> bool:
    """A value computed element-wise, wider than one vreg's 128 lanes, that a reduction must see
    whole before the chain that stores it goes on (x - mean, then its variance; exp(x - max), then its
    sum). Mosaic builds a one-vreg-wide one in its ref as it goes (tests/data/row_reductions.py's
    shifted_square at 128 lanes: nothing beyond the blocks), not a wider one: at 256 to 2048 lanes
    libtpu kept 0.36-1.44x of it beyond the blocks (less as it grows: 2.1-2.2 MiB of shifted_square's
    4 and 6 MiB at 1024 lanes), so it is room a "fits" leaves, not certain."""
    shape = tuple(getattr(getattr(var, "aval", None), "shape", ()))
    return bool(shape) and shape[-1] > LANES and not built_in_ref(var, jaxpr, users_of, unreduced=True)


def chain_ids(var, jaxpr, users_of) -> set[int]:
    """The values element-wise ops of its size make of ``var``, as far as built_in_ref looks."""
    return {id(v) for v, _ in chain_uses(var, jaxpr, users_of, STORE_LEVELS + 1, once=True)}


def meets_another_result(var, jaxpr, users_of) -> bool:
    """Whether the chain of a matmul result meets another's (SwiGLU's silu(x @ w1) * (x @ w3)): only
    one of them can be built in the output block, the other is whole beside it (pallas-forge's
    SwiGLU and GeGLU: libtpu kept 0.92-2.03 results beyond the blocks, where
    both were taken as built in the ref)."""
    own = chain_ids(var, jaxpr, users_of)
    return any(e.primitive.name == "dot_general" and e.outvars[0] is not var and
               own & chain_ids(e.outvars[0], jaxpr, users_of) for e in jaxpr.eqns)


def only_reduced(var, jaxpr, users_of) -> bool:
    """A value only reductions read streams into them, vreg by vreg: LayerNorm's squared
    deviations, summed for the variance (flax's kept 2.44 MiB beside its
    blocks where that (1024, 1024) f32 value is 4)."""
    uses = readers(var, jaxpr, users_of)
    return bool(uses) and all(u.primitive.name in REDUCTIONS for u, _ in uses) and \
        len(uses) == len(users_of(jaxpr).get(id(var), []))


def feeds_only_matmuls(eqn, var, jaxpr, users_of, producers_of) -> bool:
    """A block read only cast or scaled on its way to one matmul operand: element-wise ops of its
    size from a ref load to a matmul, each reading the chain's value and beside it at most literals,
    smaller values it broadcasts (a scale row) and values made of indices (a mask of the rows in a
    group), each value read once. The MXU takes the rhs a tile at a time and the lowering lays out
    the lhs as it goes (rule matmul_lowering counts that), so it is no value the body builds whole
    (tests/data/quantized_variants.py's f32_bf16, an f32 copy of a bf16 weight: libtpu needed its
    blocks alone, 32.00 MiB of TPU7x's 32 at (1024, 2048) x (2048, 1024), and 14.00 MiB of v5e's 16
    at (1024, 512) x (512, 1024); its int8 and fp8 weights cast or dequantized to bf16 likewise).
    Not a value computed from others (SSD's decay times a matmul result, an lhs the MXU needs
    whole: levanter's intra-chunk SSD kept it)."""
    size, producers = element_count(var), producers_of(jaxpr)

    def one_block(e) -> bool:
        for _ in range(STORE_LEVELS + 1):
            if e is None:
                return False
            if e.primitive.name in REF_OPS:
                return True
            if e.primitive.name not in ELEMENTWISE | SAME_VALUE | {"transpose"} or len(e.outvars) != 1:
                return False
            full = [v for v in e.invars if not hasattr(v, "val") and element_count(v) == size and
                    not _of_indices(v, size, producers)]
            if len(full) != 1:
                return False
            e = producers.get(id(full[0]))
        return False

    if eqn.primitive.name not in STREAMING | SAME_VALUE or not one_block(eqn):
        return False
    v, j = var, jaxpr
    for _ in range(STORE_LEVELS + 1):
        uses = readers(v, j, users_of)
        if len(uses) != 1 or len(users_of(j).get(id(v), [])) != 1 or uses[0][1] is not j:
            return False
        u = uses[0][0]
        if u.primitive.name == "dot_general":
            return True
        if u.primitive.name not in ELEMENTWISE | SAME_VALUE | {"transpose"} or len(u.outvars) != 1 or \
                element_count(u.outvars[0]) != size:
            return False
        v = u.outvars[0]
    return False


def mxu_operand(var, jaxpr, users_of):
    """The matmul operand a value becomes, where element-wise ops of its size (and reshapes) carry it
    there alone, each value read once (a dequantization's f32 product, cast to bf16 for the MXU); else
    None. What the lowering needs whole of such a chain is the operand as it reaches the MXU: the
    values before it stream into it vreg by vreg."""
    size, v = element_count(var), var
    for _ in range(STORE_LEVELS + 1):
        uses = readers(v, jaxpr, users_of)
        if len(uses) != 1 or len(users_of(jaxpr).get(id(v), [])) != 1 or uses[0][1] is not jaxpr:
            return None
        u = uses[0][0]
        if u.primitive.name == "dot_general":
            return v
        if u.primitive.name not in ELEMENTWISE | SAME_VALUE | {"transpose"} or len(u.outvars) != 1 or \
                element_count(u.outvars[0]) != size:
            return None
        v = u.outvars[0]
    return None


def cast_of_block(var, producers) -> bool:
    """A block read and only cast, reshaped or transposed: Mosaic can read it again from its block
    for each use instead of keeping the cast whole (tests/data/block_scaled.py's i8_dynamic: its bf16
    x block cast to f32, reduced for a scale and divided by it, kept 4.69 MiB beyond the blocks on
    v6e at (1536, 1024) where that f32 value is 6)."""
    e = producers.get(id(var))
    for _ in range(STORE_LEVELS + 1):
        if e is None or len(e.outvars) != 1:
            return False
        if e.primitive.name in REF_OPS:
            return True
        if e.primitive.name not in SAME_VALUE | {"convert_element_type", "transpose"} or \
                len([v for v in e.invars if not hasattr(v, "val")]) != 1:
            return False
        e = producers.get(id(e.invars[0]))
    return False


def _of_indices(var, size, producers, depth: int = 8) -> bool:
    """A value that is no block's nor matmul's: a smaller value broadcast (a scale row), or what
    element-wise ops and comparisons make of iotas, broadcasts and scalars (megablox's masks of the
    rows in a group): cheap to make again vreg by vreg."""
    count = element_count(var)
    if hasattr(var, "val") or count is not None and count < size:
        return True
    e = producers.get(id(var))
    if e is None or depth == 0:
        return False
    if e.primitive.name in ("iota", "broadcast_in_dim"):
        return e.primitive.name == "iota" or all(_of_indices(v, size, producers, 0) for v in e.invars)
    return e.primitive.name in STREAMING and all(_of_indices(v, size, producers, depth - 1) for v in e.invars)


def made_of_indices(var, producers) -> bool:
    """An iota, or what element-wise ops and comparisons make of iotas, broadcasts and scalars (a
    causal mask, megablox's masks of the rows in a group): made again vreg by vreg where it is read,
    never whole (tests/data/quantized_variants.py's gmm at tm 4096, tn 512: its blocks' 28.5 MiB on
    v6e and TPU7x, nothing for its (4096, 512) int32 iota; tgmm's (1024, 1024) one on v5e likewise)."""
    return _of_indices(var, element_count(var), producers)


def producer_map(jaxpr) -> dict[int, object]:
    return {id(v): e for e in jaxpr.eqns for v in e.outvars}


def streams_into_reductions(eqn, var, jaxpr, users_of) -> bool:
    """A value an element-wise op, an iota or a tile makes whose chain of element-wise ops of its
    size ends only in reductions streams into them vreg by vreg, whole nowhere: a cross-entropy's
    masked label logits, its tiled row max and the exponentials of logits read from a scratch ref,
    each summed (tests/data/second_values.py's ce_lse and ce_tiled kept 0.10-0.66 of one (b, v) f32
    value beyond their blocks and scratch, where counting one certain said "does not fit" of four
    compiles that fit). Not a value the chain also stores, nor one a reduction sees before another
    op goes on with it (a log-softmax's block and shifted logits, kept whole)."""
    if eqn.primitive.name not in STREAMING | {"iota", "tile"}:
        return False
    size, frontier, seen, ended = element_count(var), [(var, jaxpr)], {id(var)}, False
    while frontier:
        v, j = frontier.pop()
        if None in users_of(j).get(id(v), [None]):  # an output of its jaxpr, or read by nothing
            return False
        uses = readers(v, j, users_of)
        if len(uses) > 1 and any(u.primitive.name in REDUCTIONS for u, _ in uses):
            return False  # a reduction sees it before another op goes on with it: whole
        for u, jj in uses:
            if u.primitive.name in REDUCTIONS:
                ended = True
            elif u.primitive.name in STREAMING | {"pjit", "jit"} and len(u.outvars) == 1 and \
                    element_count(u.outvars[0]) == size:
                if id(u.outvars[0]) not in seen:
                    seen.add(id(u.outvars[0]))
                    frontier.append((u.outvars[0], jj))
            else:
                return False
    return ended
