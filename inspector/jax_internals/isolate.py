"""Some of a program's pallas_calls as a program of their own.

libtpu's static profile simulates a program op by op and stops at the first op it cannot simulate
(on the v5e, a DMA it does not model: "Unsupported DMA direction"); every op after it is left
without a time, Pallas kernels among them that it simulates well alone (moe's ragged_dot, stopped
by an XLA gather before it). This builds the program that holds only the chosen kernels, each
on parameters shaped as its operands, so that they can be simulated without the op that stopped it.
"""
from __future__ import annotations

import contextlib
from typing import Callable

from .evaluate import pallas_occurrences


def pallas_equations(closed_jaxpr) -> list:
    """Every pallas_call equation of the program, nested ones included, in the order they lower."""
    return [eqn for _, eqn in pallas_occurrences(closed_jaxpr.jaxpr) if eqn.primitive.name == "pallas_call"]


def with_grid(eqn, sizes: list | None):
    """The equation with its dynamic grid sizes (its leading operands) made static from ``sizes``
    (their values, in order); None when one is unknown. An equation with a static grid as is."""
    import dataclasses

    import numpy as np

    gm = eqn.params["grid_mapping"]
    dynamic = [i for i, d in enumerate(gm.grid) if not isinstance(d, (int, np.integer))]
    if not dynamic:
        return eqn
    if sizes is None or len(sizes) != len(dynamic) or any(v is None for v in sizes):
        return None
    grid = list(gm.grid)
    for i, v in zip(dynamic, sizes):
        grid[i] = int(np.asarray(v).reshape(-1)[0])
    params = dict(eqn.params, grid_mapping=dataclasses.replace(gm, grid=tuple(grid)))
    return eqn.replace(invars=eqn.invars[len(dynamic):], params=params)


def alone(equations: list, names: list[str] | None = None) -> tuple[Callable, tuple]:
    """(function, its abstract inputs): the function runs each equation on its own inputs, in order.
    Its operands' values are parameters: a kernel whose time depends on them (scalar prefetch) is
    simulated as libtpu simulates any parameter. ``names``: each kernel's name there (the name
    of its custom call), so that its op is known whatever XLA numbers it."""
    import jax

    if names is not None:
        equations = [eqn.replace(params=dict(eqn.params, name=name)) if "name" in eqn.params else eqn
                     for eqn, name in zip(equations, names)]

    avals = [[jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in e.invars] for e in equations]

    scopes: list[str | None] = list(names) if names else [None] * len(equations)

    def kernels_alone(*flat):
        outs, start = [], 0
        for eqn, ins, scope in zip(equations, avals, scopes):
            with jax.named_scope(scope) if scope else contextlib.nullcontext():  # XLA names the op after its scope
                outs.append(eqn.primitive.bind(*flat[start:start + len(ins)], **eqn.params))
            start += len(ins)
        return outs

    return kernels_alone, tuple(a for ins in avals for a in ins)
