"""How many blocks (CTAs) of a kernel an SM holds at once, and in how many waves its grid runs:
the CUDA occupancy calculator's arithmetic (cuda_occupancy.h, cudaOccMaxActiveBlocksPerMultiprocessor)
on the kernel's launch (threads per block, dynamic shared memory: the thunk sequence) and its
registers per thread (ptxas), with the chip's facts from inspector/base/chips.py. Plain data in and out."""
from __future__ import annotations

import dataclasses
import math

from ....base.chips import Chip

REGISTERS, SHARED_MEMORY, WARPS, CTAS = "registers", "shared memory", "threads", "CTAs per SM"
WARP = 32  # threads a warp (every NVIDIA GPU)


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """A kernel's blocks per SM under each limit, the least of them, and the waves its grid takes."""

    ctas_per_sm: int  # 0: one block does not fit an SM (the launch would fail)
    limits: tuple[str, ...]  # the limits that bind (equal to ctas_per_sm), in the calculator's order
    by_registers: int | None  # None: no ptxas figure, so the register limit is unknown
    by_shared_memory: int
    by_threads: int
    by_ctas: int
    warps_per_sm: int  # resident warps at ctas_per_sm
    occupancy: float  # resident warps over the SM's most
    waves: float | None  # grid blocks / (ctas_per_sm x SMs); None when no block fits

    @property
    def limit(self) -> str:
        """What binds, in words (ties joined); "at most" where registers are unknown."""
        return ("at most: " if self.by_registers is None else "") + ", ".join(self.limits)


def occupancy(chip: Chip, *, threads: int, blocks: int, shared_memory_bytes: int,
              registers: int | None) -> Occupancy | None:
    """The occupancy of a launch of ``blocks`` blocks of ``threads`` threads on ``chip``; None when
    the chip's row lacks the facts (a spec-only GPU) or the launch has no threads."""
    needed = (chip.sms, chip.registers_per_sm, chip.shared_mem_per_sm, chip.max_ctas_per_sm, chip.max_warps_per_sm,
              chip.register_alloc_unit, chip.sm_subpartitions, chip.shared_mem_alloc_unit,
              chip.reserved_shared_mem_per_block, chip.shared_mem_per_block)
    if any(n is None for n in needed) or threads <= 0:
        return None
    assert chip.sms and chip.max_warps_per_sm and chip.max_ctas_per_sm  # (checked above: for the types)
    warps = math.ceil(threads / WARP)
    by_threads = chip.max_warps_per_sm // warps
    by_registers = None if registers is None else _by_registers(chip, registers, warps)
    by_shared_memory = _by_shared_memory(chip, shared_memory_bytes)
    by = {REGISTERS: by_registers, SHARED_MEMORY: by_shared_memory, WARPS: by_threads, CTAS: chip.max_ctas_per_sm}
    known = {name: n for name, n in by.items() if n is not None}
    least = min(known.values())
    return Occupancy(ctas_per_sm=least, limits=tuple(name for name, n in known.items() if n == least),
                     by_registers=by_registers, by_shared_memory=by_shared_memory, by_threads=by_threads,
                     by_ctas=chip.max_ctas_per_sm, warps_per_sm=least * warps,
                     occupancy=least * warps / chip.max_warps_per_sm,
                     waves=blocks / (least * chip.sms) if least else None)


def _by_registers(chip: Chip, registers: int, warps: int) -> int:
    """Blocks by registers: each warp is given registers x 32 rounded up to the allocation unit,
    from one sub-partition's share of the register file (a warp lives on one scheduler)."""
    assert chip.register_alloc_unit and chip.registers_per_sm and chip.sm_subpartitions
    per_warp = math.ceil(registers * WARP / chip.register_alloc_unit) * chip.register_alloc_unit
    if per_warp == 0:
        return chip.max_ctas_per_sm or 0
    if per_warp * warps > chip.registers_per_sm:  # the per-block limit (64K registers on 8.0 and 9.0, as per SM)
        return 0
    per_subpartition = (chip.registers_per_sm // chip.sm_subpartitions) // per_warp
    return per_subpartition * chip.sm_subpartitions // warps


def _by_shared_memory(chip: Chip, dynamic_bytes: int) -> int:
    """Blocks by shared memory: the launch's dynamic shared memory plus the system's reserve per
    block, rounded up to the allocation unit, out of the SM's (the largest carveout: what the
    driver configures for a kernel that asks for this much, with no carveout preference)."""
    assert chip.shared_mem_alloc_unit and chip.shared_mem_per_sm and chip.reserved_shared_mem_per_block is not None
    if dynamic_bytes > (chip.shared_mem_per_block or 0):
        return 0
    per_block = math.ceil((dynamic_bytes + chip.reserved_shared_mem_per_block) / chip.shared_mem_alloc_unit) \
        * chip.shared_mem_alloc_unit
    return chip.shared_mem_per_sm // per_block


def with_occupancy(kernels: list, chip: Chip) -> list:
    """Each kernel (verdict.GpuKernel: its launch and registers) with its occupancy on ``chip``: its
    shared memory the launch's dynamic figure plus its static one (ptxas)."""
    def of(k) -> Occupancy | None:
        if not k.grid or not k.threads:
            return None
        return occupancy(chip, threads=math.prod(k.threads), blocks=math.prod(k.grid), registers=k.registers,
                         shared_memory_bytes=(k.shared_memory_bytes or 0) + (k.static_shared_memory_bytes or 0))
    return [dataclasses.replace(k, occupancy=of(k)) for k in kernels]
