"""Block-shape rules per target (as Pallas's Mosaic lowering enforces them): TPU (8,128)
tiling with its full-dimension and rank-1 exceptions, dtype packing, MXU padding waste; Triton's
power-of-two blocks and Mosaic GPU's 16-byte minor dimension on GPU targets."""
from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..base.chips import Chip
from ..base.findings import Finding
from ..base.pallas_model import BlockSpecInfo, PallasCall, dtype_bits

MXU_WASTE_WARN = 0.10


def tpu_dtype(dtype: str) -> str:
    """The dtype Mosaic keeps a block in: bool as int32 (jax's BOOL_MEMREF_TYPE), the rest as given."""
    return "int32" if str(dtype) == "bool" else str(dtype)


def packing(dtype: str) -> int:
    """Elements per 32-bit word: bf16 packs 2 rows per sublane, int8 and fp8 4; bool none (int32)."""
    itemsize = np.dtype(tpu_dtype(dtype)).itemsize
    return max(1, 4 // itemsize) if itemsize < 4 else 1


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _tpu_block_findings(op: BlockSpecInfo, chip: Chip, kernel: str) -> list[Finding]:
    if op.memory_space != "vmem":
        return []
    where: dict[str, Any] = dict(kernel=kernel, operand=op.operand, view="pallas")
    dims = [(p, b, n) for p, (b, n, k) in enumerate(zip(op.block_shape, op.array_shape, op.dim_kinds))
            if k != "squeezed" and b is not None]  # None: squeezed
    found = []
    bits = np.dtype(op.dtype).itemsize * 8
    if len(op.block_shape) == 1 and dims:
        _, b, n = dims[0]
        if not (b == n or b % 1024 == 0 or (_is_pow2(b) and b >= 128 * (32 // bits))):
            found.append(Finding("error", "tiling", f"{op.operand} on {chip.name}: rank-1 block of {b} elements must equal the array "
                                 f"({n}), be a multiple of 1024, or a power of two >= {128 * (32 // bits)}", **where))
        return found
    rank = len(op.block_shape)
    for pos, need, name in ((rank - 1, chip.lanes or 128, "last"), (rank - 2, chip.sublanes or 8, "second-to-last")):
        if pos < 0 or op.dim_kinds[pos] == "squeezed":
            continue
        b, n = cast(int, op.block_shape[pos]), op.array_shape[pos]  # not squeezed: a block size
        if b != n and b % need:
            found.append(Finding("error", "tiling", f"{op.operand}: block {op.block_shape} on {chip.name}: the {name} dim "
                                 f"({b}) must be a multiple of {need} or equal the array's {n}", **where))
        elif name == "second-to-last" and b != n and packing(op.dtype) > 1 and b % (need * packing(op.dtype)):
            if (packed := _packing_finding(op, chip, b, need, where)) is not None:
                found.append(packed)
    return found


def _packing_finding(op: BlockSpecInfo, chip: Chip, rows: int, sublanes: int, where: dict) -> Finding | None:
    """A packed dtype's block rows off its native tile. Measured with libtpu 0.0.42.1 on v5e, v6e
    and TPU7x alike (a copy, an add and a dot over (R, 128) blocks of a 64-row array): 16-bit
    blocks of any multiple of 8 rows compile (8, 16, 24, 32); 8-bit blocks (int8, fp8) compile
    only at multiples of 32 rows (or the whole array): 8, 16 and 24 fail with E2002
    CompileTimeMosaicMisalignedBlockAndTiling. 16-bit: nothing to say; narrower types, not measured: a warning."""
    bits = dtype_bits(tpu_dtype(op.dtype))
    native = sublanes * packing(op.dtype)
    data = {"chip": chip.name, "rows": rows, "native_rows": native, "dtype": str(op.dtype)}
    if bits == 8:
        return Finding("error", "tiling-packing", f"{op.operand} on {chip.name}: {op.dtype} packs {packing(op.dtype)} rows per "
                       f"sublane and Mosaic tiles it ({native}, 128), so the second-to-last block dim ({rows}) must be a "
                       f"multiple of {native} or equal the array's {op.array_shape[-2]} (libtpu refuses it: E2002)",
                       data=data, **where)
    if bits == 16:
        return None
    return Finding("warning", "tiling-packing", f"{op.operand} on {chip.name}: {op.dtype} packs {packing(op.dtype)} rows per "
                   f"sublane, so its native tile has {native} rows; a block of {rows} rows may be refused (not measured "
                   f"for {bits}-bit types; 8-bit ones need multiples of 32)", data=data, **where)


def _mxu_findings(info: PallasCall, chip: Chip) -> list[Finding]:
    found, mxu = [], chip.mxu
    assert mxu is not None  # every TPU has one (_tpu)
    for m, k, n in dict.fromkeys(tuple(d) for d in info.dots):
        used = k * n
        padded = math.ceil(k / mxu) * mxu * math.ceil(n / mxu) * mxu
        waste = 1 - used / padded if padded else 0.0
        if waste >= MXU_WASTE_WARN:
            dims = " and ".join(name for name, d in (("k", k), ("n", n)) if d % mxu)
            found.append(Finding("warning", "mxu-padding", f"{info.name}: a ({m}x{k}) @ ({k}x{n}) matmul on {chip.name}'s "
                                 f"{mxu}x{mxu} MXU pads {dims} to {'a multiple' if ' ' not in dims else 'multiples'} of "
                                 f"{mxu}: {waste:.0%} of the MXU work is zeros",
                                 kernel=info.name, view="pallas", data={"m": m, "k": k, "n": n, "waste": waste}))
    return found


def _gpu_findings(info: PallasCall, chip: Chip) -> list[Finding]:
    found = []
    for op in info.operands:
        where: dict[str, Any] = dict(kernel=info.name, operand=op.operand, view="pallas")
        if not _is_pow2(op.block_elements):
            found.append(Finding("error", "triton-block-pow2", f"{op.operand}: block {op.block_shape} has "
                                 f"{op.block_elements} elements; Triton needs a power of two on {chip.name}", **where))
        minor = (op.block_shape[-1] or 1) * op.itemsize if op.block_shape else 0
        if minor % 16:
            found.append(Finding("warning", "mosaic-gpu-minor-bytes", f"{op.operand}: the minor block dim is {minor} bytes; "
                                 "Mosaic GPU needs a multiple of 16", **where))
    return found


def tiling_findings(info: PallasCall, chip: Chip) -> list[Finding]:
    """The block rules of the chip row's kernel compiler: Mosaic's where it has VMEM (a TPU),
    Triton's and Mosaic GPU's where it has shared memory (a GPU); none on the local backend."""
    if chip.vmem_bytes is not None:
        found = [f for op in info.operands for f in _tpu_block_findings(op, chip, info.name)]
        return found + _mxu_findings(info, chip)
    if chip.shared_mem_per_block:
        return _gpu_findings(info, chip)
    return []
