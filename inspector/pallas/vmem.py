"""VMEM (TPU) and shared-memory (GPU) budgets of a pallas_call, per target.

TPU: each pipelined block padded to its tile layout x its buffer count (2 by default, n for
pl.Buffered(n); measured with libtpu 0.0.42.1: one when the index map returns constants only,
whole array or not: three 4 MiB blocks on a grid of 2 use 12 MiB when no map depends on the grid,
20 MiB when two do; but two for a block whose map uses the grid indices, even where they never
change (flash attention's q over a single q block); a grid of one step, or none, has nothing to
pipeline and Mosaic gives each block one buffer: an (8192,128) f32 copy kernel on v5e uses 8 MiB
at grid (1,) and 16 MiB at grid (2,); not so a grid sized at run time, which gets two even where
the example inputs make it one step), plus scratch, plus the largest value
the kernel body builds when it outgrows the vector registers (the compiler keeps it in VMEM; not
one built in the ref it is stored into, an output block or an accumulator).
Compared with the scoped limit (the chip's default or the kernel's vmem_limit_bytes) and the
physical VMEM. A static estimate: register spills and compiler temporaries come on top.

Matmul results the body keeps (jax_internals/body_dots.py) bound it both ways: below, a share of
the largest one under the least libtpu was measured to keep; above, what a loop unrolled into
straight-line code keeps live (a share of its matmul results, one at a time where it holds them
whole and no VPU reduction sums them, or its trips' values), which "fits" must leave room for.
"""
from __future__ import annotations

import dataclasses
import math

from ..chips import Chip
from .model import PallasCall, dtype_bits
from .tiling import packing, tpu_dtype

VREG_FILE_BYTES = 64 * 4096  # 64 vector registers of 8x128x32 bits
# Of the largest matmul result held whole (softmax's scores) less what the vector registers hold,
# what the estimate counts as certain: libtpu kept 0.61x of it or more in every compile that fit
# (maxdiffusion's cross attention on v6e, 2 MiB of scores per head, whose exponentials the MXU sums).
HELD_DOT_SHARE = 0.6
# The same where the body also sums the exponentials on the VPU (a second reduction: flash, splash,
# PallasBench's MHA, the LSE kernels): libtpu kept 1.05x or more in all 59 such compiles that fit
# (the project's flash attention at 4096/1024 on v6e the least) and in 71 of the 75 that ran out
# (the other four report no more than their blocks).
SUMMED_DOT_SHARE = 1.0
# The same where the body stores the softmax whole into an output block as wide (which could hold
# it): libtpu kept 0.93x or more beside the block in all 44 such compiles that report more than
# their blocks (PallasBench's qk-softmax, held out, round four; the team's log-softmax of matmul
# scores, tests/data/second_values.py; MaxKernel's Dense + LayerNorm, round ten, 1.0-1.7x)
STORED_DOT_SHARE = 0.9
# Of such results computed in one stretch of straight-line code (an unrolled loop's trips, a Python
# loop over heads), less the registers, Chip.unrolled_summed_share is certain: 0.51x or more in the
# 89 compiles measured where every block's place is known (JAX's flash attention at 4096/4096/1024
# on TPU7x the least), 0.58x or more in the 42 that fit (BENCHMARKS.md); more on v4 and v5p
# Of a rolled loop's carries (a fori_loop's accumulator and softmax statistics, in vreg tiles), what
# a "fits" leaves room for: the carries a step reads and those it writes. Pallas-Unbound's flash
# attention (held out, round nine: a (BLOCK_Q, 128) f32 accumulator and two (BLOCK_Q, 1) statistics,
# 6 MiB at block_q 4096) said "fits" at 7.2 MiB of 16 on v5e where libtpu needed 16.19; with room
# for two copies none of its seven rows does, and no other row on record changes. One copy is
# certain (tpu_budget): between two steps the carries are whole values
LOOP_CARRY_COPIES = 2
# Of the matmul results one stretch of straight-line code computes (an unrolled loop's trips each),
# what "fits" must leave room for: libtpu kept 0.47-1.0x of them in the measured compiles that ran
# out of VMEM (0.21-0.99x in those that fit). 0.8 is the least share, of 0.6 to 1.0 by tenths, at
# which no compile measured says "fits" where libtpu runs out through them (cross attention's
# heads on v5e needed 0.70, JAX's flash attention on TPU7x with its inputs placed more than 0.7;
# BENCHMARKS.md, "TPU7x's placement in the estimate"). Not of a result that element-wise ops alone
# carry into a store of its size where the body holds no matmul result whole: libtpu built those in
# their output block (a Dense + activation, 4-12 MiB of results: 0.00-0.25 MiB beyond the blocks on
# v5e and v6e in 16 compiles that fit; held out, round ten), where beside a softmax it did not (JAX's
# flash attention on TPU7x, maxdiffusion's cross attention on v5e: "fits" where libtpu ran out)
UNROLLED_DOT_SHARE = 0.8
# Straight-line code whose matmul results the body holds whole (a softmax's scores per head) but
# whose exponentials no VPU reduction sums (the row sum on the MXU, or none) computes them one after
# another: the body keeps one, the largest, not a share of all. libtpu kept 0.53-1.12x of one beyond
# the blocks in the 15 compiles of maxdiffusion's cross attention in "mxu" mode that fit (up to 20
# heads), 0.86-1.09x in the 51 of the team's tests/data/head_loops.py (4 and 8 heads, the row sum as
# a second matmul, or none), written to test this before they were compiled; where the VPU sums them
# (head_loops.py's vpu_sum), up to 5.8 of 8 (Chip.unrolled_summed_share). A "fits" leaves room for this
# share of one more: twice the most measured beyond one
ONE_AT_A_TIME_ROOM = 0.25
# Row statistics ((rows, 1) values: a row max or sum, a mean) take one lane of each vreg, rows / 8
# vregs as a (rows, 128) f32 value does. Where they are the body's largest values and several
# reductions along the rows make them, one statistic is certain, less the registers: the results of
# one reduction wait whole for the pass that uses them. tests/data/row_reductions.py (written to
# test it, 75 compiles) and row_statistics.py: 1.0 statistic kept with two reductions, 1.16-2.95
# with two to four, 0.0 with one (an RMSNorm, a row max: exactly the blocks in 30 compiles, as
# predicted); flax's LayerNorm 1.4-1.7. (All but the last was predicted and refuted: four
# reductions kept 1.9 on v6e and TPU7x, three over 512-wide rows 1.2.) With several, a "fits"
# leaves room for this share of them: 0.3 is the least, by tenths, at which no compile measured says
# "fits" where libtpu runs out through them (samples/attention.py's flash at block_q 4096, block_k
# 128 on v5e: "fits" at 12.1 MiB of 16, libtpu 17.47; the centred rows: 15 of 16 and 30 of 32,
# libtpu 20.61 and 35.96; without the certain one, row_reductions.py's 512-wide centred and 256-wide
# LayerNorm on v5e at 15.6 and 14.7 of 16, libtpu 16.98 and 16.28). v5e kept up to 3.4, which it
# does not cover: those rows are undecided only through BODY_MARGIN. v6e and TPU7x kept one beyond
# the waiting one, whatever their number, v5e two: no more room than that (Chip.statistics_room);
# where three or more reductions along 128-lane rows make them, that many are certain
# (Chip.statistics_kept; two reductions, a mean and a max, kept none)
STATISTICS_ROOM_SHARE = 0.3
# Of such results where one meets another in an element-wise op (SwiGLU's silu(x @ w1) * (x @ w3)),
# neither is built in the output block: a "fits" leaves room for Chip.met_results_room of the two
# (the most kept, by chip: pallas-forge's SwiGLU and GeGLU, held out in round eleven, kept up to
# 2.03 results beyond the blocks on v6e; with room for 0.8 of them TPU7x's SwiGLU at 2 x 8 MiB
# said "fits" where libtpu needed 35.62 MiB of 32). Of the larger result less the registers,
# Chip.met_result_share is certain
# Where the body computes two values of the size of its largest element-wise, whole or streamed
# into reductions, and holds matmuls, libtpu kept up to 1.8 of them beyond the blocks counted
# (Levanter's cross-entropy at b 512, v 4096 on v6e: 32.14 MiB of 32; the team's cross-entropies of
# tests/data/second_values.py 0.10-0.66): a "fits" leaves room for this share of a second, the
# least by tenths at which no compile measured says "fits" where libtpu runs out (at 0.7, that
# one, its two (512, 128) outputs placed: an op reads them after the kernel). Without matmuls
# libtpu kept one: AMLeng's softmax (12 compiles) and the team's log-softmax
# and tanh-RMS kernels (tests/data/second_values.py, 30 compiles, 0.96-1.02 of one, as predicted)
SECOND_VALUE_ROOM = 0.8
# Of an unrolled loop without matmuls, its trips x its body's largest value, all of it, and certain:
# sglang's biased top-k (an unrolled fori_loop carrying three (256, 2048) f32 arrays, 7 trips) needed
# 1.18x, its held-out copy 1.01-1.03x on v5e and v6e, in every compile that ran out of VMEM.
UNROLLED_VALUE_SHARE = 1.0
# Of the limit, what a "fits" with values of the body counted leaves to the compiler's temporaries:
# of the compiles whose estimate came within 2% of the limit with such values (UNROLLED_DOT_SHARE
# then 0.6), three of four ran out: cross attention at 62.8 of 64 MiB (66.9 on v5e, 68.4 on TPU7x,
# 61.3 fit on v6e), SSD's intra-chunk kernel at 15.7 of 16 MiB (19.0; BENCHMARKS.md)
BODY_MARGIN = 0.02
TRITON_DEFAULT_STAGES = 3


@dataclasses.dataclass
class VmemItem:
    what: str  # operand or scratch name, or "kernel intermediate"
    shape: list[int]
    dtype: str
    bytes_each: int  # padded to the tile layout
    buffers: int
    # XLA may give the kernel this operand whole in VMEM instead (its own allocation, outside the
    # scoped limit): then these blocks take nothing of the limit. Counted, but not certain.
    maybe_outside: bool = False

    @property
    def bytes(self) -> int:
        return self.bytes_each * self.buffers


@dataclasses.dataclass
class VmemBudget:
    chip: str
    kernel: str
    memory: str  # "VMEM" or "shared memory"
    items: list[VmemItem]
    total_bytes: int
    limit_bytes: int
    # "scoped default", "vmem_limit_bytes", "LIBTPU_INIT_ARGS", "VMEM capacity (... asks for N MiB)",
    # "opt-in shared memory per block"
    limit_source: str
    physical_bytes: int | None
    smem_bytes: int  # scalar prefetch and SMEM scratch (TPU)
    fits: bool
    headroom_bytes: int
    block_growth: float | None  # how much every pipelined block could grow and still fit
    # not a bound either way: small blocks can take less than counted (a compile measured 8 KiB
    # against 24 KiB for three (8, 128) blocks on v5e), temporaries and spills come on top
    note: str = "compiler temporaries come on top; small blocks can take less"
    body_bytes: int = 0  # of total_bytes: the largest value the kernel body builds, the estimate's unsure term
    outside_bytes: int = 0  # of total_bytes: blocks of operands XLA may place whole in VMEM (VmemItem.maybe_outside)
    placed_bytes: int = 0  # not in total_bytes: the items' blocks XLA surely takes out by placing operands (TPU7x)
    # of body_bytes: what is counted as certain: a share of a kept matmul result (HELD_DOT_SHARE,
    # Chip.met_result_share), all that an unrolled loop without matmuls builds (UNROLLED_VALUE_SHARE), a larger
    # value computed element-wise, or a row statistic that waits (STATISTICS_ROOM_SHARE)
    held_bytes: int = 0
    held_what: str = ""  # what held_bytes is, for the finding
    body_unrolled: bool = False  # body_bytes is what an unrolled loop keeps live (UNROLLED_DOT_SHARE, UNROLLED_VALUE_SHARE)
    # of body_bytes: what else the body may keep live beside its largest value, (what, bytes) each
    room_for: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    unfollowed: str | None = None  # why part of the kernel's VMEM is not counted: a total under the limit decides nothing
    in_ref_matmul_bytes: int = 0  # a matmul result built in the ref it is stored into: a total at the limit is unsure
    # "fits"; "over": what is surely held exceeds the limit (blocks, scratch, the least share of a
    # kept matmul result); "unsure": only the unsure terms put it over (the body's largest value,
    # which libtpu usually keeps but can stream, operands XLA may place outside the limit); a body
    # value that takes the total to exactly the limit is unsure too: only a compile decides
    # (BENCHMARKS.md, the VMEM truth table)
    verdict: str = dataclasses.field(init=False)

    def __post_init__(self):
        # what is certain at the very limit, or within the register file of it, leaves no room for a
        # value the body builds beyond the registers, held or not (tpu_budget; every such compile
        # measured ran out: BENCHMARKS.md)
        over = self.certain_bytes > self.limit_bytes or \
            self.certain_bytes + VREG_FILE_BYTES >= self.limit_bytes and self.body_bytes > 0
        self.verdict = "unsure" if self.fits and self.unfollowed else "fits" if self.fits else "over" if over else "unsure"

    @property
    def certain_bytes(self) -> int:
        """What the kernel surely holds in scoped VMEM: the total less its unsure terms."""
        return self.total_bytes - self.body_bytes - self.outside_bytes + self.held_bytes


def estimate_fits(budgets: list[VmemBudget]) -> bool | None:
    """The estimate's verdict over several kernels on one chip: False when one is over for sure,
    None when one is unsure (and none over), else True."""
    verdicts = {b.verdict for b in budgets}
    return False if "over" in verdicts else None if "unsure" in verdicts else True


def padded_bytes(shape: list[int], dtype: str) -> int:
    """Bytes in VMEM: the two minor dims padded to (8 x packing, 128) tiles."""
    bits = dtype_bits(tpu_dtype(dtype))
    dims = [d for d in shape] or [1]
    if len(dims) == 1:
        return math.ceil(math.ceil(dims[0] / 128) * 128 * bits / 8)
    # a packed dtype's native tile has 8 x packing rows, but a block of a multiple of 8 rows gets
    # an 8-row tile (a bf16 (8, 128) block pair on v5e: 8 KiB by libtpu's figure, not 16)
    rows = 8 if dims[-2] % 8 == 0 else 8 * packing(dtype)
    dims[-1] = math.ceil(dims[-1] / 128) * 128
    dims[-2] = math.ceil(dims[-2] / rows) * rows
    return math.ceil(math.prod(dims) * bits / 8)


def scoped_limit_flag() -> int | None:
    """The scoped VMEM limit set for every kernel through LIBTPU_INIT_ARGS
    (--xla_tpu_scoped_vmem_limit_kib=N), which the compiler honours: the estimate must too."""
    import os
    import re

    m = re.search(r"--xla_tpu_scoped_vmem_limit_kib[= ](\d+)", os.environ.get("LIBTPU_INIT_ARGS", ""))
    return int(m.group(1)) * 1024 if m else None


def per_core_grid(info: PallasCall, chip: Chip) -> list[int | None]:
    """The grid one TensorCore pipelines: on a chip that splits a "parallel" axis over its cores
    (Chip.parallel_grid_cores), the first parallel axis, divided when it divides evenly (measured
    on v5p: linear attention's (2, 1) grid splits; flash attention's (1, 1, 2, k), whose first
    parallel axis has one step, takes the VMEM of the whole grid on one core)."""
    grid = info.compiled_grid
    cores = chip.parallel_grid_cores
    first = next((k for k, s in enumerate(info.dimension_semantics) if s == "parallel"), None)
    if cores > 1 and first is not None and first < len(grid):
        size = grid[first]
        if size is not None and size % cores == 0:
            return grid[:first] + [size // cores] + grid[first + 1:]
    return grid


def _maybe_outside(op, info: PallasCall, chip: Chip, room: int) -> bool:
    """Whether XLA may hand the kernel this operand whole in VMEM, beside the scoped region (in
    ``room`` bytes; measured, libtpu 0.0.42.1): on TPU7x every input, whatever its origin, and
    outputs an op reads after the kernel (Chip.vmem_operands; tests/data/xla_placed_7x.py); on
    every chip, operands one lane wide ((rows, 1) blocks: rowsum and log-sum-exp outputs came out in
    S(1) on v5e, RWKV-7's (B, T, 1) reset input), inputs the program computes just before the
    kernel (a fusion writes them into VMEM) or that XLA can copy there while work before the kernel
    writes at least half their size (tests/data/xla_placed.py; an argument handed to a kernel that
    starts the program stays in HBM), and outputs an op reads after the kernel (fused recurrent
    GLA's, transposed and summed: `S(1)` on v5e; returned, they stay in HBM)."""
    whole = padded_bytes(list(op.array_shape), op.dtype)
    if chip.vmem_bytes is None or whole > room:
        return False
    if bool(op.block_shape) and op.block_shape[-1] == 1:
        return True
    if op.role == "output":
        return op.read_by_op
    return chip.vmem_operands or op.made_by_op or 2 * info.work_before_bytes >= whole


def _contiguous(block: list[int], shape: list[int]) -> bool:
    """Whether a block is one contiguous piece of its array: every dimension after the last one it
    slices whole, every one before it of size 1. The kernel uses such a block of an operand XLA placed
    in VMEM in place, and copies any other through its double buffers all the same (tests/data/
    placed_slices.py: 16 MiB inputs, all placed: row blocks and (1, 1024, 128) blocks of (8, 4096,
    128) took no scoped VMEM on TPU7x, (4096, 256) column blocks, (1024, 256) tiles and (1, 4096, 128)
    blocks of (2, 4096, 512) took their buffers, as predicted; rows and columns of a computed input,
    and of an output an op reads after, the same on v5e, v6e and TPU7x; SwiGLU's lane-sliced weight
    blocks too)."""
    sliced = [k for k, (b, a) in enumerate(zip(block, shape)) if b < a]
    return not sliced or all(b == 1 for b in block[:sliced[-1]])


def _taken_out(candidates: list[tuple[int, int]], room: int, all_that_fit: bool, smallest_first: bool) -> tuple[int, int]:
    """The fewest and the most block bytes XLA takes out of the scoped limit by placing whole
    operands in VMEM. ``candidates``: (whole operand, its blocks) per operand it may place (blocks
    0: an operand the kernel copies itself, which takes room all the same). What it places must fit
    in ``room`` together. ``all_that_fit``: all of them when they fit together (TPU7x always; v5e
    and v6e in every compile measured). ``smallest_first`` (TPU7x): when they do not, the smallest
    first while they fit, the first of equal ones first (of 16 + 4 + 4 MiB the two small ones, of
    16 + 16 the first, of 14 + 6 + 6 and 6 + 14 + 6 the two of 6: tests/test_xla_placed_7x.py); not
    so on v5e, where fused recurrent GLA's four 32 MiB operands, each of which fits beside the 16 MiB
    scoped limit, all stayed in it (refused at 64 MiB). Otherwise any set of them, none included."""
    if all_that_fit and sum(whole for whole, _ in candidates) <= room:
        every = sum(blocks for _, blocks in candidates)
        return every, every
    if smallest_first:
        used = out = 0
        for whole, blocks in sorted(candidates, key=lambda c: c[0]):
            if used + whole <= room:
                used, out = used + whole, out + blocks
        return out, out
    if len(candidates) > 12:  # too many to try every choice: any of them may be outside
        return 0, sum(blocks for _, blocks in candidates)
    most = 0
    for chosen in range(1 << len(candidates)):
        picked = [c for k, c in enumerate(candidates) if chosen >> k & 1]
        if sum(whole for whole, _ in picked) <= room:
            most = max(most, sum(blocks for _, blocks in picked))
    return 0, most


def sparse_core_budget(info: PallasCall, chip: Chip) -> VmemBudget | None:
    """A SparseCore vector-subcore kernel's scratch and run_scoped VMEM against one subcore's VMEM
    (None on a chip without SparseCores). Its tile layout is not modelled: the total is padded as a
    TensorCore would pad it, and a total over the limit only because of that padding decides nothing."""
    limit = chip.sparse_core_vmem_bytes
    if limit is None:
        return None
    items, smem, raw = [], 0, 0
    for i, s in enumerate(info.scratch):
        what = f"run_scoped buffer {i}" if s.scoped else f"scratch {i}"
        if s.memory_space == "vmem" and s.shape:
            items.append(VmemItem(what, s.shape, s.dtype, padded_bytes(s.shape, s.dtype), 1))
            raw += s.bytes
        elif s.memory_space == "smem":
            smem += s.bytes
    total = sum(i.bytes for i in items)
    unfollowed = info.vmem_unfollowed
    if raw <= limit < total:
        unfollowed = "the SparseCore's VMEM tile layout is not modelled (only padding to (8, 128) tiles puts it over)"
    return VmemBudget(chip.name, info.name, "VMEM", items, total if raw <= limit else raw, limit,
                      "SparseCore VMEM per vector subcore", limit, smem, total <= limit, limit - total, None,
                      "SparseCore scratch and run_scoped buffers; the subcore's own tile layout is not modelled",
                      0, unfollowed=unfollowed)


def tpu_budget(info: PallasCall, chip: Chip) -> VmemBudget:
    items, smem = [], info.prefetch_bytes
    candidates: list[tuple[int, int]] = []  # (whole operand, its blocks) of operands XLA may place in VMEM
    limit, source = _scoped_limit(info, chip)
    beside = (chip.vmem_bytes or limit) - limit - chip.vmem_operand_reserve_bytes  # where XLA can place operands
    grid = per_core_grid(info, chip)
    steps = None if None in grid else math.prod(grid)  # type: ignore[arg-type]  # no None (checked)
    for op in info.operands:
        if op.memory_space == "smem":
            smem += op.block_bytes
            continue
        if op.memory_space != "vmem":  # memory_space=ANY: the kernel copies what it needs itself
            whole = padded_bytes(list(op.array_shape), op.dtype)
            if chip.vmem_operands and op.role == "input" and whole <= beside:  # TPU7x may place it: room taken
                candidates.append((whole, 0))
            continue
        block = [b or 1 for b in op.block_shape]
        each, buffers = padded_bytes(block, op.dtype), op.buffers(steps, grid)
        placeable = _maybe_outside(op, info, chip, beside)
        # a placed operand's block is used in place only where it is one piece of it; others are copied
        outside = placeable and _contiguous(block, list(op.array_shape))
        items.append(VmemItem(op.operand, block, op.dtype, each, buffers, maybe_outside=outside))
        if placeable:
            candidates.append((padded_bytes(list(op.array_shape), op.dtype), each * buffers if outside else 0))
    for i, s in enumerate(info.scratch):
        what = f"run_scoped buffer {i}" if s.scoped else f"scratch {i}"
        if s.memory_space == "vmem" and s.shape:
            items.append(VmemItem(what, s.shape, s.dtype, padded_bytes(s.shape, s.dtype), 1))
        elif s.memory_space == "smem":
            smem += s.bytes
    largest = info.body_value_bytes if info.body_value_bytes is not None else \
        info.intermediates_bytes[0] if info.intermediates_bytes else 0
    largest = max(largest, info.stored_dot_bytes)  # held beside its output block, not built in it
    body = largest if largest > VREG_FILE_BYTES else 0
    # where the body holds no matmul result whole (no softmax), a result that element-wise ops alone
    # carry into a store of its size, meeting no other result, is built in that ref (UNROLLED_DOT_SHARE)
    # where it holds them whole and sums none on the VPU, one at a time (ONE_AT_A_TIME_ROOM)
    one_at_a_time = bool(info.held_dot_bytes) and not info.summed_dot_bytes and \
        info.unrolled_dot_bytes > info.held_dot_bytes
    if info.held_dot_bytes:
        dots_live = 0 if one_at_a_time else int(UNROLLED_DOT_SHARE * info.unrolled_dot_bytes)
    else:
        dots_live = int((chip.met_results_room if info.met_dot_bytes else UNROLLED_DOT_SHARE) *
                        info.unrolled_unbuilt_dot_bytes)
    values_live = int(UNROLLED_VALUE_SHARE * info.unrolled_values_bytes)
    unrolled = max(dots_live, values_live)
    statistics = info.statistic_bytes > VREG_FILE_BYTES and \
        info.statistic_bytes >= max(info.held_dot_bytes, info.body_value_bytes or 0)
    # several reductions along the rows: the statistics of one wait whole for the pass that uses them;
    # three or more along 128-lane rows keep more beside them (Chip.statistics_kept)
    also_kept = chip.statistics_kept if statistics and info.statistic_reductions >= 3 and \
        info.statistic_lanes <= 128 and not info.dots else 0.0
    waiting = info.statistic_bytes - VREG_FILE_BYTES + int(also_kept * info.statistic_bytes) \
        if statistics and info.statistic_reductions > 1 else 0
    if unrolled > max(body, VREG_FILE_BYTES):
        body = unrolled
        items.append(VmemItem("values live together in straight-line code (matmul results, unrolled loops)", [], "", body, 1))
    elif waiting > body:
        body = waiting
        items.append(VmemItem("row statistics of one of several reductions along the rows, whole until the pass "
                              "that uses them" + (f", and {also_kept:g} more the chip keeps" if also_kept else ""),
                              [], "", body, 1))
    elif body:
        items.append(VmemItem("kernel intermediate (largest value in the body)", [], "", body, 1))
    straight_line = body == unrolled > 0
    held, held_what = max((int(HELD_DOT_SHARE * (info.held_dot_bytes - VREG_FILE_BYTES)),
                           "the least libtpu keeps of a matmul result the body reduces and then uses whole"),
                          (int(SUMMED_DOT_SHARE * (info.summed_dot_bytes - VREG_FILE_BYTES)),
                           "a matmul result whose softmax the body sums, all but what the registers hold"),
                          (int(STORED_DOT_SHARE * (info.stored_dot_bytes - VREG_FILE_BYTES)),
                           "the least libtpu keeps of a matmul result whose softmax the body stores whole"), (0, ""))
    room_for: list[tuple[str, int]] = []  # values a "fits" leaves room for beside the body's largest
    if straight_line and values_live > dots_live:
        held, held_what = body, "what the unrolled loop's trips build"
    elif straight_line and info.summed_dot_bytes and \
            (together := int(chip.unrolled_summed_share * (info.unrolled_dot_bytes - VREG_FILE_BYTES))) > held:
        held, held_what = together, "the least libtpu keeps of the matmul results straight-line code computes"
    if (met := int(chip.met_result_share * (info.met_dot_bytes - VREG_FILE_BYTES))) > held:
        held, held_what = met, "the least libtpu keeps of a matmul result that meets another, all but what the " \
            "registers hold"
    if waiting > held and body == waiting:
        held, held_what = waiting, "the row statistics of one of several reductions along the rows" + \
            (f" and {also_kept:g} more the chip keeps beside them" if also_kept else "") + ", all but what the registers hold"
    matmul_results_held = 0 if straight_line and values_live > dots_live else held
    if body and not straight_line and info.computed_value_bytes > max(info.held_dot_bytes, VREG_FILE_BYTES):
        # a value computed element-wise (not a matmul result, which the MXU can hand on tile by tile)
        # and larger than any matmul result held is built whole, less what the registers hold: all
        # nine held-out compiles where it decided ran out (Levanter's cross-entropy, SSD's intra-chunk
        # kernel; BENCHMARKS.md), AMLeng's softmax fitted at 11.83 MiB where 11.75 are so counted. Not
        # one that streams into reductions (body_dots._streams_into_reductions)
        held, held_what = max(held, info.computed_value_bytes - VREG_FILE_BYTES), \
            "a value the body computes whole, all but what the registers hold"
    if body and not straight_line and info.dots and info.second_computed_bytes == largest > \
            max(info.held_dot_bytes, VREG_FILE_BYTES):
        room_for.append(("part of a second value of the size of the largest the body computes, which the "
                         "compiler can keep live beside it", int(SECOND_VALUE_ROOM * info.second_computed_bytes)))
    if info.summed_dot_bytes > VREG_FILE_BYTES and info.summed_operand_bytes > VREG_FILE_BYTES:
        # the RoPE'd q and k of pallasflash's fused attention (held out, round eight): it said "fits" at
        # 14.5 MiB of 16 on v5e, libtpu needed 17.41 (1.73x the scores beyond the blocks, where the
        # same blocks without RoPE took 1.07x); a cast alone feeds the MXU as it goes (maxtext's ragged
        # attention, EasyDeL's matmul)
        room_for.append(("the matmul operands the body computes beside the scores (not blocks read or cast)",
                         info.summed_operand_bytes))
    if info.loop_carry_bytes > VREG_FILE_BYTES:
        # a rolled loop's carries are whole between its steps, beside the matmul results a step keeps:
        # what the registers cannot hold of them is in VMEM (Pallas-Unbound's flash attention, six
        # compiles that ran out at 26.81-138.57 MiB, were undecided without; no row on record changes
        # otherwise). A value the body computes element-wise may be the next carries: not added to them
        with_carries = matmul_results_held + info.loop_carry_bytes if matmul_results_held else \
            info.loop_carry_bytes - VREG_FILE_BYTES
        if with_carries > held:
            held, held_what = with_carries, "the carries of a rolled loop in the body beside the matmul results a " \
                "step keeps, all but what the registers hold"
        room_for.append(("the carries of a loop in the body, those a step reads and those it writes",
                         LOOP_CARRY_COPIES * info.loop_carry_bytes))
    if chip.splits_f32_matmuls and info.split_operand_bytes > VREG_FILE_BYTES:
        # (Chip.splits_f32_matmuls) tops' chunk_fwd_o at chunks of 512 said "fits" at 26 MiB, needed 41.21
        room_for.append(("the bf16 parts of the f32 operands of HIGHEST-precision matmuls", info.split_operand_bytes))
    if not chip.mxu_takes_fp8 and info.mxu_operand_f8_bf16_bytes > VREG_FILE_BYTES:
        # Mosaic converts fp8 matmul operands to bf16 in the vector registers on a chip whose MXU
        # cannot take fp8, and the matmul's lowering holds them (and its partial sums) across its
        # passes: what the registers cannot hold the register allocator spills into scoped VMEM
        # (Chip.mxu_takes_fp8): a "fits" leaves room for the operands as bf16
        room_for.append(("the fp8 matmul operands as bf16, which the chip's MXU takes and the register allocator "
                         "spills when they outgrow the registers", info.mxu_operand_f8_bf16_bytes))
    if statistics and info.statistic_reductions != 1:  # one reduction's statistics are used as they come
        kept = STATISTICS_ROOM_SHARE * info.statistic_count
        if chip.statistics_room is not None:  # no more than the chip was seen to keep
            kept = min(kept, chip.statistics_room)
        if kept > also_kept:  # those counted as waiting already
            room_for.append(("row statistics the body computes", int((kept - also_kept) * info.statistic_bytes)))
    # the body may keep it rather than its largest value; beside matmul results, their own rules count it
    if info.reduced_row_bytes > max(body, VREG_FILE_BYTES) and not info.dots:
        room_for.append(("a value wider than a vreg that a reduction along its rows sees whole before it is used "
                         "whole, beyond the body's largest", info.reduced_row_bytes - body))
    if one_at_a_time and info.held_dot_bytes > VREG_FILE_BYTES:
        room_for.append(("part of the next matmul result straight-line code computes beside the one it holds",
                         int(ONE_AT_A_TIME_ROOM * info.held_dot_bytes)))
    for what, size in room_for:
        items.append(VmemItem(what, [], "", size, 1))
        body += size
    # on v5e and v6e, placement is relied on for a "fits" only where the operands' origins were
    # followed (a kernel in a lax.cond branch kept its blocks), and not beside a body whose softmax
    # the VPU sums: such bodies kept 0.8-2.8 scores beyond the blocks, more than the estimate counts
    # (with the inputs placed, splash attention needed 17.3 MiB of 16 on v5e, JetStream's chunked
    # prefill 17.04; with them the estimate said 14.8 and 6)
    placed, most_out = _taken_out(candidates, beside, chip.vmem_operands or info.origins_followed and
                                  not (body and info.summed_dot_bytes), chip.vmem_operands)
    total = sum(i.bytes for i in items) - placed
    # a matmul result built in the ref it is stored into (an accumulator, an output block) when it
    # outgrows the registers
    in_ref_matmul = bool(info.dots) and info.in_ref_bytes > max(largest, VREG_FILE_BYTES)
    # a value held whole that takes the total to the very limit leaves no room for the compiler's
    # temporaries (libtpu refused flash attention at exactly 16 MiB of blocks and scores on v4, v5e,
    # v5p), nor, on some chips, does a matmul result built in its ref (JAX's matmul at exactly 32 MiB
    # refused on v6e, fitted on TPU7x): only a compile decides those; an element-wise result
    # built in its output block leaves room (a copy kernel at exactly 32 MiB on v6e and TPU7x)
    room = limit - int(BODY_MARGIN * limit) if body else limit
    # so does, on TPU7x, a total that operands XLA places take to the very limit (tops' chunk_fwd_h, k
    # placed: 36 KiB over at exactly 32 MiB of blocks); on v5e the kernels of xla_placed.py fit there
    at_limit_unsure = held or straight_line or in_ref_matmul or placed and chip.vmem_operands
    fits = total < room if at_limit_unsure else total <= room
    # blocks come first; those XLA surely places take none of the limit whatever their size
    pipelined = sum(i.bytes for i in items[:len([o for o in info.operands if o.memory_space == "vmem"])]) - placed
    fixed = total - pipelined
    growth = (limit - fixed) / pipelined if pipelined and limit > fixed else None
    note = VmemBudget.note
    if any(s.scoped for s in info.scratch):
        note = ("run_scoped buffers (emit_pipeline's among them) are counted as if all were live at once, which can "
                "overstate when scopes follow each other; register spills and compiler temporaries come on top")
    return VmemBudget(chip.name, info.name, "VMEM", items, total, limit, source, chip.vmem_bytes, smem,
                      fits, limit - total, growth, note, body,
                      outside_bytes=most_out - placed, placed_bytes=placed, held_bytes=min(held, body),
                      held_what=held_what,
                      body_unrolled=straight_line, room_for=room_for, unfollowed=info.vmem_unfollowed,
                      in_ref_matmul_bytes=info.in_ref_bytes if in_ref_matmul else 0)


def _scoped_limit(info: PallasCall, chip: Chip) -> tuple[int, str]:
    """The limit the kernel's VMEM must fit, and where it comes from. A limit set above the chip's
    VMEM stops at it (libtpu on v4 with vmem_limit_bytes of 96 MiB: "out of memory (capacity):
    needs 32 MiB of 16 MiB"; TPU7x fits 64 MiB of blocks under it): a kernel that sizes its limit
    from one chip's VMEM asks too much of a smaller one."""
    flag = scoped_limit_flag()
    if info.vmem_limit_bytes:
        limit, source = info.vmem_limit_bytes, "vmem_limit_bytes"
    elif flag:
        limit, source = flag, "LIBTPU_INIT_ARGS"
    else:
        assert chip.scoped_vmem_bytes is not None  # every TPU has one (_tpu)
        return chip.scoped_vmem_bytes, "scoped default"
    if chip.vmem_bytes is not None and limit > chip.vmem_bytes:
        return chip.vmem_bytes, f"VMEM capacity ({source} asks for {limit / 2**20:g} MiB)"
    return limit, source


def gpu_budget(info: PallasCall, chip: Chip) -> VmemBudget:
    """Triton keeps num_stages copies of each input block in shared memory (default 3)."""
    stages = info.num_stages or TRITON_DEFAULT_STAGES
    items = [VmemItem(op.operand, [b or 1 for b in op.block_shape], op.dtype, op.block_bytes,
                      stages if op.role == "input" else 1) for op in info.operands if op.pipelined]
    total = sum(i.bytes for i in items)
    limit = chip.shared_mem_per_block
    assert limit is not None  # budget() asks only for a GPU with the figure
    pipelined = sum(i.bytes for i in items)
    return VmemBudget(chip.name, info.name, "shared memory", items, total, limit, "opt-in shared memory per block",
                      None, 0, total <= limit, limit - total, limit / pipelined if pipelined else None,
                      note=f"inputs x {stages} pipeline stages; a lower bound: Triton's own scratch comes on top")


def budget(info: PallasCall, chip: Chip) -> VmemBudget | None:
    if chip.is_tpu and (info.core_type or "").startswith("SparseCore"):
        return sparse_core_budget(info, chip)
    if chip.is_tpu:
        return tpu_budget(info, chip)
    if chip.kind == "gpu" and chip.shared_mem_per_block:
        return gpu_budget(info, chip)
    return None
