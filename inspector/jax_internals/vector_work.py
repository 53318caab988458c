"""The work of each unit of the TensorCore in a Pallas kernel body, per grid step (``Body.work``,
``grid_work``): matmul flops and the MXU's (an f32 matmul's bf16 passes each counted), VALU, EUP and
XLU instructions, each on one 8 x 128 register; what the compiler folds away (constants, x + 0,
unused values) not counted. A part of the body walk (kernel_body.Body), which mixes it in.

The counts follow libtpu's VLIW bundles of the same bodies (LLO dumps of deviceless compiles,
libtpu 0.0.42.1; the causal flash sample's grid step and one-op kernels on v5e, v5p, v6e, TPU7x):
an elementwise op is one VALU instruction a register of its result; exp is a VALU multiply (by
log2 e), then the EUP's pow2, whose result a VALU slot pops (vpop.eup); a reduction over the lanes
folds its registers into one a row of registers on the VALU, then one XLU instruction a register
(vmax.xlane) leaves the result in every lane; a (rows, 1) value taken from a ref or computed from one
is broadcast across the lanes by one XLU instruction a register of rows (vperm), once per value."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..base.chips import F32_MXU_PASSES
from .tracing import sub_jaxprs

# Elementwise primitives the VPU runs, one VALU instruction per register of the result; and those
# that take at least one EUP instruction a register, whose result the VALU pops (one more VALU
# instruction a register), exp and log beside it a VALU multiply (by log2 e, ln 2: the EUP's
# pow2 and log2). Others (sin, erf: polynomials or more) are left out: the counts stay lower bounds.
_VPU_OPS = {"add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil",
            "round", "select_n", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "xor", "clamp",
            "convert_element_type", "integer_pow", "square", "shift_left", "shift_right_logical",
            "shift_right_arithmetic", "is_finite"}
_EUP_OPS = {"exp", "exp2", "log", "tanh", "logistic", "rsqrt", "sqrt", "pow"}
_EUP_VALU = {"exp": 2, "log": 2}  # VALU instructions a register beside the EUP's (the pop, the scaling); others 1
# a reduction folds its operand's registers into the result's with one VALU instruction each; over
# the lanes, one XLU instruction a register of the folded rows then reduces across them
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin"}
# Body.work's keys: matmul flops as XLA counts them, the MXU's (an f32 matmul's bf16 passes each
# counted), VALU, EUP and XLU (cross-lane) instructions, and of the VALU's those of 16-bit float
# arithmetic on packed registers (a chip without 16-bit VALU ops, v4 and v5, runs each in f32 on
# both halves: libtpu's bundles of bf16 y * y + y, 256 vmul.f32 and vadd.f32 on v5e for 128 vmul.bf16
# and vadd.bf16 on v6e, besides the unpacks and packs, which vary with what follows, not counted)
UNITS = ("flops", "mxu", "vpu", "eup", "xlu", "vpu16")
_PACKED_ARITHMETIC = {"add", "add_any", "sub", "mul", "div", "max", "min", "neg", "abs", "integer_pow", "square", "clamp"}
Work = dict[str, float]  # unit -> its work (UNITS)
# ops through which a (rows, 1) value taken from a ref stays in one lane (a lane reduction's result,
# by contrast, is in every lane: vmax.xlane leaves it so, and broadcasting it takes nothing)
_LANE_KEEPING = _VPU_OPS | _EUP_OPS | {"broadcast_in_dim", "reshape", "squeeze", "expand_dims"}


def _work() -> Work:
    return dict.fromkeys(UNITS, 0.0)


def _add(into: Work, work: Work, times: float = 1.0) -> None:
    for unit, n in work.items():
        into[unit] += times * n


NOT_CONST = object()
# x op c == x: what the compiler folds away (arith's canonical folds); x * 0 and x & 0 fold to 0
_IDENTITY = {"add": 0, "add_any": 0, "or": 0, "xor": 0, "mul": 1, "shift_left": 0, "shift_right_logical": 0,
             "shift_right_arithmetic": 0}
_IDENTITY_RIGHT = {"sub": 0, "div": 1}  # only as the second operand


def _absorbs(p: str, c, position: int) -> bool:
    """Does constant ``c`` at ``position`` make op ``p`` fold (its result the other operand, or 0)?"""
    if c is NOT_CONST or c is None:
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


def _lane_narrow(aval) -> bool:
    """A (..., rows, 1) value: one lane of each register holds it (Mosaic's layout of a lane slice)."""
    shape = tuple(getattr(aval, "shape", ()))
    return len(shape) >= 2 and shape[-1] == 1


def _row_registers(aval, extent: tuple | None = None) -> int:
    """The registers one lane-wide column of ``aval`` fills: one a register of rows (8 of 32-bit
    values, 16 of 16-bit), what an XLU instruction a register takes across the lanes."""
    shape = tuple(getattr(aval, "shape", ()) if extent is None else extent)
    return vregs(aval, shape[:-1] + (1,)) if shape else 0


class VectorUnits:
    """Body's count of each unit's work: mixed into kernel_body.Body, whose walk state it reads."""

    # what it keeps, made by Body.__init__: per jaxpr its used equations, the values the compiler
    # knows, the extents broadcasts made
    _lives: dict[int, set[int]]
    _consts: dict[int, Any]
    _extents: dict[int, tuple]
    _narrow: set[int]  # values that sit in one lane (a (rows, 1) ref slice, or made from one)
    _spread: set[int]  # narrow values already broadcast across the lanes (the compiler does it once)

    # the walk's steps it takes (kernel_body.Body's)
    def _inherit(self, eqn, sub) -> None:
        raise NotImplementedError

    def _value(self, v) -> int | None:
        raise NotImplementedError

    def _fold(self, eqn) -> None:
        raise NotImplementedError

    def _trips(self, eqn) -> int | None:
        raise NotImplementedError

    def work(self, jaxpr, eqns=None) -> tuple[Work, Work]:
        """(least, most) work of each unit (UNITS) one run of ``jaxpr`` (or of those of its
        ``eqns``) takes: a branch not known here takes its cheapest side per unit in the least, its
        costliest in the most; a loop its trips (a while loop of unknown trips: none in the least,
        one in the most). What the compiler removes is not counted: values nothing uses, and ops it
        folds (on constants, or with an operand that leaves the other unchanged: x + 0, x * 1).
        Call after ``visit``, whose walk learnt the integer values that decide branches and trips."""
        live = self._live(jaxpr)
        least, most = _work(), _work()
        if eqns is None:  # a walk afresh (a jaxpr called twice, jnp.where's): what the last one learnt of its values goes
            made = {id(v) for v in jaxpr.invars} | {id(v) for e in jaxpr.eqns for v in e.outvars}
            self._spread -= made
            self._narrow -= made - {id(v) for v in jaxpr.invars}
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
                    if len(sub.outvars) == len(eqn.outvars):  # (jnp.where and the like: a pjit of their own)
                        self._narrow.update(id(o) for o, i in zip(eqn.outvars, sub.outvars) if id(i) in self._narrow)
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
        """The VALU, EUP and XLU instructions of one equation, one a register of its result; none
        where the compiler folds it: all operands constant, or one that leaves the other as it is.
        A value made of broadcasts alone is counted at its distinct extent (_extent_of)."""
        p, done = eqn.primitive.name, _work()
        consts = [self._const(v) for v in eqn.invars]
        if eqn.invars and all(c is not NOT_CONST for c in consts) and not eqn.effects:
            self._consts[id(eqn.outvars[0])] = _fold_const(p, consts, eqn)
            return done
        if p == "get" and eqn.outvars and _lane_narrow(eqn.outvars[0].aval):
            self._narrow.add(id(eqn.outvars[0]))  # a (rows, 1) slice of a ref: its values sit in one lane
        elif p in _LANE_KEEPING and any(id(v) in self._narrow for v in eqn.invars) and eqn.outvars:
            self._narrow.add(id(eqn.outvars[0]))
        if p == "broadcast_in_dim" and eqn.invars:
            inner, shape = self._extent_of(eqn.invars[0]), eqn.outvars[0].aval.shape
            spread = [1] * len(shape)
            for k, d in enumerate(eqn.params["broadcast_dimensions"]):
                spread[d] = inner[k] if k < len(inner) else 1
            self._extents[id(eqn.outvars[0])] = tuple(spread)
            source = eqn.invars[0]
            if id(source) in self._narrow and shape and shape[-1] > 1:
                self._narrow.discard(id(eqn.outvars[0]))  # across the lanes now
                if id(source) not in self._spread:  # the compiler broadcasts a value once, however often used
                    self._spread.add(id(source))
                    done["xlu"] = _row_registers(eqn.outvars[0].aval, tuple(spread))
            return done
        if p == "iota" and eqn.outvars:  # varies along one dim only: Mosaic keeps it replicated along the others
            shape = eqn.outvars[0].aval.shape
            along = eqn.params.get("dimension", 0)
            self._extents[id(eqn.outvars[0])] = tuple(d if k == along else 1 for k, d in enumerate(shape))
        if p not in _VPU_OPS and p not in _EUP_OPS and p not in _REDUCTIONS:
            return done
        if p in _REDUCTIONS:
            operand = eqn.invars[0]
            rank, extent = len(operand.aval.shape), self._extent_of(operand)
            if rank and rank - 1 in eqn.params.get("axes", ()) and extent[-1] > 1:  # across the lanes: the XLU finishes each row
                rows = _row_registers(operand.aval, extent)
                done["vpu"], done["xlu"] = max(vregs(operand.aval, extent) - rows, 0), rows
            else:
                done["vpu"] = max(vregs(operand.aval, extent) - vregs(eqn.outvars[0].aval), 0)
            return done
        rank = len(eqn.outvars[0].aval.shape)
        extents = [self._extent_of(v) for v in eqn.invars]
        same = [e for e in extents if len(e) == rank]  # (scalar operands broadcast: extent 1)
        extent = tuple(max((e[d] for e in same), default=1) for d in range(rank))
        if len(consts) == 2 and any(_absorbs(p, c, k) for k, c in enumerate(consts)):
            if p in ("mul", "and") and 0 in consts:
                self._consts[id(eqn.outvars[0])] = 0
            else:  # the other operand, as it is
                self._extents[id(eqn.outvars[0])] = extents[1 if consts[0] is not NOT_CONST else 0]
            return done
        self._extents[id(eqn.outvars[0])] = extent
        out = vregs(eqn.outvars[0].aval, extent)
        wide = eqn.outvars[0].aval.shape[-1] > 1 if rank else False
        for v in eqn.invars if wide else ():  # a (rows, 1) operand taken across the lanes (implicit broadcast)
            if id(v) in self._narrow and v.aval.shape[-1:] == (1,) and id(v) not in self._spread:
                self._spread.add(id(v))
                done["xlu"] += _row_registers(eqn.outvars[0].aval, extent)
        if wide:
            self._narrow.discard(id(eqn.outvars[0]))
        if p in _VPU_OPS:
            done["vpu"] = out
            if p in _PACKED_ARITHMETIC and str(eqn.outvars[0].aval.dtype) in ("bfloat16", "float16"):
                done["vpu16"] = out
            if p == "div" and np.issubdtype(np.dtype(eqn.outvars[0].aval.dtype), np.floating):
                done["eup"], done["vpu"] = out, 2 * out  # a reciprocal, popped, then the VALU's multiply
        else:
            done["eup"], done["vpu"] = out, _EUP_VALU.get(p, 1) * out
        return done

    def _extent_of(self, v) -> tuple:
        """A value's distinct extent per dim (its shape, but 1 along dims it is broadcast along)."""
        shape = tuple(getattr(getattr(v, "aval", None), "shape", ()))
        return self._extents.get(id(v), shape) if not hasattr(v, "val") else tuple(1 for _ in shape)

    def _const(self, v):
        """A value the compiler knows: its scalar (a literal, a splat of one), None where it is
        constant but not a splat here; NOT_CONST otherwise."""
        if hasattr(v, "val"):
            try:
                value = np.asarray(v.val)
            except (TypeError, ValueError):
                return None
            return value.item() if value.ndim == 0 else None
        return self._consts.get(id(v), NOT_CONST)


def grid_work(body: VectorUnits, kernel, steps: int, taken: dict[int, list[float]]) -> dict[str, list[float]]:
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


def f32_mxu_passes(eqn) -> int:
    """The bf16 MXU passes a dot_general of f32 operands takes at its precision (the most either
    operand asks; measured in Mosaic too: a HIGHEST f32 Pallas matmul at 2048^3, 542 us simulated
    against 523 us for 6 passes at the bf16 peak); 1 for any other operands."""
    if any(str(getattr(v.aval, "dtype", "")) != "float32" for v in eqn.invars[:2]):
        return 1
    asked = eqn.params.get("precision") or ()
    names = [str(getattr(p, "name", p)).lower() for p in (asked if isinstance(asked, tuple) else (asked,)) if p is not None]
    return max((F32_MXU_PASSES.get(n, 1) for n in names), default=1)
