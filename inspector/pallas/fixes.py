"""The changes `inspector fix` tries on a program's pallas_calls, proposed from what the grid walk
and the VMEM budget know (data in, data out; the compile and the interpreter judge them later):

- ``vmem_limit``: the smallest limit (whole MiB) strictly above what the compiler said it needed, where the
  default refused the kernel and the chip's VMEM holds it;
- ``buffered``: pl.Buffered(1) for an input the compiler double-buffers although its block index
  changes seldom (never, or only along outer grid axes): one block of VMEM saved;
- ``semantics``: "parallel" for an "arbitrary" axis on a chip whose device has two TensorCores,
  refused with the walk's reason where the axis's steps write the same output block;
- ``params``: every other value INSPECT's params offer for a block size (one at a time);
- ``order``: the grid's axis order that the walk sees move the fewest HBM bytes, where that is
  fewer than now and no output block is then revisited; refused as not applicable where the body
  reads pl.program_id (a reorder would change what it reads unless the body were edited).
"""
from __future__ import annotations

import dataclasses
import itertools

from ..base.chips import Chip
from ..base.fix_model import Change, Refusal
from ..base.pallas_model import FoundCall
from .grid_walk import GridWalk, walk_grid

MIB = 2 ** 20
MOST_PARAMS = 8  # the most block-size variants tried: each is a compile per chip
MOST_ORDER_AXES = 4  # grids of more axes are not reordered (24 walks at 4)


def _numbered(calls: list[FoundCall]) -> list[tuple[FoundCall, int]]:
    """Each call with its index among the calls of its name (Change.call)."""
    seen: dict[str, int] = {}
    out = []
    for found in calls:
        name = found.info.name
        seen[name] = seen.get(name, -1) + 1
        out.append((found, seen[name]))
    return out


def _tpu_kernels(calls: list[FoundCall]) -> list[tuple[FoundCall, int]]:
    return [(f, n) for f, n in _numbered(calls) if f.info.style == "pallas_call" and not f.info.interpret
            and not (f.info.core_type or "").startswith("SparseCore")]


def buffered_changes(calls: list[FoundCall]) -> list[Change]:
    """pl.Buffered(1) for each input given two buffers whose block is fetched at most once per
    two grid steps (the walk's transfers)."""
    changes = []
    for found, n in _tpu_kernels(calls):
        info = found.info
        steps = info.steps
        if not steps or steps < 2:
            continue
        walk = walk_grid(found)
        transfers = {w.operand: w for w in walk.operands}
        grid = [g for g in info.grid if g is not None]
        for op in info.operands:
            w = transfers.get(op.operand)
            if op.role != "input" or not op.pipelined or w is None or op.buffers(steps, grid) != 2:
                continue
            if w.transfers * 2 > steps:
                continue
            how = ("its block index never changes over the grid" if w.constant else
                   f"its block changes {w.transfers} times in {steps} grid steps (outer axes only)")
            changes.append(Change(kind="buffered", kernel=info.name, call=n, value=[op.position, 1], operand=op.operand,
                                  source=info.source or "",
                                  why=f"{op.operand}: {how}; one buffer of {op.block_bytes:,} bytes saved"))
    return changes


def semantics_changes(calls: list[FoundCall], chip: Chip) -> tuple[list[Change], list[Refusal]]:
    """"parallel" for the grid's leading axes (jax wants the parallel axes a prefix of the grid),
    one more "arbitrary" axis each time, on a chip with two TensorCores per device; refused where
    the walk, with the axis parallel, finds steps along it writing one output block."""
    if chip.megacore_cores < 2:
        return [], []
    changes, refused = [], []
    for found, n in _tpu_kernels(calls):
        info = found.info
        if info.steps is None:
            continue
        semantics = list(info.dimension_semantics)
        for axis, size in enumerate(info.grid):
            if semantics[axis] == "parallel":
                continue
            semantics = semantics[:axis] + ["parallel"] + semantics[axis + 1:]
            change = Change(kind="semantics", kernel=info.name, call=n, value=list(semantics),
                            source=info.source or "",
                            why=f"axis {axis} ({info.grid_names[axis]}, {size} steps) split across {chip.name}'s "
                                f"{chip.megacore_cores} TensorCores")
            trial = dataclasses.replace(found, info=dataclasses.replace(info, dimension_semantics=list(semantics)))
            race = next((f for f in walk_grid(trial).findings if f.code == "parallel-axis-race"), None)
            if race is not None:
                refused.append(Refusal(change=change, chip=chip.name,
                                       reason=f"axis {axis} ({info.grid_names[axis]}) is not independent: "
                                              + race.message.split(", marked")[0]))
                break  # the axes after it cannot join the parallel prefix
            if size and size > 1:
                changes.append(change)
    return changes, refused


def vmem_limit_change(calls: list[FoundCall], chip: Chip, needed_bytes: int | None,
                      kernel: str | None) -> tuple[list[Change], list[Refusal]]:
    """The smallest whole-MiB vmem_limit_bytes above ``needed_bytes`` (what the compiler said the
    kernel ``kernel`` needs on ``chip``); refused past the chip's VMEM."""
    if needed_bytes is None or chip.vmem_bytes is None:
        return [], []
    numbered = _tpu_kernels(calls)
    found = next(((f, n) for f, n in numbered if f.info.name == kernel), numbered[0] if len(numbered) == 1 else None)
    if found is None:
        return [], []
    # strictly above: given exactly what it said it needed, the compiler needs a little more (the
    # flash sample at block_q=4096 on v5e: 24 MiB refused, asking 24 MiB + 4 KiB; 25 MiB compiles)
    limit = (needed_bytes // MIB + 1) * MIB
    change = Change(kind="vmem_limit", kernel=found[0].info.name, call=found[1], value=limit,
                    source=found[0].info.source or "",
                    why=f"the compiler needs {needed_bytes / MIB:.2f} MiB of VMEM on {chip.name}")
    if chip.vmem_bytes is not None and limit > chip.vmem_bytes:
        return [], [Refusal(change=change, chip=chip.name, reason=f"{limit // MIB} MiB is more than {chip.name}'s "
                            f"{chip.vmem_bytes // MIB} MiB of VMEM per TensorCore")]
    return [change], []


def param_changes(params: dict, choices: dict) -> list[Change]:
    """Every other value INSPECT's params offer, one param at a time (at most MOST_PARAMS)."""
    changes: list[Change] = []
    for name, values in choices.items():
        for value in values:
            if value != params.get(name) and len(changes) < MOST_PARAMS:
                changes.append(Change(kind="params", kernel="", call=None, value={name: value},
                                      why=f"{name}={value}: one of INSPECT's choices (now {params.get(name)})"))
    return changes


def _permuted(found: FoundCall, perm: tuple[int, ...]) -> FoundCall:
    """The call with its grid in the order ``perm`` (new axis k is old axis perm[k]), for the walk."""
    info = found.info
    n = len(perm)
    back = [perm.index(a) for a in range(n)]  # old axis a is new axis back[a]

    def reordered(index_map):
        return lambda *points: index_map(*(points[back[a]] for a in range(n)))

    moved = dataclasses.replace(info, grid=[info.grid[p] for p in perm], grid_names=[info.grid_names[p] for p in perm],
                                grid_dynamic=[info.grid_dynamic[p] for p in perm],
                                dimension_semantics=[info.dimension_semantics[p] for p in perm])
    return dataclasses.replace(found, info=moved,
                               index_maps=[reordered(m) for m in found.index_maps],
                               signature=f"{found.signature} in grid order {perm}")  # walk_grid's memo key


def _orders(found: FoundCall):
    """Every other order of the grid that keeps the "parallel" axes leading (as jax wants)."""
    semantics = found.info.dimension_semantics
    for perm in itertools.permutations(range(len(found.info.grid))):
        moved = [semantics[p] for p in perm]
        if list(perm) != sorted(perm) and moved == sorted(moved, key=lambda s: s != "parallel"):
            yield perm


def order_changes(calls: list[FoundCall]) -> tuple[list[Change], list[Refusal]]:
    """For each kernel, the grid order whose walk moves the fewest HBM bytes, where that is fewer
    than now and the walk finds no error with it (an output block revisited, a parallel race)."""
    changes, refused = [], []
    for found, n in _tpu_kernels(calls):
        info = found.info
        if (info.steps is None or len(info.grid) > MOST_ORDER_AXES or info.vmapped_dims or found.pipelines
                or sum(1 for g in info.grid if g and g > 1) < 2):
            continue
        now = walk_grid(found)
        if now.walked_steps < now.steps or any(f.severity == "error" for f in now.findings):
            continue  # a sampled walk counts part of the bytes; a kernel with errors has other fixes first
        best: tuple[tuple[int, ...], GridWalk] | None = None
        for perm in _orders(found):
            walk = walk_grid(_permuted(found, perm))
            if not any(f.severity == "error" for f in walk.findings) and walk.hbm_bytes < (best[1] if best else now).hbm_bytes:
                best = (perm, walk)
        if best is None:
            continue
        perm, walk = best
        names = "(" + ", ".join(info.grid_names[p] for p in perm) + ")"
        change = Change(kind="order", kernel=info.name, call=n, value=list(perm), operand=names, source=info.source or "",
                        why=f"grid order {names}: the walk moves {walk.hbm_bytes:,} HBM bytes, not {now.hbm_bytes:,}")
        if info.program_ids:
            axes = ", ".join(f"{a} ({info.grid_names[a]})" for a in info.program_ids if 0 <= a < len(info.grid_names))
            refused.append(Refusal(change=change, reason=f"not applicable: the body reads pl.program_id of axis {axes}, "
                                                         "which a reorder changes unless the body is edited too"))
        else:
            changes.append(change)
    return changes, refused
