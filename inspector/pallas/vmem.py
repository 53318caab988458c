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
physical VMEM. A static estimate: compiler temporaries come on top, and register spills but for
what a matmul's lowering may spill (its lhs laid out for the MXU, its result's partial sums: rule
matmul_lowering), which a "fits" leaves room for as an unsure term.

Matmul results the body keeps (jax_internals/body_dots.py) bound it both ways: below, a share of
the largest one under the least libtpu was measured to keep; above, what a loop unrolled into
straight-line code keeps live (a share of its matmul results, one at a time where it holds them
whole and no VPU reduction sums them, or its trips' values), which "fits" must leave room for.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re

from ..base.chips import Chip
from ..base.pallas_model import PallasCall, dtype_bits
from .tiling import packing, tpu_dtype
from .vmem_rules import (PLACEMENT_RESERVE_BYTES, PLACEMENT_SEEN, RULES, VREG_FILE_BYTES, XLA_PLACES_INPUTS, Rule,
                         apply_rules, chip_key)

# XLA copies an input into VMEM before the kernel while work before it writes at least this share of its size
WORK_BEFORE_SHARE = 0.5
MOST_PLACEMENT_CHOICES = 12  # operands XLA may place: beyond this many, any of them may be outside


@dataclasses.dataclass(frozen=True, kw_only=True)
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


@dataclasses.dataclass(frozen=True, kw_only=True)
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
    held_bytes: int = 0  # of body_bytes: what is counted as certain (the "certain" rows of vmem_rules.RULES)
    held_what: str = ""  # what held_bytes is, for the finding
    body_unrolled: bool = False  # body_bytes is what straight-line code keeps live (the "live" rows)
    # of body_bytes: what else the body may keep live beside its largest value, (what, bytes) each
    room_for: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    unfollowed: str | None = None  # why part of the kernel's VMEM is not counted: a total under the limit decides nothing
    in_ref_matmul_bytes: int = 0  # a matmul result built in the ref it is stored into: a total at the limit is unsure
    # of total_bytes, not of body_bytes: what a matmul's lowering may spill beyond the registers (the "spill"
    # rows), an unsure term only: a "fits" leaves room for it, a "does not fit" never rests on it
    spill_bytes: int = 0
    spill_what: str = ""
    # "fits": the total, every unsure term at the most it can be, within the limit (less the margin);
    # "over": what is certain alone exceeds the limit (blocks, scratch, the least share of a kept matmul
    # result: certain_bytes); "unsure": anything between, where an unsure term could change the verdict
    # either way (the body's largest value, which libtpu usually keeps but can stream, what a matmul's
    # lowering may spill, operands XLA may place outside the limit); a total at the very limit is unsure
    # too, and so is one under it where part of the kernel's VMEM is not followed: only a compile decides
    verdict: str = dataclasses.field(init=False)

    def __post_init__(self):
        verdict = "unsure" if self.fits and self.unfollowed else "fits" if self.fits else \
            "over" if self.certain_bytes > self.limit_bytes else "unsure"
        object.__setattr__(self, "verdict", verdict)  # frozen: set once, from the fields

    @property
    def certain_bytes(self) -> int:
        """What the kernel surely holds in scoped VMEM: the total less its unsure terms."""
        return self.total_bytes - self.body_bytes - self.spill_bytes - self.outside_bytes + self.held_bytes


def deciding_budget(budgets: list[VmemBudget]) -> VmemBudget | None:
    """The kernel whose figures the verdict over several kernels rests on: of those over for sure,
    the one whose certain part is largest; else the largest total."""
    over = [b for b in budgets if b.verdict == "over"]
    if over:
        return max(over, key=lambda b: b.certain_bytes)
    return max(budgets, key=lambda b: b.total_bytes, default=None)


def estimate_range(b: VmemBudget) -> tuple[int, int]:
    """(low, high): what the kernel surely holds, and the total with every unsure term at its most.
    The verdict is monotone in them: "fits" where high is within the limit, "over" where low is
    over it, "unsure" between. A kernel that fits is shown by its high alone."""
    return (b.total_bytes if b.verdict == "fits" else min(b.certain_bytes, b.total_bytes)), b.total_bytes


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
    outputs an op reads after the kernel (vmem_rules.XLA_PLACES_INPUTS; tests/data/xla_placed_7x.py); on
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
    return chip_key(chip) in XLA_PLACES_INPUTS or op.made_by_op or info.work_before_bytes >= WORK_BEFORE_SHARE * whole


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
    if len(candidates) > MOST_PLACEMENT_CHOICES:  # too many to try every choice: any of them may be outside
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
            items.append(VmemItem(what=what, shape=s.shape, dtype=s.dtype, bytes_each=padded_bytes(s.shape, s.dtype),
                                  buffers=1))
            raw += s.bytes
        elif s.memory_space == "smem":
            smem += s.bytes
    total = sum(i.bytes for i in items)
    unfollowed = info.vmem_unfollowed
    if raw <= limit < total:
        unfollowed = "the SparseCore's VMEM tile layout is not modelled (only padding to (8, 128) tiles puts it over)"
    return VmemBudget(chip=chip.name, kernel=info.name, memory="VMEM", items=items,
                      total_bytes=total if raw <= limit else raw, limit_bytes=limit,
                      limit_source="SparseCore VMEM per vector subcore", physical_bytes=limit, smem_bytes=smem,
                      fits=total <= limit, headroom_bytes=limit - total, block_growth=None,
                      note="SparseCore scratch and run_scoped buffers; the subcore's own tile layout is not modelled",
                      unfollowed=unfollowed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Blocks:
    """A kernel's blocks and scratch in scoped VMEM, before the body's values."""

    items: list[VmemItem]
    pipelined: int  # of items, the first ones: the operands' blocks
    smem: int
    candidates: list[tuple[int, int]]  # (whole operand, its blocks) of operands XLA may place in VMEM
    beside: int  # the VMEM beside the scoped limit where XLA can place operands


def _blocks(info: PallasCall, chip: Chip, limit: int) -> _Blocks:
    items, smem = [], info.prefetch_bytes
    candidates: list[tuple[int, int]] = []
    beside = (chip.vmem_bytes or limit) - limit - PLACEMENT_RESERVE_BYTES.get(chip_key(chip), 0)
    grid = per_core_grid(info, chip)
    steps = None if None in grid else math.prod(grid)  # type: ignore[arg-type]  # no None (checked)
    places_inputs = chip_key(chip) in XLA_PLACES_INPUTS
    for op in info.operands:
        if op.memory_space == "smem":
            smem += op.block_bytes
            continue
        if op.memory_space != "vmem":  # memory_space=ANY: the kernel copies what it needs itself
            whole = padded_bytes(list(op.array_shape), op.dtype)
            if places_inputs and op.role == "input" and whole <= beside:  # XLA may place it: room taken
                candidates.append((whole, 0))
            continue
        block = [b or 1 for b in op.block_shape]
        each, buffers = padded_bytes(block, op.dtype), op.buffers(steps, grid)
        placeable = _maybe_outside(op, info, chip, beside)
        # a placed operand's block is used in place only where it is one piece of it; others are copied
        outside = placeable and _contiguous(block, list(op.array_shape))
        items.append(VmemItem(what=op.operand, shape=block, dtype=op.dtype, bytes_each=each, buffers=buffers,
                              maybe_outside=outside))
        if placeable:
            candidates.append((padded_bytes(list(op.array_shape), op.dtype), each * buffers if outside else 0))
    pipelined = len(items)
    for i, s in enumerate(info.scratch):
        what = f"run_scoped buffer {i}" if s.scoped else f"scratch {i}"
        if s.memory_space == "vmem" and s.shape:
            items.append(VmemItem(what=what, shape=s.shape, dtype=s.dtype, bytes_each=padded_bytes(s.shape, s.dtype),
                                  buffers=1))
        elif s.memory_space == "smem":
            smem += s.bytes
    return _Blocks(items=items, pipelined=pipelined, smem=smem, candidates=candidates, beside=beside)


def _body_item(what: str, size: int) -> VmemItem:
    return VmemItem(what=what, shape=[], dtype="", bytes_each=size, buffers=1)


def tpu_budget(info: PallasCall, chip: Chip, rules: tuple[Rule, ...] = RULES) -> VmemBudget:
    """The kernel's blocks and scratch, and what the table of rules (vmem_rules.RULES) counts of
    its body's values, against the scoped limit."""
    limit, source = _scoped_limit(info, chip)
    blocks = _blocks(info, chip, limit)
    count = apply_rules(info, chip, rules)
    items = list(blocks.items)
    if count.body:
        items.append(_body_item(count.body_what, count.body))
    items += [_body_item(what, size) for what, size in count.room_for]
    body = count.body + sum(size for _, size in count.room_for)
    # the body's values as counted and the matmul's lowering: a "fits" leaves room for the larger
    # (the lowering's partial sums are the matmul result the body rows count, its lhs the operands
    # fp8_as_bf16 counts): the spill term is what the lowering needs beyond the body's values
    spill = max(0, count.spill - body)
    if spill:
        items.append(_body_item(count.spill_what, spill))
    places_inputs = chip_key(chip) in XLA_PLACES_INPUTS
    # placement is relied on for a "fits" only on a chip where it was seen, where the operands' origins
    # were followed, and not beside a body whose softmax the VPU sums (vmem_rule_evidence.json,
    # "placement_beside_summed")
    seen = chip_key(chip) in PLACEMENT_SEEN and info.origins_followed and not (body and info.body.summed_bytes)
    placed, most_out = _taken_out(blocks.candidates, blocks.beside, places_inputs or seen, places_inputs)
    total = sum(i.bytes for i in items) - placed
    # a matmul result built in the ref it is stored into (an accumulator, an output block) when it
    # outgrows the registers
    in_ref_matmul = bool(info.dots) and info.body.in_ref_bytes > max(count.largest, VREG_FILE_BYTES)
    room = limit - int(count.margin * limit) if body else limit
    # a value held whole, straight-line code, a matmul result built in its ref, or operands XLA places
    # that take the total to the very limit leave the compiler no room there: only a compile decides
    at_limit_unsure = count.held or count.straight_line or in_ref_matmul or placed and places_inputs
    fits = total < room if at_limit_unsure else total <= room
    # blocks come first; those XLA surely places take none of the limit whatever their size
    pipelined = sum(i.bytes for i in items[:blocks.pipelined]) - placed
    fixed = total - pipelined
    note = VmemBudget.note
    if any(s.scoped for s in info.scratch):
        note = ("run_scoped buffers (emit_pipeline's among them) are counted as if all were live at once, which can "
                "overstate when scopes follow each other; register spills and compiler temporaries come on top")
    return VmemBudget(chip=chip.name, kernel=info.name, memory="VMEM", items=items, total_bytes=total,
                      limit_bytes=limit, limit_source=source, physical_bytes=chip.vmem_bytes, smem_bytes=blocks.smem,
                      fits=fits, headroom_bytes=limit - total,
                      block_growth=(limit - fixed) / pipelined if pipelined and limit > fixed else None,
                      note=note, body_bytes=body, outside_bytes=most_out - placed, placed_bytes=placed,
                      held_bytes=min(count.held, body), held_what=count.held_what, body_unrolled=count.straight_line,
                      room_for=count.room_for, unfollowed=info.vmem_unfollowed,
                      in_ref_matmul_bytes=info.body.in_ref_bytes if in_ref_matmul else 0,
                      spill_bytes=spill, spill_what=count.spill_what if spill else "")


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
