"""What a Pallas kernel body does per grid step, read from its jaxpr: flops (a [min, max] range over
pl.when / lax.cond branches, loops multiplied by their trip counts), transcendentals, matmul shapes,
the largest values it builds, its DMAs and its run_scoped buffers (emit_pipeline's among them); and,
through vector_work.py, the work of each unit of the TensorCore. Shared by pallas_call (``pallas``) and
kernels over a core mesh (``mesh_kernels``).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..base.pallas_model import DmaInfo, ScratchInfo
from ..base.user_code import short_path
from .pipelines import is_pipeline_copy, is_pipeline_scope
from .tracing import sub_jaxprs
from .vector_work import NOT_CONST, VectorUnits, f32_mxu_passes

_TRANSCENDENTAL = {"exp", "log", "tanh", "logistic", "sin", "cos", "sqrt", "rsqrt", "pow", "exp2", "log1p", "expm1", "erf"}
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


class Body(VectorUnits):
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
        self._narrow: set[int] = set()  # id(var) of values in one lane: a (rows, 1) ref slice (Body.work)
        self._spread: set[int] = set()  # id(var) of those already broadcast across the lanes (Body.work)

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
                if k not in varying and (const := self._const(o)) is not NOT_CONST:
                    self._consts[id(i)] = const
                if id(o) in self._narrow:
                    self._narrow.add(id(i))
                else:
                    self._narrow.discard(id(i))

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
