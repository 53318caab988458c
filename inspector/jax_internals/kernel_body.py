"""What a Pallas kernel body does per grid step, read from its jaxpr: flops (a [min, max] range over
pl.when / lax.cond branches, loops multiplied by their trip counts), transcendentals, matmul shapes,
the largest values it builds, its DMAs and its run_scoped buffers (emit_pipeline's among them); and
the work of each unit of the TensorCore (``Body.work``, ``grid_work``): MXU flops, VPU and EUP
instructions, each on one 8 x 128 register. Shared by pallas_call (``pallas``) and kernels over a
core mesh (``mesh_kernels``).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..base.chips import F32_MXU_PASSES
from ..base.pallas_model import DmaInfo, ScratchInfo
from ..base.user_code import short_path
from .pipelines import is_pipeline_copy, is_pipeline_scope
from .tracing import sub_jaxprs

_TRANSCENDENTAL = {"exp", "log", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "pow", "exp2", "log1p", "expm1", "erf"}
# Elementwise primitives the VPU runs, one VALU instruction per register of the result (libtpu's
# bundles of the causal flash sample on the v5e count one a register); and those that take at least
# one EUP instruction a register (the same bundles: 448 EUP slots a step, the registers of its exp,
# log and divisions). Others (sin, erf: polynomials or more) are left out: the counts stay lower bounds.
_VPU_OPS = {"add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil",
            "round", "select_n", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "xor", "clamp",
            "convert_element_type", "integer_pow", "square", "shift_left", "shift_right_logical",
            "shift_right_arithmetic", "is_finite"}
_EUP_OPS = {"exp", "exp2", "log", "tanh", "logistic", "rsqrt", "sqrt", "pow"}
# a reduction folds its operand's registers into the result's with one VALU instruction each (the
# lane-crossing rest is the XLU's, whose rate no source gives)
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin"}
# Body.work's keys: matmul flops as XLA counts them, the MXU's (an f32 matmul's bf16 passes each
# counted), VALU and EUP instructions
UNITS = ("flops", "mxu", "vpu", "eup")
Work = dict[str, float]  # unit -> its work (UNITS)


def _work() -> Work:
    return dict.fromkeys(UNITS, 0.0)


def _add(into: Work, work: Work, times: float = 1.0) -> None:
    for unit, n in work.items():
        into[unit] += times * n
_NOT_CONST = object()
# x op c == x: what the compiler folds away (arith's canonical folds); x * 0 and x & 0 fold to 0
_IDENTITY = {"add": 0, "add_any": 0, "or": 0, "xor": 0, "mul": 1, "shift_left": 0, "shift_right_logical": 0,
             "shift_right_arithmetic": 0}
_IDENTITY_RIGHT = {"sub": 0, "div": 1}  # only as the second operand


def _absorbs(p: str, c, position: int) -> bool:
    """Does constant ``c`` at ``position`` make op ``p`` fold (its result the other operand, or 0)?"""
    if c is _NOT_CONST or c is None:
        return False
    if p in ("mul", "and") and c == 0:
        return True
    if p in _IDENTITY and c == _IDENTITY[p] and (position == 1 or not p.startswith("shift")):
        return True
    return position == 1 and p in _IDENTITY_RIGHT and c == _IDENTITY_RIGHT[p]


_NUMPY_FOLD: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum, "neg": np.negative,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "not": np.invert, "shift_left": np.left_shift,
    "shift_right_logical": np.right_shift, "shift_right_arithmetic": np.right_shift}


def _fold_const(p: str, consts: list, eqn):
    """The scalar a splat of constants folds to, where it is one (None: constant, value not kept)."""
    if any(c is None for c in consts):
        return None
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    try:
        args = [np.asarray(c).astype(dtype) for c in consts]
        if p in ("broadcast_in_dim", "reshape", "squeeze", "convert_element_type", "expand_dims") and len(args) == 1:
            return args[0].item()
        fold = _NUMPY_FOLD.get(p)
        with np.errstate(all="ignore"):
            return np.asarray(fold(*args)).astype(dtype).item() if fold is not None else None
    except (TypeError, ValueError, OverflowError):
        return None


_REF_OPS = ("get", "load", "swap", "store", "masked_load", "masked_swap")
# Integer scalar arithmetic folded to find loop bounds (division only where it cannot round).
_FOLD: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "max": max, "min": min,
    "neg": lambda a: -a, "convert_element_type": lambda a: a,
    "div": lambda a, b: a // b if a % b == 0 else None,
    "lt": lambda a, b: int(a < b), "le": lambda a, b: int(a <= b), "gt": lambda a, b: int(a > b),
    "ge": lambda a, b: int(a >= b), "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b)}


def _dma_refs(tree, flat: list) -> tuple:
    """(source, destination, device id) of a DMA equation's operands; a sliced ref comes as a
    TransformedRef (its .ref the whole ref, its .shape the slice's)."""
    from jax._src.pallas.mosaic import primitives as mosaic_primitives

    parts = mosaic_primitives._dma_unflatten(tree, flat)
    if len(parts) == 9:  # jax 0.10.0: each ref and its transforms apart
        from jax._src.state.types import TransformedRef

        src, src_transforms, dst, dst_transforms, *_, device = parts
        wrap = lambda ref, transforms: TransformedRef(ref, tuple(transforms)) if transforms else ref
        return wrap(src, src_transforms), wrap(dst, dst_transforms), device
    src, dst, _, _, device = parts
    return src, dst, device


# Compiler hints that return their operand unchanged and have no vmap rule in jax 0.10
# (pl.multiple_of, common in index maps over scalar-prefetched offsets): the walk skips them.
def memory_space(aval) -> str:
    """vmem | smem | any | hbm | semaphore ... of a ref's aval (TPU blocks default to VMEM)."""
    space = getattr(aval, "memory_space", None)
    text = str(space).lower() if space is not None else "vmem"
    if text in ("", "none", "default"):
        return "vmem"
    if "sem" in text:
        return "semaphore"
    for known in ("vmem", "smem", "any", "hbm"):
        if known in text:
            return known
    return text


def _aval_of(x):
    return getattr(x, "aval", x)


def bytes_of(aval) -> int:
    shape = getattr(aval, "shape", ())
    try:
        return int(math.prod(shape)) * np.dtype(aval.dtype).itemsize
    except TypeError:  # semaphores and other non-numpy dtypes
        return int(math.prod(shape)) * 4


def vregs(aval, extent: tuple | None = None) -> int:
    """The 8 x 128 registers of 32-bit values a value fills as Mosaic lays it out: its last two dims
    tiled (8 rows, 128 lanes), 16-bit values packed two rows a sublane; 0 for a scalar (the scalar
    unit's). ``extent``: the value's distinct extent per dim, 1 along a dim it is broadcast along
    (Mosaic keeps such a value replicated: fewer registers). Every TPU's register is 8 x 128
    (base/chips: sublanes, lanes)."""
    full = getattr(aval, "shape", ())
    shape = [int(d) for d in (full if extent is None else extent) if isinstance(d, (int, np.integer))]
    if not full or len(shape) != len(full):
        return 0
    try:
        itemsize = np.dtype(aval.dtype).itemsize
    except TypeError:
        return 0
    pack = max(1, 4 // itemsize) if np.dtype(aval.dtype) != np.bool_ else 1  # a mask: one a register
    rows, cols = (shape[-2] if len(shape) > 1 else 1), shape[-1]
    return math.prod(shape[:-2]) * -(-rows // (8 * pack)) * -(-cols // 128)


_COMPLEMENT = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}


def _predicate(index, defs: dict) -> tuple[tuple | None, tuple | None]:
    """(key, its complement's key) of a cond whose index is a comparison made an integer (how
    pl.when and lax.cond on a bool lower), e.g. ("eq", h, 0) and ("ne", h, 0); (None, None) else."""
    convert = defs.get(id(index))
    if convert is None or convert.primitive.name != "convert_element_type":
        return None, None
    compare = defs.get(id(convert.invars[0]))
    if compare is None or compare.primitive.name not in _COMPLEMENT or len(compare.invars) != 2:
        return None, None
    operands = tuple(("literal", repr(v.val)) if hasattr(v, "val") else id(v) for v in compare.invars)
    name = compare.primitive.name
    return (name, operands), (_COMPLEMENT[name], operands)


def _loop_varying(eqn, sub, count: int) -> set[int]:
    """Positions (in what ``_inherit`` pairs) of a loop's carries that its body changes: their
    value at entry is not their value on later trips."""
    p = eqn.primitive.name
    if p == "while":  # paired: body consts, then carries
        nb = eqn.params["body_nconsts"]
        body = eqn.params["body_jaxpr"].jaxpr
        if sub is not body:  # the cond jaxpr: treat every carry as varying
            return set(range(nb, count))
        return {nb + k for k, out in enumerate(body.outvars) if out is not body.invars[nb + k]}
    if p == "scan":  # paired: consts, carries, then the scanned operands (a slice per trip)
        return set(range(eqn.params["num_consts"], count))
    return set()


def _static_dims(sliced, whole, *other_whole) -> list[int]:
    """A copied slice's shape; a size computed at run time (pl.ds with a traced length, a
    BoundedSlice) counts as the whole ref's dimension there, or the other end's when that is
    smaller (a copy of a (<=2, 8, 128) window of a (16, 8, 128) array moves at most 2 rows): an
    upper bound."""
    dims = list(getattr(sliced, "shape", ()))

    def trailing(ref) -> list:  # indexed leading dims (a buffer slot) dropped
        full = list(getattr(ref, "shape", ()))
        return full[len(full) - len(dims):] if len(full) >= len(dims) else []

    ends = [trailing(ref) for ref in (whole, *other_whole)]
    out = []
    for k, d in enumerate(dims):
        try:
            out.append(int(d))
        except TypeError:
            bounds = [int(full[k]) for full in ends if full and isinstance(full[k], (int, np.integer))]
            out.append(min(bounds) if bounds else 1)
    return out


class Body:
    """Costs, DMAs and run_scoped buffers of a kernel body, with how often each runs per grid
    step: lax.cond / pl.when branches give a [min, max] range, loops multiply by their trips."""

    def __init__(self, names: dict):
        self.names = names  # id(kernel ref var) -> the kernel's name for it
        self.known: dict[int, int] = {}  # id(var) -> its value, for integer scalars made of literals
        self.unknown_loops = 0  # while loops whose trip count is not known here (counted once)
        self.flops = [0.0, 0.0]
        self.trans = 0.0
        self.dots: list[list[int]] = []
        self.int8_matmuls = False  # a matmul of two 8-bit integer operands
        self.mxu_passes: int | None = None  # the fewest bf16 MXU passes any matmul takes (f32 at HIGHEST: 6)
        self.sizes: list[int] = []
        self.dmas: list[DmaInfo] = []
        self.scoped: list[ScratchInfo] = []
        self.run_scoped: list = []  # the run_scoped equations, in program order (emit_pipeline's among them)
        self.pipeline_runs: list[tuple[float, float]] = []  # per emit_pipeline scope: [min, max] runs per grid step
        self._in_pipeline = 0  # inside an emit_pipeline's scope: its DMAs are the pipeline's block copies
        self._lives: dict[int, set[int]] = {}  # id(jaxpr) -> its equations whose results are used (Body.work)
        self._consts: dict[int, Any] = {}  # id(var) -> its value where the compiler knows it (Body.work)
        self._extents: dict[int, tuple] = {}  # id(var) -> its distinct extent, where a broadcast made it (Body.work)

    def _inherit(self, eqn, sub) -> None:
        """Give a nested jaxpr's refs the kernel's names for what the equation passes in."""
        if eqn.primitive.name == "cond":
            outer = eqn.invars[1:]
            inner = sub.invars
        elif eqn.primitive.name == "while":  # operands: cond consts, body consts, carry
            outer = eqn.invars[eqn.params["cond_nconsts"]:]
            inner = sub.invars[-len(outer):] if len(sub.invars) >= len(outer) else sub.invars
        elif len(sub.constvars) == len(eqn.invars) and sub.constvars:  # run_scoped closes over its operands
            outer, inner = eqn.invars, sub.constvars
        else:
            outer, inner = eqn.invars, sub.invars
        if len(outer) == len(inner):
            varying = _loop_varying(eqn, sub, len(inner))
            for k, (o, i) in enumerate(zip(outer, inner)):
                if id(o) in self.names:
                    self.names[id(i)] = self.names[id(o)]
                if k not in varying and (value := self._value(o)) is not None:
                    self.known[id(i)] = value
                if k not in varying and (const := self._const(o)) is not _NOT_CONST:
                    self._consts[id(i)] = const

    def _value(self, v) -> int | None:
        if hasattr(v, "val"):  # a literal
            return int(v.val) if np.ndim(v.val) == 0 and np.issubdtype(np.asarray(v.val).dtype, np.integer) else None
        return self.known.get(id(v))

    def _fold(self, eqn) -> None:
        """Record the value of an integer scalar computed from known ones (loop bounds)."""
        fold = _FOLD.get(eqn.primitive.name)
        args = [self._value(v) for v in eqn.invars]
        if fold is None or len(eqn.outvars) != 1 or any(a is None for a in args):
            return
        aval = getattr(eqn.outvars[0], "aval", None)
        dtype = getattr(aval, "dtype", np.float32)
        if getattr(aval, "shape", None) != () or not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
            return
        try:
            self.known[id(eqn.outvars[0])] = int(fold(*args))
        except (TypeError, ValueError, ZeroDivisionError):
            pass

    def _trips(self, eqn) -> int | None:
        """A lax.fori_loop's trip count: ``i < n`` on the carry, i from a known start going up by
        one each trip, n known and unchanged by the body. None for any other while loop."""
        nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        cond, body = eqn.params["cond_jaxpr"].jaxpr, eqn.params["body_jaxpr"].jaxpr
        if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt" or cond.outvars != cond.eqns[0].outvars:
            return None
        outer = list(eqn.invars[:nc]) + list(eqn.invars[nc + nb:])  # what cond's invars receive
        where = {id(v): k for k, v in enumerate(cond.invars)}
        counter, limit = cond.eqns[0].invars
        k = where.get(id(counter), -1) - nc  # the counter's position in the carry
        if k < 0:
            return None
        m = where.get(id(limit))
        if m is not None and m >= nc and body.outvars[m - nc] is not body.invars[nb + m - nc]:
            return None  # the body moves the limit
        step = next((e for e in body.eqns if body.outvars[k] in e.outvars), None)
        if step is None or step.primitive.name != "add" or body.invars[nb + k] not in step.invars or \
                1 not in [self._value(v) for v in step.invars if v is not body.invars[nb + k]]:
            return None
        start = self._value(outer[k + nc])
        end = self._value(limit) if m is None else self._value(outer[m])
        return None if start is None or end is None else max(0, end - start)

    def visit(self, jaxpr, times: tuple[float, float]) -> tuple[float, float]:
        """Walk ``jaxpr`` running ``times`` per step; return its own [min, max] flops per run."""
        lo = hi = 0.0
        stored = {id(e.invars[1]) for e in jaxpr.eqns if e.primitive.name in ("swap", "store") and len(e.invars) > 1}
        defs = {id(v): e for e in jaxpr.eqns for v in e.outvars}
        guards: dict = {}  # a pl.when's predicate -> (its branch costs, what it added): for its complement
        for eqn in jaxpr.eqns:
            p = eqn.primitive.name
            self._fold(eqn)
            if p not in _REF_OPS:
                for v in eqn.outvars:
                    aval = getattr(v, "aval", None)
                    shape = getattr(aval, "shape", None)
                    if id(v) not in stored and shape and hasattr(aval, "dtype"):
                        self.sizes.append(bytes_of(aval))
            if p == "dot_general":
                f = self._dot(eqn)
                lo, hi = lo + f, hi + f
            elif p in _TRANSCENDENTAL:
                self.trans += math.prod(eqn.outvars[0].aval.shape) * times[1]
            elif p == "dma_start":
                self._dma(eqn, times)
            elif p == "cond" and (taken := self._value(eqn.invars[0])) is not None:
                # its index known (a comparison of values the prefetch operands decide): one branch runs
                branch = eqn.params["branches"][min(max(taken, 0), len(eqn.params["branches"]) - 1)].jaxpr
                self._inherit(eqn, branch)
                c = self.visit(branch, times)
                lo, hi = lo + c[0], hi + c[1]
                continue
            elif p == "cond":
                for b in eqn.params["branches"]:
                    self._inherit(eqn, b.jaxpr)
                costs = [self.visit(b.jaxpr, (0.0, times[1])) for b in eqn.params["branches"]]
                key, complement = _predicate(eqn.invars[0], defs)
                partner = guards.pop(complement, None) if complement else None
                if partner is not None and len(costs) == 2 == len(partner[0]):
                    # pl.when(x == 0) then pl.when(x != 0): exactly one of the two bodies runs
                    other, (other_lo, other_hi) = partner
                    lo += min(other[i][0] + costs[1 - i][0] for i in (0, 1)) - other_lo
                    hi += max(other[i][1] + costs[1 - i][1] for i in (0, 1)) - other_hi
                else:
                    added = (min(c[0] for c in costs), max(c[1] for c in costs))
                    lo, hi = lo + added[0], hi + added[1]
                    if key is not None:
                        guards[key] = (costs, added)
                continue
            elif p == "scan":
                n = float(eqn.params.get("length", 1))
                self._inherit(eqn, eqn.params["jaxpr"].jaxpr)
                c = self.visit(eqn.params["jaxpr"].jaxpr, (times[0] * n, times[1] * n))
                lo, hi = lo + n * c[0], hi + n * c[1]
                continue
            elif p == "while":
                body = eqn.params["body_jaxpr"].jaxpr
                self._inherit(eqn, body)
                trips = self._trips(eqn)
                if trips is not None:  # a fori_loop: like a scan
                    c = self.visit(body, (times[0] * trips, times[1] * trips))
                    lo, hi = lo + trips * c[0], hi + trips * c[1]
                    continue
                # trips unknown: counted once, so the max is a lower bound (said with the figures)
                dmas = len(self.dmas)
                c = self.visit(body, (0.0, times[1]))
                hi += c[1]
                self.unknown_loops += len(self.dmas) > dmas or c[1] > 0
                continue
            elif p == "run_scoped":
                c = self._run_scoped(eqn, times)
                lo, hi = lo + c[0], hi + c[1]
                continue
            for sub in sub_jaxprs(eqn.params):
                self._inherit(eqn, sub)
                c = self.visit(sub, times)
                lo, hi = lo + c[0], hi + c[1]
        return lo, hi

    def work(self, jaxpr, eqns=None) -> tuple[Work, Work]:
        """(least, most) work of each unit (UNITS) one run of ``jaxpr`` (or of those of its
        ``eqns``) takes: a branch not known here takes its cheapest side per unit in the least, its
        costliest in the most; a loop its trips (a while loop of unknown trips: none in the least,
        one in the most). What the compiler removes is not counted: values nothing uses, and ops it
        folds (on constants, or with an operand that leaves the other unchanged: x + 0, x * 1).
        Call after ``visit``, whose walk learnt the integer values that decide branches and trips."""
        live = self._live(jaxpr)
        least, most = _work(), _work()
        for eqn in jaxpr.eqns if eqns is None else eqns:
            p = eqn.primitive.name
            self._fold(eqn)
            if id(eqn) not in live:
                continue
            if p == "dot_general":
                (lc, _), _ = eqn.params["dimension_numbers"]
                lhs, shape = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
                flops = 2.0 * math.prod(shape) * math.prod(lhs[d] for d in lc)
                for c in (least, most):
                    c["flops"] += flops
                    c["mxu"] += flops * f32_mxu_passes(eqn)
            elif p == "cond":
                branches = [b.jaxpr for b in eqn.params["branches"]]
                taken = self._value(eqn.invars[0])
                if taken is not None:
                    branches = [branches[min(max(taken, 0), len(branches) - 1)]]
                costs = []
                for b in branches:
                    self._inherit(eqn, b)
                    costs.append(self.work(b))
                for unit in UNITS:
                    least[unit] += min(c[0][unit] for c in costs)
                    most[unit] += max(c[1][unit] for c in costs)
            elif p in ("scan", "while"):
                body = eqn.params["jaxpr"].jaxpr if p == "scan" else eqn.params["body_jaxpr"].jaxpr
                self._inherit(eqn, body)
                trips = float(eqn.params.get("length", 1)) if p == "scan" else self._trips(eqn)
                lo, hi = self.work(body)
                _add(least, lo, trips or 0)
                _add(most, hi, trips if trips is not None else 1)
            elif subs := list(sub_jaxprs(eqn.params)):
                for sub in subs:
                    self._inherit(eqn, sub)
                    lo, hi = self.work(sub)
                    _add(least, lo)
                    _add(most, hi)
            else:
                done = self._vector(eqn)
                _add(least, done)
                _add(most, done)
        return least, most

    def _live(self, jaxpr) -> set[int]:
        """The equations whose results are used (or that have effects: stores, DMAs, nested
        bodies): the compiler drops the others."""
        if id(jaxpr) not in self._lives:
            needed = {id(v) for v in jaxpr.outvars}
            live = set()
            for eqn in reversed(jaxpr.eqns):
                if eqn.effects or any(True for _ in sub_jaxprs(eqn.params)) or any(id(v) in needed for v in eqn.outvars):
                    live.add(id(eqn))
                    needed.update(id(v) for v in eqn.invars)
            self._lives[id(jaxpr)] = live
        return self._lives[id(jaxpr)]

    def _vector(self, eqn) -> Work:
        """The VALU and EUP instructions of one equation, one a register of its result; none where
        the compiler folds it: all operands constant, or one that leaves the other as it is. A value
        made of broadcasts alone is counted at its distinct extent (_extent_of)."""
        p, done = eqn.primitive.name, _work()
        consts = [self._const(v) for v in eqn.invars]
        if eqn.invars and all(c is not _NOT_CONST for c in consts) and not eqn.effects:
            self._consts[id(eqn.outvars[0])] = _fold_const(p, consts, eqn)
            return done
        if p == "broadcast_in_dim" and eqn.invars:
            inner, shape = self._extent_of(eqn.invars[0]), eqn.outvars[0].aval.shape
            spread = [1] * len(shape)
            for k, d in enumerate(eqn.params["broadcast_dimensions"]):
                spread[d] = inner[k] if k < len(inner) else 1
            self._extents[id(eqn.outvars[0])] = tuple(spread)
            return done
        if p not in _VPU_OPS and p not in _EUP_OPS and p not in _REDUCTIONS:
            return done
        if p in _REDUCTIONS:
            done["vpu"] = max(vregs(eqn.invars[0].aval, self._extent_of(eqn.invars[0])) - vregs(eqn.outvars[0].aval), 0)
            return done
        rank = len(eqn.outvars[0].aval.shape)
        extents = [self._extent_of(v) for v in eqn.invars]
        same = [e for e in extents if len(e) == rank]  # (scalar operands broadcast: extent 1)
        extent = tuple(max((e[d] for e in same), default=1) for d in range(rank))
        if len(consts) == 2 and any(_absorbs(p, c, k) for k, c in enumerate(consts)):
            if p in ("mul", "and") and 0 in consts:
                self._consts[id(eqn.outvars[0])] = 0
            else:  # the other operand, as it is
                self._extents[id(eqn.outvars[0])] = extents[1 if consts[0] is not _NOT_CONST else 0]
            return done
        self._extents[id(eqn.outvars[0])] = extent
        out = vregs(eqn.outvars[0].aval, extent)
        done["vpu" if p in _VPU_OPS else "eup"] = out
        if p == "div" and np.issubdtype(np.dtype(eqn.outvars[0].aval.dtype), np.floating):
            done["eup"] = out  # a reciprocal, then the VALU's multiply
        return done

    def _extent_of(self, v) -> tuple:
        """A value's distinct extent per dim (its shape, but 1 along dims it is broadcast along)."""
        shape = tuple(getattr(getattr(v, "aval", None), "shape", ()))
        return self._extents.get(id(v), shape) if not hasattr(v, "val") else tuple(1 for _ in shape)

    def _const(self, v):
        """A value the compiler knows: its scalar (a literal, a splat of one), None where it is
        constant but not a splat here; _NOT_CONST otherwise."""
        if hasattr(v, "val"):
            try:
                value = np.asarray(v.val)
            except (TypeError, ValueError):
                return None
            return value.item() if value.ndim == 0 else None
        return self._consts.get(id(v), _NOT_CONST)

    def _dot(self, eqn) -> float:
        """A matmul's flops, its (m, k, n) recorded."""
        (lc, _), _ = eqn.params["dimension_numbers"]
        lhs, out = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
        k = math.prod(lhs[d] for d in lc)
        m = math.prod(out[:-1]) if len(out) > 1 else 1
        self.dots.append([int(m), int(k), int(out[-1]) if out else 1])
        self.int8_matmuls |= all(str(getattr(v.aval, "dtype", "")) in ("int8", "uint8") for v in eqn.invars[:2])
        passes = f32_mxu_passes(eqn)
        self.mxu_passes = passes if self.mxu_passes is None else min(self.mxu_passes, passes)
        return 2.0 * math.prod(out) * k

    def _run_scoped(self, eqn, times: tuple[float, float]) -> tuple[float, float]:
        """A run_scoped region: its buffers (emit_pipeline's among them) and its body's [min, max] flops."""
        self.run_scoped.append(eqn)
        for v in eqn.params["jaxpr"].invars:
            self.names[id(v)] = f"run_scoped buffer {len(self.scoped)}"
            aval = v.aval
            self.scoped.append(ScratchInfo(shape=[int(d) for d in getattr(aval, "shape", ())],
                                           dtype=str(getattr(aval, "dtype", "")), memory_space=memory_space(aval),
                                           scoped=True))
        pipeline = is_pipeline_scope(eqn)
        if pipeline:
            self.pipeline_runs.append((times[0], times[1]))
        self._in_pipeline += pipeline
        lo = hi = 0.0
        for sub in sub_jaxprs(eqn.params):
            self._inherit(eqn, sub)
            c = self.visit(sub, times)
            lo, hi = lo + c[0], hi + c[1]
        self._in_pipeline -= pipeline
        return lo, hi

    def _dma(self, eqn, times) -> None:
        src, dst, device = _dma_refs(eqn.params["tree"], [_aval_of(v) for v in eqn.invars])
        src_ref, dst_ref = getattr(src, "ref", src), getattr(dst, "ref", dst)
        try:  # the same structure over the variables: which of the kernel's refs are copied
            src_var, dst_var, _ = _dma_refs(eqn.params["tree"], list(eqn.invars))
            src_name = self.names.get(id(getattr(src_var, "ref", src_var)), "ref")
            dst_name = self.names.get(id(getattr(dst_var, "ref", dst_var)), "ref")
        except Exception:
            src_name = dst_name = "ref"
        shape = _static_dims(src, src_ref, dst_ref)
        known = all(isinstance(d, (int, np.integer)) for d in getattr(src, "shape", ()))
        dtype = str(getattr(src, "dtype", ""))
        nbytes = int(math.prod(shape)) * (np.dtype(dtype).itemsize if dtype else 1)
        self.dmas.append(DmaInfo(
            source=src_name, destination=dst_name,
            src_space=memory_space(src_ref), dst_space=memory_space(dst_ref), shape=shape, dtype=dtype,
            bytes=nbytes, per_step=[times[0] if known else 0.0, times[1]], remote=device is not None,
            size_known=known, pipeline=self._in_pipeline > 0 and is_pipeline_copy(eqn)))


def grid_work(body: Body, kernel, steps: int, taken: dict[int, list[float]]) -> dict[str, list[float]]:
    """Each unit's [least, most] work over a grid of ``steps``: the kernel body's equations run at
    every step, but a top-level branch only at the steps that take it (``taken``: per cond, by its
    index among the body's equations, the steps that take each branch; branches.branch_steps)."""
    least, most = _work(), _work()
    for i, eqn in enumerate(kernel.eqns):
        counts = taken.get(i)
        if counts is None:
            lo, hi = body.work(kernel, [eqn])
            _add(least, lo, steps)
            _add(most, hi, steps)
            continue
        for branch, n in zip(eqn.params["branches"], counts):
            body._inherit(eqn, branch.jaxpr)
            lo, hi = body.work(branch.jaxpr)
            _add(least, lo, n)
            _add(most, hi, n)
    return {u: [float(least[u]), float(most[u])] for u in UNITS}


def short_src(src: str | None) -> str | None:
    """'kernel at /abs/path/file.py:48' -> 'kernel at path/file.py:48'."""

    if not src or " at " not in src:
        return src
    name, _, where = src.rpartition(" at ")
    path, _, line = where.rpartition(":")
    return f"{name} at {short_path(path)}:{line}" if path else src


def cost_estimate(ce) -> dict | None:
    if ce is None:
        return None
    return {k: int(getattr(ce, k)) for k in ("flops", "transcendentals", "bytes_accessed") if getattr(ce, k, None) is not None}


def f32_mxu_passes(eqn) -> int:
    """The bf16 MXU passes a dot_general of f32 operands takes at its precision (the most either
    operand asks; measured in Mosaic too: a HIGHEST f32 Pallas matmul at 2048^3, 542 us simulated
    against 523 us for 6 passes at the bf16 peak); 1 for any other operands."""
    if any(str(getattr(v.aval, "dtype", "")) != "float32" for v in eqn.invars[:2]):
        return 1
    asked = eqn.params.get("precision") or ()
    names = [str(getattr(p, "name", p)).lower() for p in (asked if isinstance(asked, tuple) else (asked,)) if p is not None]
    return max((F32_MXU_PASSES.get(n, 1) for n in names), default=1)
