"""Block indices a TPU compile would abort on, found before compiling.

An index map that returns a constant block index past the array (or below 0) is checked by
libtpu while it compiles, and libtpu 0.0.42.1 then ends the whole process (SIGABRT, ``Check
failed: llo::CouldLtS32(digits[i], bounds[i])`` in windowing_util) instead of reporting an error:
measured on v5e for an input and an output block, and for an output block on v4, v5p, v6e and
TPU7x. A traced index past the end compiles (and reads what lies there); the grid walk reports those. So the inspector does not start such a
compile: the constant index is a compile-time fact, and this is the error the compile would give.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..base.pallas_model import BlockSpecInfo


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadBlockIndex:
    kernel: str
    operand: str
    role: str  # input | output
    index: list[int]  # the block index the map returns
    dim: int  # the first dimension out of range
    blocks: int  # how many blocks there are along it
    index_map: str
    index_map_source: str | None
    pallas_call: str | None

    @property
    def message(self) -> str:
        """In the words the error table recognises (error_kinds.BLOCK_INDEX)."""
        return (f"block index {self.index[self.dim]} in dimension {self.dim} is out of range [0, {self.blocks}): the "
                f"BlockSpec of {self.role} {self.operand} of {self.kernel} maps every grid step to block "
                f"{tuple(self.index)} (index map {self.index_map}); libtpu would abort compiling it")


def _blocks_along(op: BlockSpecInfo, dim: int) -> int | None:
    kind = op.dim_kinds[dim] if dim < len(op.dim_kinds) else "blocked"
    size = op.array_shape[dim]
    if kind == "squeezed":
        return size
    block = op.block_shape[dim]
    if kind != "blocked" or block is None or block == 0:
        return None  # element offsets and bounded slices are not block indices
    return math.ceil(size / block)


def bad_block_indices(calls: list[tuple[str, str | None, list[BlockSpecInfo]]]) -> list[BadBlockIndex]:
    """Every pipelined BlockSpec whose index map returns a constant index out of range; ``calls``:
    (name, file:line, BlockSpecs) per pallas_call (jax_internals.pallas.block_specs)."""
    found = []
    for name, source, operands in calls:
        for op in operands:
            if not op.fixed_window or op.fixed_index is None or not op.pipelined or op.resident:
                continue
            for dim, index in enumerate(op.fixed_index[:len(op.array_shape)]):
                blocks = _blocks_along(op, dim)
                if blocks is not None and not 0 <= index < blocks:
                    found.append(BadBlockIndex(kernel=name, operand=op.operand, role=op.role, index=list(op.fixed_index), dim=dim, blocks=blocks,
                                               index_map=op.index_map, index_map_source=op.index_map_source, pallas_call=source))
                    break
    return found
