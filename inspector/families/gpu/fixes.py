"""The changes `inspector fix` tries on a Pallas-Triton kernel for a GPU, beside INSPECT's block
sizes (pallas/fixes.py ``param_changes``), each proven later by a deviceless XLA:GPU compile:

- fewer ``num_stages``, where the compiler refused the kernel for shared memory: Triton's pipeliner
  keeps a copy of the loop's input tiles per stage, so each stage fewer frees one copy;
- the other usual ``num_warps`` (4 or 8): the threads a program runs, which changes the registers
  each thread may hold (and so spills), not what the kernel computes.

Data in, data out: the compile judges them (inspector/verbs/fixing.py)."""
from __future__ import annotations

from ...base.chips import Chip
from ...base.fix_model import Change, Refusal
from ...base.pallas_model import FoundCall
from ...pallas.gpu_smem import TRITON_DEFAULT_STAGES

WARPS = (4, 8)  # the num_warps Triton's own tunings choose between for a tile of 64-256 rows
TRITON_DEFAULT_WARPS = 4


def _triton_kernels(calls: list[FoundCall]) -> list[tuple[FoundCall, int]]:
    """Each compiled Pallas-Triton call (Triton's CompilerParams, or none given) with its index
    among the calls of its name (``Change.call``)."""
    seen: dict[str, int] = {}
    out = []
    for found in calls:
        name = found.info.name
        seen[name] = seen.get(name, -1) + 1
        if found.info.style == "pallas_call" and not found.info.interpret and found.info.written_for in (None, "triton"):
            out.append((found, seen[name]))
    return out


def triton_changes(calls: list[FoundCall], chip: Chip, *, needed_bytes: int | None,
                   kernel: str | None) -> tuple[list[Change], list[Refusal]]:
    """Fewer num_stages for the refused kernel (every kernel where the compiler names none), most
    stages first; the other num_warps for every kernel."""
    changes: list[Change] = []
    refused: list[Refusal] = []
    for found, n in _triton_kernels(calls):
        info = found.info
        source = info.source or ""
        if needed_bytes is not None and (kernel is None or kernel == info.name):
            stages = info.num_stages or TRITON_DEFAULT_STAGES
            for fewer in range(stages - 1, 0, -1):
                off = " (1: the loop is not pipelined, each tile's load waits: tried last)" if fewer == 1 else ""
                changes.append(Change(kind="triton", kernel=info.name, call=n, value={"num_stages": fewer}, source=source,
                                      why=f"the compiler asked for {needed_bytes / 1024:.0f} KiB of shared memory on "
                                          f"{chip.name} at num_stages={stages}: each stage fewer keeps one copy less of "
                                          f"the loop's input tiles{off}", last_resort=fewer == 1))
            if stages <= 1:
                refused.append(Refusal(chip=chip.name, reason="num_stages is 1 already: only smaller blocks free shared memory",
                                       change=Change(kind="triton", kernel=info.name, call=n, value={"num_stages": 1},
                                                     source=source)))
        warps = info.num_warps or TRITON_DEFAULT_WARPS
        for other in WARPS:
            if other != warps:
                changes.append(Change(kind="triton", kernel=info.name, call=n, value={"num_warps": other}, source=source,
                                      why=f"{other} warps a program, not {warps}: the registers each thread may hold"))
    return changes, refused
