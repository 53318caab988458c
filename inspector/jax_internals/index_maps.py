"""A BlockSpec's block shape and index map as data a walk can use: the kind of each block dimension,
and the index map as a function of grid index arrays (vectorised). Read by the pallas_call reader
(pallas.py) and by what follows a kernel's reads of its inputs (kernel_input_reads.py)."""
from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

Box = tuple[tuple[int, int], ...]  # per dimension, [start, stop) of the elements of an array a block or a read covers


def dim_kind(dim) -> tuple[str, int | None]:
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


def discharged(closed) -> tuple:
    """(jaxpr, consts) of ``closed`` with its refs turned into plain values. jax 0.10.1 takes and
    returns a ClosedJaxpr; 0.10.0 a jaxpr and its consts."""
    from jax._src.state import discharge

    if "closed_jaxpr" in inspect.signature(discharge.discharge_state).parameters:
        pure = discharge.discharge_state(closed)
        return pure.jaxpr, pure.consts
    return discharge.discharge_state(closed.jaxpr, closed.consts)  # type: ignore[call-arg, return-value]  # older jax


_IDENTITY_HINTS = ("multiple_of",)


def _eval_without_hints(jaxpr, consts, *args) -> list:
    """core.eval_jaxpr, except that identity hints pass their operand through (the grid walk
    vmaps index maps, and a hint without a batching rule would stop it)."""
    from jax._src import core

    env: dict = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if eqn.primitive.name in _IDENTITY_HINTS:
            outs = ins[:1]
        else:
            bound = eqn.primitive.get_bind_params(eqn.params)  # jax 0.10: the params; older: (subfuns, params)
            subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
            outs = eqn.primitive.bind(*subfuns, *ins, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def index_map_callable(closed, prefetch: list | None, n_grid: int) -> Callable:
    """f(*grid index arrays) -> block index arrays. Index maps that read scalar-prefetch refs get
    them discharged into plain values and bound to the prefetch data (when it is known)."""
    import jax

    if prefetch is None:
        def one(*idx):
            return tuple(_eval_without_hints(closed.jaxpr, closed.consts, *idx))
    else:
        pure_jaxpr, pure_consts = discharged(closed)
        values = [jax.numpy.asarray(v) for v in prefetch]

        def one(*idx):
            outs = _eval_without_hints(pure_jaxpr, pure_consts, *idx, *values)
            return tuple(outs[:len(closed.jaxpr.outvars)])  # the rest are the (unchanged) refs

    if n_grid == 0:  # no grid: one step, nothing to vectorise over
        fn = jax.jit(one)
        return lambda *idx: fn()
    return jax.jit(jax.vmap(one))


def is_dynamic_dim(d) -> bool:
    """A grid dimension whose size is a traced value (jax's placeholder, not an int)."""
    return not isinstance(d, (int, np.integer))
