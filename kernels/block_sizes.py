"""Block sizes of the kernel library, one small dataclass per family, each with its per-chip
starting point.

``BlockSizes`` serves the attention kernels (flash and block-sparse attention), ``TileSizes``
the matmul family (tiled matmul and ragged dot). ``for_chip`` derives the defaults from the
chip table (scoped VMEM limit, MXU width), never from numbers written here: they are starting
points, not tuned on hardware (this project has no TPU).
"""
from __future__ import annotations

import dataclasses

from ..base.chips import get_chip

LANES = 128  # the attention kernels keep their per-row statistics lane-dense: (rows, 128) f32
F32 = 4
# A kv block (and a matmul k tile) of 512 keeps the per-step overhead (~0.35 us a grid step)
# small beside the block's work; rounded up to a multiple of the chip's MXU width.
LONG_BLOCK = 512


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _budget(chip) -> int:
    """Half the scoped VMEM limit: the estimates below count the pipelined blocks, scratch and
    the f32 temporaries, not Mosaic's own relayout copies."""
    return chip.scoped_vmem_bytes // 2


def attention_vmem_bytes(kernel: str, bq: int, bk: int, head_dim: int, itemsize: int) -> int:
    """VMEM one attention kernel needs: double-buffered blocks, scratch, and its (bq, bk) f32
    temporaries (scores and probabilities; the backward also dp and ds). ``kernel``: "fwd",
    "dkv" or "dq"."""
    row = head_dim * itemsize  # bytes of one row of a q, k, v or output block
    if kernel == "fwd":  # q, o; k, v; lse. Scratch m, l, acc
        blocks = 2 * bq * row + 2 * bk * row + bq * LANES * F32
        scratch, temps = 2 * bq * LANES * F32 + bq * head_dim * F32, 3 * bq * bk * F32
    elif kernel == "dkv":  # q, do, lse, delta; k, v, dk, dv. Scratch dk, dv
        blocks = 2 * bq * row + 2 * bq * LANES * F32 + 4 * bk * row
        scratch, temps = 2 * bk * head_dim * F32, 4 * bq * bk * F32
    elif kernel == "dq":  # q, do, dq, lse, delta; k, v. Scratch dq
        blocks = 3 * bq * row + 2 * bq * LANES * F32 + 2 * bk * row
        scratch, temps = bq * head_dim * F32, 4 * bq * bk * F32
    else:
        raise ValueError(f"unknown attention kernel {kernel!r}: fwd, dkv or dq")
    return 2 * blocks + scratch + temps


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Blocks of the attention kernels: ``block_q`` x ``block_k`` for the forward pass; the
    backward pass's two kernels (dk/dv accumulated over q blocks, dq over kv blocks) have their
    own, each None meaning "as the forward". The block-sparse kernel's backward is the dense
    reference, so it reads only the forward fields."""

    block_q: int = 128
    block_k: int = 128
    block_q_dkv: int | None = None
    block_k_dkv: int | None = None
    block_q_dq: int | None = None
    block_k_dq: int | None = None

    @property
    def dkv(self) -> tuple[int, int]:
        return self.block_q_dkv or self.block_q, self.block_k_dkv or self.block_k

    @property
    def dq(self) -> tuple[int, int]:
        return self.block_q_dq or self.block_q, self.block_k_dq or self.block_k

    def fit(self, seq_q: int, seq_k: int) -> "BlockSizes":
        """Every block no longer than its sequence (backward fields filled in); each must divide
        its sequence length."""
        (qd, kd), (qq, kq) = self.dkv, self.dq
        fitted = BlockSizes(*(min(b, s) for b, s in zip((self.block_q, self.block_k, qd, kd, qq, kq),
                                                         (seq_q, seq_k) * 3)))
        for field, seq in zip(dataclasses.fields(fitted), (seq_q, seq_k) * 3):
            block = getattr(fitted, field.name)
            if block <= 0 or seq % block:
                raise ValueError(f"{field.name}={block} must divide the sequence length {seq}")
        return fitted

    @classmethod
    def for_chip(cls, chip_name: str, head_dim: int = 128, itemsize: int = 2) -> "BlockSizes":
        """Per kernel: ``block_k`` 512 rounded up to the MXU width (so q k^T fills it), ``block_q``
        the largest power-of-two multiple of it whose VMEM estimate at ``head_dim`` stays within
        half the chip's scoped limit (larger q blocks re-read k and v fewer times). Chips without
        a VMEM figure (cpu, gpu) get the class defaults."""
        chip = get_chip(chip_name)
        if not chip.scoped_vmem_bytes or not chip.mxu:
            return cls()
        budget, bk, mxu = _budget(chip), _round_up(LONG_BLOCK, chip.mxu), chip.mxu

        def pick(kernel: str) -> tuple[int, int]:
            q, k = bk, bk
            while attention_vmem_bytes(kernel, q, k, head_dim, itemsize) > budget and k > mxu:
                q, k = q // 2, k // 2
            while attention_vmem_bytes(kernel, 2 * q, k, head_dim, itemsize) <= budget:
                q *= 2
            return q, k

        return cls(*pick("fwd"), *pick("dkv"), *pick("dq"))


@dataclasses.dataclass(frozen=True)
class TileSizes:
    """Tiles of the matmul family (tiled matmul, ragged dot): (bm, bk) x (bk, bn)."""

    bm: int = 128
    bk: int = 128
    bn: int = 128

    @classmethod
    def for_chip(cls, chip_name: str, itemsize: int = 2) -> "TileSizes":
        """m and n tiles of twice the MXU width (v6e and TPU7x's 256-wide MXU wants multiples of
        256), k tiles of 512 rounded up to it; m and n halved while the double-buffered tiles and
        the f32 accumulator exceed half the scoped VMEM limit. Chips without a VMEM figure get the
        class defaults."""
        chip = get_chip(chip_name)
        if not chip.scoped_vmem_bytes or not chip.mxu:
            return cls()
        bm = bn = 2 * chip.mxu
        bk = _round_up(LONG_BLOCK, chip.mxu)
        vmem = lambda bm, bn: 2 * (bm * bk + bk * bn + bm * bn) * itemsize + bm * bn * F32
        while vmem(bm, bn) > _budget(chip) and bm > chip.mxu:
            bm, bn = bm // 2, bn // 2
        return cls(bm, bk, bn)
