"""The integer scalars a Pallas kernel body computes from its scalar-prefetch values before its
loops: a grouped matmul's tile count (tokamax's gmm fills an SMEM table from the group sizes with
fori_loops and runs its emit_pipeline over that many tiles), the bound of a loop over a sparse
row's nonzeros. With the example inputs' prefetch values these are known before the kernel runs,
so the body's loops over them count their trips (kernel_body.py) instead of once.

Only the body's own scalar code is evaluated: the equations the values need, over the body's SMEM
refs (the prefetch operands and SMEM scratch), with the refs discharged into arrays and run by
jax on the host. A value that reads anything else (a VMEM or HBM ref, a program id) stays unknown,
and so does one that changes with what an SMEM scratch held before the kernel wrote it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .kernel_body import memory_space
from .tracing import sub_jaxprs

_MAX_ELEMENTS = 1 << 20  # an SMEM ref past this is no scalar table


def prefetch_scalars(kernel, prefetch: list, n_prefetch: int) -> dict[int, int]:
    """id(var) -> value, for the kernel body's top-level integer scalars that its nested code
    (loops, run_scoped regions, branches) receives and that the prefetch values decide."""
    if not prefetch or kernel.constvars:
        return {}
    try:
        smem = {id(v) for v in kernel.invars if _space(v) == "smem" and _elements(v) <= _MAX_ELEMENTS}
        targets = [v for v in _loop_operands(kernel) if _decidable(kernel.eqns, v, smem)]
        if not targets:
            return {}
        eqns, _ = _needed(kernel.eqns, targets)
        run = _discharged(kernel, eqns, targets)
        first, second = run(prefetch[:n_prefetch], 0), run(prefetch[:n_prefetch], 1)
    except Exception:  # a primitive with no discharge or host rule, another jax's layout: those values stay unknown
        return {}
    return {id(v): int(a) for v, a, b in zip(targets, first, second)
            if np.ndim(a) == 0 and np.array_equal(a, b)}


def _loop_operands(kernel) -> list:
    seen, found = set(), []
    for eqn in kernel.eqns:
        if not sub_jaxprs(eqn.params):
            continue
        for v in eqn.invars:
            aval = getattr(v, "aval", None)
            if (hasattr(v, "val") or id(v) in seen or getattr(aval, "shape", None) != ()
                    or not np.issubdtype(getattr(aval, "dtype", np.float32), np.integer)):
                continue
            seen.add(id(v))
            found.append(v)
    defined = {id(v) for e in kernel.eqns for v in e.outvars}
    return [v for v in found if id(v) in defined]


def _decidable(eqns: list, target, smem: set[int]) -> bool:
    """``target`` is made of scalar code over SMEM refs alone (no program id)."""
    needed, refs = _needed(eqns, [target])
    return bool(needed) and refs <= smem and not any(_reads_program(e) for e in needed)


def _needed(eqns: list, targets: list) -> tuple[list, set[int]]:
    """The equations ``targets`` depend on (those that write a ref they read, too), in order, and
    the refs those read or write."""
    from jax._src.state.types import AccumEffect, WriteEffect

    vars_, chosen = {id(v) for v in targets}, []
    refs: set[int] = set()
    for eqn in reversed(eqns):
        written = {id(eqn.invars[i]) for i in (_position(e) for e in eqn.effects if isinstance(e, (WriteEffect, AccumEffect)))
                   if i is not None and i < len(eqn.invars)}
        if not (any(id(v) in vars_ for v in eqn.outvars) or written & refs):
            continue
        chosen.append(eqn)
        for v in eqn.invars:
            if hasattr(v, "val"):
                continue
            (refs if _is_ref(v) else vars_).add(id(v))
    return chosen[::-1], refs


def _position(effect) -> int | None:
    """The operand an effect is on (``input`` in jax 0.10.2, ``input_index`` before)."""
    position = getattr(effect, "input", getattr(effect, "input_index", None))
    return position if isinstance(position, int) else None


def _discharged(kernel, eqns: list, targets: list):
    """A function (prefetch values, fill of the other SMEM refs) -> the targets' values."""
    from jax._src import core
    from jax._src.state import discharge

    effects = core.join_effects(*(e.effects for e in eqns))
    info: Any = kernel.debug_info._replace(result_paths=("",) * len(targets)) if kernel.debug_info else None
    jaxpr = core.Jaxpr([], list(kernel.invars), list(targets), list(eqns), effects, info)
    discharge_state: Any = discharge.discharge_state
    try:  # jax 0.10.2: a ClosedJaxpr in, a ClosedJaxpr out
        closed = discharge_state(core.ClosedJaxpr(jaxpr, []))
        functional, consts = closed.jaxpr, closed.consts
    except TypeError:  # jax 0.10.0 and 0.10.1: (jaxpr, consts) in and out
        functional, consts = discharge_state(jaxpr, [])

    def run(prefetch: list, fill: int) -> list:
        args = [np.asarray(prefetch[i]) if i < len(prefetch) else
                np.full(v.aval.shape, fill, v.aval.dtype) if _space(v) == "smem" else None
                for i, v in enumerate(kernel.invars)]
        return [np.asarray(x) for x in core.eval_jaxpr(functional, consts, *args)[:len(targets)]]

    return run


def _reads_program(eqn) -> bool:
    """A program id or core count: known only on the chip, per grid step."""
    if eqn.primitive.name in ("program_id", "num_programs", "core_index"):
        return True
    return any(_reads_program(e) for sub in sub_jaxprs(eqn.params) for e in sub.eqns)


def _is_ref(v) -> bool:
    from jax._src.state.types import AbstractRef

    return isinstance(getattr(v, "aval", None), AbstractRef)


def _space(v) -> str | None:
    return memory_space(v.aval) if _is_ref(v) else None


def _elements(v) -> int:
    return int(np.prod(getattr(v.aval, "shape", ()) or (1,)))
