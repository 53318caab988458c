"""A Pallas-Triton kernel's shared memory on a GPU, bounded both ways without a compile.

Triton, not the BlockSpecs, decides what lives in shared memory: a block is read in tiles
(``x_ref[...]``, ``x_ref[:, pl.ds(i * bk, bk)]``) into registers, and only some tiles and values go
through shared memory. So the estimate is a range, and its verdict says "fits" only where the
upper bound is within the limit, "does not fit" only where the lower bound is over it, and
"undecided" between (a deviceless XLA:GPU compile, seconds, decides: families/gpu/verdict.py).

Upper bound: every buffer Triton's allocator can place, all at once: each tile the body reads,
num_stages copies where a loop reads it (the pipeliner's stageDiff = num_stages - 1 copies, one
more for Hopper's asynchronous wgmma: LowerLoops.cpp loadRequiresAdditionalBuffer) and one copy
elsewhere (a dot operand's local_alloc); each matmul operand the body computes (its local_alloc);
the kernel's scratch refs; and the largest value it builds, for the scratch of a layout conversion
or a reduction, which lives for one op (so one at a time). It assumes a scratch buffer is no larger
than its value and that the allocator packs no worse than all of these side by side; the truth
file (tests/data/gpu/smem_truth.json) holds every compile's figure between the two bounds.

Lower bound: the tiles Triton's pipeliner multi-buffers for sure (jax_internals/triton_body.py),
num_stages - 1 copies each, all allocated for the whole loop; nothing else is certain (an
element-wise kernel's blocks may use none: they stay in registers).
"""
from __future__ import annotations

from ..base.chips import Chip
from ..base.findings import Finding
from ..base.pallas_model import PallasCall
from .vmem import VmemBudget, VmemItem

TRITON_DEFAULT_STAGES = 3  # jax's Pallas-Triton lowering, when CompilerParams gives no num_stages

# what an undecided verdict tells the user to do: a compile settles it, and costs no GPU
COMPILE_DECIDES = ("only a compile decides: run check without --estimate-only (a deviceless XLA:GPU compile, "
                   "seconds, no GPU needed)")


def _blocks(info: PallasCall, stages: int) -> list[VmemItem]:
    """Every BlockSpec block, inputs x num_stages: what a body the walk could not follow is shown by."""
    return [VmemItem(what=op.operand, shape=[b or 1 for b in op.block_shape], dtype=op.dtype,
                     bytes_each=op.block_bytes, buffers=stages if op.role == "input" else 1)
            for op in info.operands if op.pipelined]


def shared_memory_bounds(info: PallasCall) -> tuple[list[VmemItem], int, int, str | None]:
    """(the upper bound's items, the upper bound, the lower bound, why there are none: the body
    was not followed) of the kernel's shared memory, in bytes."""
    stages = info.num_stages or TRITON_DEFAULT_STAGES
    body = info.triton
    if body is None or body.unfollowed is not None:
        why = (f"its body was not followed ({body.unfollowed})" if body is not None else
               "it is not a Pallas-Triton kernel (a Mosaic GPU kernel's shared memory is not modelled)")
        items = _blocks(info, stages)
        return items, sum(i.bytes for i in items), 0, why
    items = [VmemItem(what=f"{load.ref} tile" + (" (loop)" if load.in_loop else ""), shape=list(load.shape),
                      dtype=load.dtype, bytes_each=load.bytes, buffers=max(stages, 1) if load.in_loop else 1)
             for load in body.loads]
    if body.computed_operand_bytes:
        items.append(VmemItem(what="matmul operands the body computes", shape=[], dtype="",
                              bytes_each=body.computed_operand_bytes, buffers=1))
    items += [VmemItem(what="scratch", shape=list(sc.shape), dtype=sc.dtype, bytes_each=sc.bytes, buffers=1)
              for sc in info.scratch]
    if body.largest_value_bytes:
        items.append(VmemItem(what="scratch: the largest value (a conversion or reduction)", shape=[], dtype="",
                              bytes_each=body.largest_value_bytes, buffers=1))
    low = sum(load.bytes for load in body.loads if load.pipelined) * max(stages - 1, 0)
    return items, sum(i.bytes for i in items), low, None


def gpu_budget(info: PallasCall, chip: Chip) -> VmemBudget:
    """The kernel's shared memory on ``chip`` as a range: total_bytes the upper bound, certain_bytes
    the lower (VmemBudget.verdict: "fits", "over" or "unsure")."""
    limit = chip.shared_mem_per_block
    assert limit is not None  # budget() asks only for a GPU with the figure
    items, high, low, unfollowed = shared_memory_bounds(info)
    return VmemBudget(chip=chip.name, kernel=info.name, memory="shared memory", items=items, total_bytes=high,
                      limit_bytes=limit, limit_source="opt-in shared memory per block", physical_bytes=None,
                      smem_bytes=0, fits=high <= limit and unfollowed is None, headroom_bytes=limit - high,
                      block_growth=None, body_bytes=high - low, unfollowed=unfollowed,
                      note="shared memory: a range, from the loop tiles Triton surely keeps to every tile the "
                           "body reads (docs/gpu.md)")


def shared_memory_findings(b: VmemBudget) -> list[Finding]:
    """The estimate's verdict as a finding: none where it fits, an error where the lower bound is
    over the limit, a warning that only a compile decides where the limit lies between the bounds."""
    kib = lambda n: f"{n / 1024:.0f} KiB"
    data = {"chip": b.chip, "bytes": b.total_bytes, "limit": b.limit_bytes, "certain_bytes": b.certain_bytes}
    if b.verdict == "fits":
        return []
    if b.verdict == "over":
        return [Finding("error", "shared-memory-over-limit",
                        f"{b.kernel} on {b.chip}: needs at least {kib(b.certain_bytes)} of shared memory (the loop's "
                        f"tiles, num_stages - 1 copies each, which Triton's pipeliner keeps for the whole loop) but "
                        f"the {b.limit_source} is {kib(b.limit_bytes)}: fewer num_stages or smaller tiles",
                        kernel=b.kernel, view="pallas", data=data)]
    why = (b.unfollowed + ", so the estimate has no bounds" if b.unfollowed else
           f"Triton keeps at least {kib(b.certain_bytes)} and at most {kib(b.total_bytes)} in shared memory "
           "(which tiles and values go through it is Triton's choice), and the limit lies between them")
    return [Finding("warning", "shared-memory-undecided",
                    f"{b.kernel} on {b.chip}: the {b.limit_source} is {kib(b.limit_bytes)}; {why}; {COMPILE_DECIDES}",
                    kernel=b.kernel, view="pallas", data=data)]
