"""A Mosaic GPU kernel's module (MLIR bytecode) read through jax's private MLIR bindings: the
launch it holds (families/gpu/kernels/mosaic_gpu.py says why that is where the figures are)."""
from __future__ import annotations

import functools
from typing import NamedTuple


class ModuleLaunch(NamedTuple):
    name: str
    grid: tuple[int, ...]
    threads: tuple[int, ...]
    shared_memory_bytes: int


def _constant(value) -> int | None:
    """The integer an ``arith.constant`` value holds; None for a computed one."""
    from jax._src.lib.mlir import ir

    owner = value.owner
    if not getattr(owner, "name", "").endswith("arith.constant"):
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


# gpu.launch's operand groups, in order (operandSegmentSizes gives each one's count)
_GROUPS = ("async", "grid", "grid", "grid", "block", "block", "block", "cluster", "cluster", "cluster", "shared")


@functools.lru_cache(maxsize=64)
def read_module(bytecode: bytes) -> ModuleLaunch | None:
    """The launch in one Mosaic GPU module (bytecode, its ops renamed ``stable_mosaic_gpu.*`` for
    a stable form): its kernel name, grid, threads and dynamic shared memory; None when it holds no
    ``gpu.launch`` with constant sizes."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context() as context, ir.Location.unknown():
        context.allow_unregistered_dialects = True  # its ops are read generically: no dialect is needed
        module = ir.Module.parse(bytecode)
        launches: list = []

        def visit(op):
            if op.name.endswith("gpu.launch"):
                launches.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        if not launches or "operandSegmentSizes" not in launches[0].attributes:
            return None
        launch = launches[0]
        counts = list(ir.DenseI32ArrayAttr(launch.attributes["operandSegmentSizes"]))
        if len(counts) != len(_GROUPS):
            return None  # a gpu.launch of another form: not guessed at
        values: dict[str, list] = {}
        operands = iter(launch.operands)
        for group, count in zip(_GROUPS, counts):
            values.setdefault(group, []).extend(_constant(next(operands)) for _ in range(count))
        grid, block, shared = values["grid"], values["block"], values["shared"] or [0]
        if None in grid + block + shared:
            return None
        name = _kernel_name(module, launch)
    return ModuleLaunch(name, tuple(grid), tuple(block), shared[0])


def _kernel_name(module, launch) -> str:
    """The module's name (Pallas names it after the kernel function), else the launching function's."""
    from jax._src.lib.mlir import ir

    if "sym_name" in module.operation.attributes:
        return ir.StringAttr(module.operation.attributes["sym_name"]).value
    parent = launch.parent
    while parent is not None and "sym_name" not in parent.attributes:
        parent = parent.parent
    return ir.StringAttr(parent.attributes["sym_name"]).value.removesuffix("_mosaic_gpu") if parent else "mosaic_gpu"
