"""The programs an estimate compiles: the user's program with each Pallas grid as the plan says
(whole, or cut to fewer steps), or its Pallas kernels alone in a program of their own
(jax_internals/isolate.py), and the requests a dump child compiles them from.

A Pallas kernel is known by the HLO op XLA names its custom call (``matmul.1``) in the program,
and by its place in lowering order in both programs: the alone program's ops are renamed back.
"""
from __future__ import annotations

import dataclasses
import math

from ..compilation.backends import Backend
from ..compilation.target import Target
from ..hlo.module import parse_shape
from ..jax_internals.aot import GridRecord, compile_request, grids_replaced
from ..jax_internals.branches import Guard
from ..jax_internals.evaluate import leading_values
from ..jax_internals.isolate import alone, pallas_equations, with_grid
from .plan import PallasGrid


@dataclasses.dataclass
class Program:
    """One program to compile (the target's own, or its Pallas kernels alone) and how its Pallas
    kernels' lowering order maps to the program's HLO ops."""

    target: Target
    backend: Backend
    topology: str
    ops: dict[int, str] = dataclasses.field(default_factory=dict)  # lowering index -> the op it answers for
    # per Pallas kernel in lowering order: (its dynamic grid sizes, its scalar prefetch values) where known
    known: list | None = None

    def request(self, grids: dict[str, tuple[int, ...]] | None = None, force: str | None = None):
        """The program lowered with each Pallas kernel at the grid ``grids`` gives its op (its own
        grid where none is given); with ``force``, each kernel's costliest guard taken at every
        step ("heavy") or at none ("light"). Returns (CompileRequest or None where it does not
        lower, GridRecords)."""
        from ..compilation.stages import lowered_program  # (numpy, jax: only when an estimate runs)

        grids = grids or {}
        lowered_so_far: list = []

        def choose(grid, semantics):  # called before the kernel's record joins the list
            op = self.ops.get(len(lowered_so_far))
            return grids.get(op, grid) if op is not None else grid

        known = self.values()
        with grids_replaced(choose, force=force, prefetch=[prefetch for _, prefetch in known]) as records:
            lowered_so_far = records
            _, lowered, _ = lowered_program(self.target, self.backend, memo=False)
        # a program that does not lower so (a grid cut below what its index maps or scalar prefetch tables allow)
        return (None if lowered is None else compile_request(lowered, self.topology)), list(records)

    def values(self) -> list:
        if self.known is None:
            from ..compilation.stages import lowered_program  # (jax: only when an estimate runs)

            capture, _, _ = lowered_program(self.target, self.backend)
            self.known = leading_values(capture.program.closed_jaxpr, capture.program.example_values)
        return self.known


def name_pallas(records: list[GridRecord], pallas_kernels: list) -> tuple[dict[int, str], list[int]]:
    """Each record's HLO op: custom calls are named after their pallas_call ("matmul" ->
    "matmul.1"), in program order; where XLA names one otherwise (after jax's name stack under
    grad: "transpose_jvp___.3"), the one free op whose results have the record's shapes; by
    position when both fail. Returns (lowering index -> op, the indices whose grid is sized at run
    time)."""
    free = list(pallas_kernels)
    names: dict[int, str] = {}
    for index, record in enumerate(records):
        match = next((k for k in free if record.name and k.name.rsplit(".", 1)[0] == record.name), None)
        if match is not None:
            free.remove(match)
            names[index] = match.name
    for index, record in enumerate(records):
        shaped = [k for k in free if record.outputs is not None and _result_shapes(k) == record.outputs]
        if index not in names and len(shaped) == 1:
            free.remove(shaped[0])
            names[index] = shaped[0].name
    if len(records) == len(pallas_kernels):
        for index in range(len(records)):
            if index not in names and pallas_kernels[index] in free:
                free.remove(pallas_kernels[index])
                names[index] = pallas_kernels[index].name
    return names, [i for i in sorted(names) if None in records[i].grid]


def _result_shapes(kernel) -> tuple[tuple[int, ...], ...] | None:
    """An HLO op's results' dimensions, from its outputs' shapes ("f32[4,16,256]")."""
    shapes = [parse_shape(t.shape or "") for t in getattr(kernel, "outputs", None) or ()]
    return None if any(len(s) != 1 for s in shapes) else tuple(s[0].dims for s in shapes)


def pallas_grids(records: list[GridRecord], names: dict[int, str], dynamic: list[int], known: list) -> tuple[list[PallasGrid], dict[str, Guard]]:
    """The plan's view of each named Pallas kernel (a grid sized at run time at the sizes the
    example inputs give, where they do), and each kernel's costliest guard."""
    found, guards = [], {}
    for index, op in sorted(names.items()):
        record = records[index]
        grid = record.grid
        if index in dynamic:
            sizes = known[index][0] if index < len(known) else None
            if sizes is None or len(sizes) != grid.count(None) or any(v is None for v in sizes):
                continue  # its grid is unknown until it runs: not simulated, its floor stands
            values = iter(int(_scalar(v)) for v in sizes)
            grid = tuple(g if g is not None else next(values) for g in grid)
        found.append(PallasGrid(op=op, index=index, grid=tuple(int(g or 0) for g in grid), semantics=record.semantics,
                                guarded=record.guard is not None, dynamic=index in dynamic))
        if record.guard is not None:
            guards[op] = record.guard
    return found, guards


def _scalar(value) -> int:
    import numpy as np

    return int(np.asarray(value).reshape(-1)[0])


def alone_program(program: Program, kernels: list[PallasGrid]) -> Program | None:
    """The program of ``kernels`` alone (their grids static at the sizes given), or None where
    their equations cannot be paired with their ops."""
    from ..compilation.stages import lowered_program  # (jax: only when an estimate runs)

    capture, _, _ = lowered_program(program.target, program.backend)
    equations = pallas_equations(capture.program.closed_jaxpr)
    known = program.values()
    if len(equations) != len(known) or any(p.index >= len(equations) for p in kernels):
        return None  # a kernel lowered once and run twice: no sure pairing with its op
    chosen = [(p, with_grid(equations[p.index], known[p.index][0])) for p in sorted(kernels, key=lambda p: p.index)]
    chosen = [(p, eqn) for p, eqn in chosen if eqn is not None]
    if not chosen:
        return None
    fn, args = alone([eqn for _, eqn in chosen], names=[alone_name(i) for i in range(len(chosen))])
    target = dataclasses.replace(program.target, fn=fn, args=args, kwargs={}, params={}, reference=None)
    return Program(target=target, backend=program.backend, topology=program.topology,
                   ops={i: p.op for i, (p, _) in enumerate(chosen)},
                   known=[(None, known[p.index][1]) for p, _ in chosen])


ALONE = "inspector_alone_"  # what a kernel is called in the program of kernels alone


def alone_name(index: int) -> str:
    return f"{ALONE}{index}"


def original_op(op: str, ops: dict[int, str]) -> str | None:
    """The program's op for an op of the alone program (``inspector_alone_2.1`` -> the third
    kernel's), None for another op."""
    stem = op.rsplit(".", 1)[0]
    if not stem.startswith(ALONE) or not stem[len(ALONE):].isdigit():
        return None
    return ops.get(int(stem[len(ALONE):]))


def steps_used(records: list[GridRecord], ops: dict[int, str]) -> dict[str, tuple[int, ...]]:
    """Op -> the grid it was lowered at, for the named kernels of a compile."""
    return {ops[i]: tuple(int(g or 0) for g in r.used) for i, r in enumerate(records) if i in ops and None not in r.used}


def steps(grid) -> int:
    return math.prod(grid)
