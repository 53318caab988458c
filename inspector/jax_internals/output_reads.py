"""Which elements of each pallas_call output the program reads after the kernel. A kernel may
leave blocks of an output unwritten on purpose when the program never reads them (a recurrent
scan's backward writes the carry's gradient at chunk boundaries 1..NT into one output and
boundary 0 into another, and its caller slices the first away): the grid walk must not call
those blocks an error. So the reads of each output are followed forward through the program,
backwards from its results: slices, views, concatenations and element-wise ops map the elements
read onto the output's; an op that reads elements chosen at run time (a slice at traced offsets,
a gather) is named, so that the walk can say it cannot decide instead of guessing."""
from __future__ import annotations

import dataclasses

from ..base.user_code import short_path
from .evaluate import KERNEL_PRIMITIVES, called_jaxpr
from .index_maps import Box
from .kernel_input_reads import input_reads
from .tracing import eqn_frame, sub_jaxprs

MAX_BOXES = 64  # past this the boxes become their hull (more read, never less)

# ops whose result element i is computed from element i of each operand of the same shape
_ELEMENTWISE = frozenset((
    "add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "exp", "exp2", "log", "log1p", "expm1",
    "tanh", "logistic", "sqrt", "rsqrt", "cbrt", "pow", "integer_pow", "square", "sin", "cos", "tan", "atan2",
    "floor", "ceil", "round", "is_finite", "not", "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n", "clamp", "nextafter", "erf", "erfc", "erf_inv", "reduce_precision", "convert_element_type",
    "copy", "copy_p", "real", "imag", "conj", "optimization_barrier"))


@dataclasses.dataclass
class Reads:
    """What the program reads of one value: everything, these boxes, and the ops it could not
    follow (their elements unknown); ``overwritten``: kernels that load blocks of it but write them
    before reading them (kernel_input_reads.py), said where a block is left unwritten."""

    everything: bool = False
    boxes: list[Box] = dataclasses.field(default_factory=list)
    unfollowed: list[str] = dataclasses.field(default_factory=list)
    overwritten: list[str] = dataclasses.field(default_factory=list)

    @property
    def any(self) -> bool:
        return self.everything or bool(self.boxes) or bool(self.unfollowed)

    def add(self, other: "Reads") -> None:
        self.everything |= other.everything
        self.unfollowed += [u for u in other.unfollowed if u not in self.unfollowed]
        self.overwritten += [u for u in other.overwritten if u not in self.overwritten]
        if not self.everything:
            self.boxes += [b for b in other.boxes if b not in self.boxes]
            if len(self.boxes) > MAX_BOXES:
                self.boxes = [tuple((min(b[d][0] for b in self.boxes), max(b[d][1] for b in self.boxes))
                                    for d in range(len(self.boxes[0])))]

    def boxes_of(self, shape: tuple[int, ...]) -> list[Box]:
        """The boxes, with everything as the one box of the whole shape."""
        return [tuple((0, int(n)) for n in shape)] if self.everything else list(self.boxes)


def _all_of(reads: Reads) -> Reads:
    """An operand read whole wherever the result is read at all."""
    return Reads(everything=reads.any)


def _shape(v) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(getattr(v, "aval", None), "shape", ()))


def _mapped(reads: Reads, shape: tuple[int, ...], to_operand) -> Reads:
    """The operand's reads: each box of the result (its whole shape for everything) mapped by
    ``to_operand`` (None: the box reads nothing of this operand); the unfollowed ops carried."""
    out = Reads(unfollowed=list(reads.unfollowed))
    for box in reads.boxes_of(shape):
        mapped = to_operand(box)
        if mapped is not None and all(lo < hi for lo, hi in mapped):
            out.add(Reads(boxes=[tuple(mapped)]))
    return out


def _literal_ints(values) -> list[int] | None:
    try:
        return [int(v.val) for v in values]
    except (AttributeError, TypeError, ValueError):
        return None


def _slice_reads(eqn, reads: Reads) -> list[Reads]:
    p, out_shape = eqn.params, _shape(eqn.outvars[0])
    starts, strides = p["start_indices"], p.get("strides") or [1] * len(out_shape)
    return [_mapped(reads, out_shape, lambda box: [(s + lo * k, s + (hi - 1) * k + 1)
                                                   for (lo, hi), s, k in zip(box, starts, strides)])]


def _dynamic_slice_reads(eqn, reads: Reads) -> list[Reads]:
    operand, *index = eqn.invars
    starts = _literal_ints(index)
    if starts is None:  # offsets known at run time only
        return [Reads(boxes=[], unfollowed=[_where(eqn)]) if reads.any else Reads()] + [_all_of(reads)] * len(index)
    shape, sizes = _shape(operand), eqn.params["slice_sizes"]
    starts = [min(max(s, 0), n - k) for s, n, k in zip(starts, shape, sizes)]  # clamped, as XLA does
    return [_mapped(reads, _shape(eqn.outvars[0]), lambda box: [(s + lo, s + hi) for (lo, hi), s in zip(box, starts)])] \
        + [_all_of(reads)] * len(index)


def _concatenate_reads(eqn, reads: Reads) -> list[Reads]:
    axis, out_shape, found, offset = eqn.params["dimension"], _shape(eqn.outvars[0]), [], 0
    for v in eqn.invars:
        size = _shape(v)[axis]

        def part(box, offset=offset, size=size):
            lo, hi = max(box[axis][0] - offset, 0), min(box[axis][1] - offset, size)
            return [*box[:axis], (lo, hi), *box[axis + 1:]]

        found.append(_mapped(reads, out_shape, part))
        offset += size
    return found


def _transpose_reads(eqn, reads: Reads) -> list[Reads]:
    perm = eqn.params["permutation"]

    def back(box):
        out = [None] * len(perm)
        for k, d in enumerate(perm):
            out[d] = box[k]
        return out

    return [_mapped(reads, _shape(eqn.outvars[0]), back)]


def _squeeze_reads(eqn, reads: Reads) -> list[Reads]:
    dims = sorted(d % len(_shape(eqn.invars[0])) for d in eqn.params["dimensions"])

    def back(box):
        out = list(box)
        for d in dims:
            out.insert(d, (0, 1))
        return out

    return [_mapped(reads, _shape(eqn.outvars[0]), back)]


def _broadcast_reads(eqn, reads: Reads) -> list[Reads]:
    operand, out_shape = _shape(eqn.invars[0]), _shape(eqn.outvars[0])
    dims = eqn.params["broadcast_dimensions"]
    return [_mapped(reads, out_shape, lambda box: [(0, 1) if n == 1 and out_shape[d] != 1 else box[d]
                                                   for n, d in zip(operand, dims)])] + [_all_of(reads)] * (len(eqn.invars) - 1)


def _rev_reads(eqn, reads: Reads) -> list[Reads]:
    shape, dims = _shape(eqn.outvars[0]), set(eqn.params["dimensions"])
    return [_mapped(reads, shape, lambda box: [(n - hi, n - lo) if d in dims else (lo, hi)
                                               for d, ((lo, hi), n) in enumerate(zip(box, shape))])]


def _reshape_reads(eqn, reads: Reads) -> list[Reads]:
    """Only a reshape read whole (or not at all) is followed: boxes do not map through one."""
    if reads.boxes and not reads.everything:
        return [Reads(unfollowed=[*reads.unfollowed, _where(eqn)])] + [_all_of(reads)] * (len(eqn.invars) - 1)
    return [Reads(everything=reads.everything, unfollowed=list(reads.unfollowed))] + [_all_of(reads)] * (len(eqn.invars) - 1)


def _elementwise_reads(eqn, reads: Reads) -> list[Reads]:
    shape = _shape(eqn.outvars[0])
    return [_mapped(reads, shape, lambda box: box) if _shape(v) == shape else _all_of(reads) for v in eqn.invars]


def _gathers(eqn, reads: Reads) -> list[Reads]:
    """A gather or a dynamic index: the elements it reads are chosen at run time."""
    return [Reads(unfollowed=[*reads.unfollowed, _where(eqn)]) if reads.any else Reads()] + \
        [_all_of(reads)] * (len(eqn.invars) - 1)


_RULES = {"slice": _slice_reads, "dynamic_slice": _dynamic_slice_reads, "concatenate": _concatenate_reads,
          "transpose": _transpose_reads, "squeeze": _squeeze_reads, "broadcast_in_dim": _broadcast_reads,
          "rev": _rev_reads, "reshape": _reshape_reads, "gather": _gathers}


def _where(eqn) -> str:
    frame = eqn_frame(eqn)
    return f"{eqn.primitive.name} at {short_path(frame[0])}:{frame[1]}" if frame else eqn.primitive.name


def _split_reads(eqn, outs: list[Reads]) -> list[Reads]:
    axis, found, offset = eqn.params["axis"], Reads(), 0
    for v, reads in zip(eqn.outvars, outs):
        found.add(_mapped(reads, _shape(v), lambda box, offset=offset: [
            *box[:axis], (box[axis][0] + offset, box[axis][1] + offset), *box[axis + 1:]]))
        offset += _shape(v)[axis]
    return [found]


def _operand_reads(eqn, outs: list[Reads]) -> list[Reads]:
    """What ``eqn`` reads of each operand, given what the program reads of its results."""
    name = eqn.primitive.name
    if name == "split" and not getattr(eqn, "effects", None):
        return _split_reads(eqn, outs)
    if getattr(eqn, "effects", None) or len(eqn.outvars) != 1:
        return [Reads(everything=True) if getattr(eqn, "effects", None) else _all_of(_union(outs))
                for _ in eqn.invars]
    if name in _RULES:
        return _RULES[name](eqn, outs[0])
    if name in _ELEMENTWISE:
        return _elementwise_reads(eqn, outs[0])
    return [_all_of(outs[0]) for _ in eqn.invars]


def _union(reads: list[Reads]) -> Reads:
    out = Reads()
    for r in reads:
        out.add(r)
    return out


def _kernel_reads(found) -> Reads:
    """A kernel's reads of one operand (kernel_input_reads.input_reads): whole, or these boxes."""
    if found is None:
        return Reads(everything=True)
    reads = Reads(overwritten=list(found[1]))
    reads.add(Reads(boxes=list(found[0])))  # past MAX_BOXES, their hull
    return reads


def output_reads(closed_jaxpr) -> dict[int, list[Reads]]:
    """{id(kernel eqn): [what the program reads of output i]}: returned results are read whole, a
    kernel's inputs as kernel_input_reads.py follows them;
    inside loops and branches everything a body is given counts as read (conservative); a jaxpr
    shared by call sites reads what any site reads."""
    result: dict[int, list[Reads]] = {}

    def visit(jaxpr, outs_read: list[Reads]) -> list[Reads]:
        reads: dict[int, Reads] = {}

        def mark(v, r: Reads) -> None:
            if not hasattr(v, "val"):
                reads.setdefault(id(v), Reads()).add(r)

        for v, r in zip(jaxpr.outvars, outs_read):
            mark(v, r)
        for eqn in reversed(jaxpr.eqns):
            outs = [reads.get(id(v), Reads()) for v in eqn.outvars]
            if eqn.primitive.name in KERNEL_PRIMITIVES:
                before = result.get(id(eqn), [Reads() for _ in outs])
                for b, r in zip(before, outs):
                    b.add(r)
                result[id(eqn)] = before
                ins = [_kernel_reads(found) for found in input_reads(eqn)]
            elif (called := called_jaxpr(eqn)) is not None:
                ins = visit(called[0], outs)
                ins += [Reads(everything=True)] * (len(eqn.invars) - len(ins))
            elif subs := list(sub_jaxprs(eqn.params)):  # loops, branches, maps: everything they hold is read
                for sub in subs:
                    visit(sub, [Reads(everything=True) for _ in sub.outvars])
                ins = [Reads(everything=True) for _ in eqn.invars]
            else:
                ins = _operand_reads(eqn, outs)
            for v, r in zip(eqn.invars, ins):
                mark(v, r)
        return [reads.get(id(v), Reads()) for v in jaxpr.invars]

    visit(closed_jaxpr.jaxpr, [Reads(everything=True) for _ in closed_jaxpr.jaxpr.outvars])
    return result
