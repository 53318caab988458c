"""Walk a pallas_call's grid: evaluate every index map at every grid point (vectorised, in
chunks) and find what silently corrupts results on a TPU, plus the HBM traffic the BlockSpecs
imply.

The grid runs in row-major order, the last axis fastest (how Pallas TPU iterates it). A block
is fetched again only when its index changes between consecutive steps; an output block is
written back when its index changes. Operands left in HBM (memory_space=ANY) are not blocks of
the grid: the kernel's own DMAs move them, counted per step from the body.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from ..base.chips import MULTI_CORE_CHIPS
from ..base.findings import Finding
from ..base.pallas_model import BlockSpecInfo, FoundCall

MAX_STEPS = 1 << 24  # past this the walk covers the first MAX_STEPS steps and says so
TRACE_STEPS = 4096  # per-step block indices kept for the first steps, for stepping through the grid in the UI
CHUNK = 1 << 20


@dataclasses.dataclass(kw_only=True)
class OperandWalk:
    operand: str
    role: str
    block_bytes: int
    distinct_blocks: int
    transfers: int  # fetches (inputs) or write-backs (outputs): runs of an unchanged block index
    bytes: int  # transfers x block bytes
    constant: bool  # the index never changes: one buffer is enough
    on_chip: bool = False  # an emit_pipeline over a ref already in VMEM/SMEM: its copies are no HBM traffic


@dataclasses.dataclass(kw_only=True)
class GridWalk:
    kernel: str
    steps: int
    walked_steps: int  # < steps when the grid was too large to walk whole
    operands: list[OperandWalk]
    hbm_bytes_read: int  # blocks fetched plus the body's DMAs from HBM (their most, when branches decide)
    hbm_bytes_written: int
    findings: list[Finding]
    seconds: float
    skipped: str | None = None  # why no walk was possible (grid sizes or index-map data known only at run time)
    dma_bytes: list[int] = dataclasses.field(default_factory=lambda: [0, 0])  # [min, max] moved by the body's DMAs
    onchip_bytes: int = 0  # blocks an emit_pipeline over VMEM refs copies within VMEM: not HBM traffic
    # For the first TRACE_STEPS steps: the grid point and, per operand, the block it touches.
    trace_points: list[list[int]] = dataclasses.field(default_factory=list)
    trace_blocks: dict[str, list[list[int]]] = dataclasses.field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        return self.walked_steps < self.steps

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_bytes_read + self.hbm_bytes_written

    @property
    def least_hbm_bytes(self) -> int:
        """The HBM traffic with the body's DMAs at their least (where branches decide how many run)."""
        return self.hbm_bytes - (self.dma_bytes[1] - self.dma_bytes[0])


def grid_points(grid: list[int], start: int, stop: int) -> list[np.ndarray]:
    flat = np.arange(start, stop, dtype=np.int64)
    return [a.astype(np.int32) for a in np.unravel_index(flat, grid)] if grid else []


def _block_geometry(op: BlockSpecInfo) -> tuple[list[int], list[int], bool]:
    """Per dim: element size of one block index step, number of blocks; and whether block
    indices are ordinary block indices (no pl.Element / BoundedSlice dims)."""
    steps, counts, regular = [], [], True
    for kind, block, dim in zip(op.dim_kinds, op.block_shape, op.array_shape):
        if kind == "squeezed":
            steps.append(1)
            counts.append(dim)
        elif kind == "blocked":
            assert block is not None  # a blocked dimension has its block size
            steps.append(block)
            counts.append(math.ceil(dim / block) if block else 1)
        else:
            regular = False
            steps.append(1)
            counts.append(dim)
    return steps, counts, regular


def _ranges(op: BlockSpecInfo, block: tuple[int, ...]) -> str:
    """Element slices of one block, e.g. [0, 896:1024, 0:128]."""
    parts = []
    for kind, size, idx, dim in zip(op.dim_kinds, op.block_shape, block, op.array_shape):
        if kind == "squeezed":
            parts.append(str(idx))
        else:
            size = size or 1
            parts.append(f"{idx * size}:{min((idx + 1) * size, dim)}")
    return "[" + ", ".join(parts) + "]"


class _OperandState:
    def __init__(self, op: BlockSpecInfo, grid: list[int], semantics: list[str]):
        self.op = op
        self.sizes, self.counts, self.regular = _block_geometry(op)
        self.prev = None  # block id at the end of the previous chunk
        self.runs: list[np.ndarray] = []  # block ids where a run starts
        self.first_step: dict[int, int] = {}
        self.oob: tuple | None = None
        self.parallel = [a for a, s in enumerate(semantics) if s == "parallel" and grid[a] > 1]
        self.pairs: dict[int, list[np.ndarray]] = {a: [] for a in self.parallel}
        self.grid = grid

    def add(self, blocks: list[np.ndarray], points: list[np.ndarray], start: int) -> None:
        n = len(points[0]) if points else 1
        blocks = [np.broadcast_to(np.asarray(b, dtype=np.int64), (n,)) for b in blocks]
        if not self.regular:
            ids = np.ravel_multi_index([np.clip(b, 0, c - 1) for b, c in zip(blocks, self.counts)], self.counts) if blocks else np.zeros(n, np.int64)
        else:
            bad = np.zeros(n, bool)
            for b, size, dim in zip(blocks, self.sizes, self.op.array_shape):
                bad |= (b < 0) | (b * size >= dim)
            if bad.any() and self.oob is None:
                i = int(np.argmax(bad))
                self.oob = (start + i, tuple(int(b[i]) for b in blocks), tuple(int(p[i]) for p in points))
            clipped = [np.clip(b, 0, c - 1) for b, c in zip(blocks, self.counts)]
            ids = np.ravel_multi_index(clipped, self.counts) if clipped else np.zeros(n, np.int64)
        change = np.empty(n, bool)
        change[0] = self.prev is None or ids[0] != self.prev
        change[1:] = ids[1:] != ids[:-1]
        self.runs.append(ids[change])
        self.prev = ids[-1]
        if self.op.role == "output":
            for a in self.parallel:
                key = ids.astype(np.int64) * self.grid[a] + points[a]
                self.pairs[a].append(_unique_counts(key)[0])

    def result(self) -> tuple[OperandWalk, np.ndarray, np.ndarray]:
        """The operand's totals, and each block visited with its number of runs."""
        runs = np.concatenate(self.runs) if self.runs else np.zeros(0, np.int64)
        values, counts = _unique_counts(runs)
        walk = OperandWalk(operand=self.op.operand, role=self.op.role, block_bytes=self.op.block_bytes,
                           distinct_blocks=int(len(values)), transfers=int(len(runs)),
                           bytes=int(len(runs)) * self.op.block_bytes, constant=len(values) <= 1)
        return walk, values, counts


def _unique_counts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, return_counts=True) by sorting: numpy 2's hash-based unique takes seconds on
    millions of ints."""
    if not len(a):
        return a, a
    s = np.sort(a)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    return s[starts], np.diff(np.r_[starts, len(s)])


def _block_of(state: _OperandState, block_id: int) -> tuple[int, ...]:
    return tuple(int(x) for x in np.unravel_index(block_id, state.counts))


def _blocks(state: _OperandState, block_ids: np.ndarray, limit: int = 64) -> list[list[int]]:
    """The first ``limit`` blocks as index lists: what findings carry as data["blocks"]."""
    return [list(_block_of(state, int(b))) for b in block_ids[:limit]]


def _pairs_of(state: _OperandState, d: int, states: list[_OperandState]) -> list[tuple]:
    """The output states (and their dims) an input's dim ``d`` reaches straight; None stands for
    an output that is not pipelined (nothing then proves the padding harmless)."""
    outputs = {s.op.position: s for s in states if s.op.role == "output"}
    return [(outputs.get(o), a) for o, a in state.op.straight_to.get(d, [])]


def _straight_pairs(states: list[_OperandState]) -> dict:
    """The (input, dim, output, dim) pairs to compare step by step: the input's padded dim reaches
    that output dim straight, over an array and blocks of the same size there."""
    pairs = {}
    for i in states:
        for d in i.op.straight_to if i.op.role == "input" else ():
            for o, a in _pairs_of(i, d, states):
                if (o is not None and i.regular and o.regular and i.op.array_shape[d] == o.op.array_shape[a]
                        and i.sizes[d] == o.sizes[a]):
                    pairs[(i, d, o, a)] = True
    return pairs


def _findings(call: FoundCall, state: _OperandState, values: np.ndarray, counts: np.ndarray,
              harmless: frozenset[int] | set[int] = frozenset()) -> list[Finding]:
    op, info = state.op, call.info
    found = []
    where = dict(kernel=info.name, operand=op.operand, view="pallas")
    if state.oob is not None:
        step, block, point = state.oob
        dims = [f"dim {d}: block {b} starts at element {b * s} of {n}"
                for d, (b, s, n) in enumerate(zip(block, state.sizes, op.array_shape)) if b * s >= n or b < 0]
        found.append(Finding("error", "block-out-of-bounds",
                             f"{op.operand}: grid point {point} maps to block {block}, past the array {op.array_shape} "
                             f"({'; '.join(dims)}). index_map must return block indices, not element offsets "
                             f"(index map {op.index_map})", data={"grid_point": list(point), "blocks": [list(block)]}, **where))
    if not state.regular or op.unused:  # nothing reads an unused output: its blocks cannot corrupt a result
        return found
    partial = [(d, n, s) for d, (n, s, k) in enumerate(zip(op.array_shape, state.sizes, op.dim_kinds))
               if k == "blocked" and n % s]
    visited = np.unravel_index(values, state.counts) if len(values) else [np.zeros(0, np.int64)] * len(state.counts)
    for d, n, s in partial:
        last = state.counts[d] - 1
        if (visited[d] == last).any():
            what = ("writes past the edge are dropped" if op.role == "output" else
                    "reads past the edge return unspecified values, but this kernel only carries them to output "
                    "elements past the output's edge, which are dropped: no mask needed" if d in harmless else
                    "reads past the edge return unspecified values (NaN in interpret mode): mask them")
            # dropped writes are harmless; reads of padding are a bug unless the kernel masks them
            found.append(Finding("info" if op.role == "output" or d in harmless else "warning", "partial-block",
                                 f"{op.operand}: the last block along dim {d} covers elements "
                                 f"{last * s}:{(last + 1) * s} of {n}: padded; {what}",
                                 data={"dim": d, "array_size": n, "block_size": s}, **where))
    if op.role != "output":
        return found
    found += _unwritten_findings(call, state, values)
    revisited = values[counts > 1]
    if len(revisited) and op.revisit != "any":  # RevisitMode.ANY: Mosaic reloads a revisited block (extra DMAs)
        block = _block_of(state, int(revisited[0]))
        found.append(Finding("error", "output-revisit",
                             f"{op.operand}: {len(revisited)} output block(s) are written in runs of steps that are not "
                             f"consecutive, e.g. block {block} (elements {_ranges(op, block)}); on TPU the block is written "
                             "back when the index changes, so the later visit overwrites the earlier result: make the "
                             "revisiting axis the last (innermost) one",
                             data={"blocks": _blocks(state, revisited), "count": int(len(revisited))},
                             **where))
    for a, chunks in state.pairs.items():
        keys = _unique_counts(np.concatenate(chunks))[0] if chunks else np.zeros(0, np.int64)
        blocks, per_block = _unique_counts(keys // state.grid[a])
        shared = blocks[per_block > 1]
        if len(shared):
            block = _block_of(state, int(shared[0]))
            found.append(Finding("error", "parallel-axis-race",
                                 f"{op.operand}: output block {block} is written from {int(per_block.max())} different "
                                 f"indices of grid axis {a} ({info.grid_names[a]}), marked \"parallel\": on chips that split "
                                 f"parallel axes across TensorCores ({MULTI_CORE_CHIPS}) two cores write the same block. "
                                 "Mark the axis \"arbitrary\" or give each index its own block",
                                 data={"axis": a, "blocks": _blocks(state, shared),
                                       "count": int(len(shared))}, **where))
    return found


def _examples(op: BlockSpecInfo, state: _OperandState, blocks: np.ndarray) -> str:
    return ", ".join(_ranges(op, _block_of(state, int(b))) for b in blocks[:4]) + (" ..." if len(blocks) > 4 else "")


def _read_split(state: _OperandState, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unwritten blocks the program reads after the kernel, those it may read (through an op
    at elements chosen at run time), and those it never reads (output_reads: it slices them away)."""
    op = state.op
    if op.read_boxes is None:
        return missing, missing[:0], missing[:0]
    index = np.unravel_index(missing, state.counts) if len(missing) else [np.zeros(0, np.int64)] * len(state.counts)
    read = np.zeros(len(missing), bool)
    for box in op.read_boxes:
        inside = np.ones(len(missing), bool)
        for idx, kind, size, dim, (lo, hi) in zip(index, op.dim_kinds, state.sizes, op.array_shape, box):
            start = idx * size if kind != "squeezed" else idx
            stop = np.minimum(start + size, dim) if kind != "squeezed" else idx + 1
            inside &= (start < hi) & (lo < stop)
        read |= inside
    rest = missing[~read]
    return (missing[read], rest, rest[:0]) if op.read_unfollowed else (missing[read], rest[:0], rest)


def _unwritten_findings(call: FoundCall, state: _OperandState, values: np.ndarray) -> list[Finding]:
    """Output blocks no grid step visits: an error where the program reads them, info where it
    never does (or where that is undecided), info where the buffer is an aliased input's."""
    op, info = state.op, call.info
    where = dict(kernel=info.name, operand=op.operand, view="pallas")
    needed = math.prod(state.counts)
    if len(values) >= needed or needed > MAX_STEPS:
        return []
    missing = np.setdiff1d(np.arange(needed), values, assume_unique=True)
    if op.aliased_input:  # input_output_aliases: an in-place update leaves the rest as it was
        return [Finding("info", "output-kept-from-input",
                        f"{op.operand}: {len(missing)} of {needed} output blocks are not written by the kernel, "
                        f"e.g. elements {_examples(op, state, missing)}: they keep the values of {op.aliased_input}, "
                        "which input_output_aliases gives the same buffer",
                        data={"blocks": _blocks(state, missing), "count": int(len(missing)), "input": op.aliased_input},
                        **where)]
    read, undecided, unread = _read_split(state, missing)
    found = []
    if len(read):
        found.append(Finding("error", "output-not-written",
                             f"{op.operand}: {len(read)} of {needed} output blocks are never written, e.g. elements "
                             f"{_examples(op, state, read)}: they keep whatever the buffer held "
                             "(check the grid covers the array: cdiv, not //)",
                             data={"blocks": _blocks(state, read), "count": int(len(read))}, **where))
    if len(undecided):
        found.append(Finding("info", "output-unwritten-undecided",
                             f"{op.operand}: {len(undecided)} of {needed} output blocks are never written, e.g. elements "
                             f"{_examples(op, state, undecided)}; whether the program reads them is undecided: it reads "
                             f"this output through {', '.join(op.read_unfollowed[:2])}, at elements known only at run "
                             "time. If it does, they hold whatever the buffer held",
                             data={"blocks": _blocks(state, undecided), "count": int(len(undecided)),
                                   "ops": list(op.read_unfollowed)}, **where))
    if len(unread):
        boxes = op.read_boxes or []  # not None: blocks are unread only where the reads are known
        reads = "; ".join(_box_text(b) for b in boxes[:2]) + (" ..." if len(boxes) > 2 else "")
        found.append(Finding("info", "output-unwritten-unread",
                             f"{op.operand}: {len(unread)} of {needed} output blocks are never written, e.g. elements "
                             f"{_examples(op, state, unread)}, and never read: after the kernel the program reads "
                             f"{'only elements ' + reads if reads else 'none of this output'}"
                             + "".join(f"; {w}" for w in op.read_overwritten[:2]),
                             data={"blocks": _blocks(state, unread), "count": int(len(unread))}, **where))
    return found


def _box_text(box: list[list[int]]) -> str:
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in box) + "]"


_WALKS: dict[tuple[str, int, tuple, tuple, str, str], GridWalk] = {}


def walk_grid(call: FoundCall, max_steps: int = MAX_STEPS) -> GridWalk:
    """The walk of ``call``; a kernel met again (another chip, another view) is walked once."""
    # the signature covers the grid and index maps; the findings also read what the body does with them
    body = tuple((op.revisit, repr(sorted(op.straight_to.items()))) for op in call.info.operands)
    # ...and the findings what the program does with each operand, and the names they say
    use = repr([(op.operand, op.unused, op.aliased_input, op.read_boxes, op.read_unfollowed) for op in call.info.operands])
    key = (call.signature, max_steps, tuple(call.info.dimension_semantics), body, call.info.name, use)
    if key not in _WALKS:
        _WALKS[key] = _walk(call, max_steps)
    return _WALKS[key]


def _skipped(info, why: str, message: str) -> GridWalk:
    return unwalked(info, [Finding(
        "info", "walk-needs-values", f"{info.name}: {message}, so the grid walk (coverage, revisits, block traffic) "
        "cannot follow it; give concrete example inputs (INSPECT \"args\" as a function returning arrays) to walk it",
        kernel=info.name, view="pallas", data={"why": why})], skipped=why)


def unwalked(info, findings: list[Finding], skipped: str) -> GridWalk:
    """A grid that was not walked, and why."""
    return GridWalk(kernel=info.name, steps=info.steps or 0, walked_steps=0, operands=[], hbm_bytes_read=0,
                    hbm_bytes_written=0, findings=findings, seconds=0.0, skipped=skipped)


def _dma_traffic(info, steps: int) -> tuple[list[int], int, int]:
    """[min, max] bytes of the body's HBM DMAs over the grid, and the (max) bytes read and written."""
    hbm = [d for d in info.dmas if d.touches_hbm]
    low = sum(d.bytes * d.per_step[0] for d in hbm) * steps
    high = sum(d.bytes * d.per_step[1] for d in hbm) * steps
    read = sum(d.bytes * d.per_step[1] for d in hbm if d.src_space in ("any", "hbm")) * steps
    return [int(low), int(high)], int(read), int(high - read)


def _walk(call: FoundCall, max_steps: int) -> GridWalk:
    info = call.info
    t0 = time.perf_counter()
    if info.steps is None:
        dims = [n for n, g in zip(info.grid_names, info.grid) if g is None]
        return _skipped(info, "grid computed at run time", f"grid dimension(s) {', '.join(dims)} are computed at run time "
                        "from values the example inputs do not decide")
    if info.scalar_prefetch and not call.prefetch_known:
        return _skipped(info, "scalar prefetch computed at run time", f"index maps read {info.scalar_prefetch} "
                        "scalar-prefetch operand(s) computed at run time from values the example inputs do not decide")
    steps = info.steps
    grid = [g for g in info.grid if g is not None]  # every dimension (steps is known)
    walked = min(steps, max_steps)
    pipelined = [(op, m) for op, m in zip(info.operands, call.index_maps) if op.pipelined]
    states = [_OperandState(op, grid, info.dimension_semantics) for op, _ in pipelined]
    straight = _straight_pairs(states)  # (input state, dim, output state, dim) -> same block index at every step so far
    trace_points: list[list[int]]
    trace_points, trace_blocks = [], {}
    for start in range(0, walked, CHUNK):
        stop = min(walked, start + CHUNK)
        points = grid_points(grid, start, stop)
        at = {}
        for state, (_, index_map) in zip(states, pipelined):
            blocks = [np.asarray(b) for b in (index_map(*points) if points else index_map())]
            state.add(blocks, points, start)
            at[id(state)] = blocks
            if start == 0:
                n = min(TRACE_STEPS, stop)
                trace_blocks[state.op.operand] = np.stack(
                    [np.broadcast_to(b, (stop - start,))[:n] for b in blocks], axis=1).tolist() if blocks else []
        for (i, d, o, a) in straight:
            left, right = np.broadcast_arrays(at[id(i)][d], at[id(o)][a])
            straight[(i, d, o, a)] &= bool(np.array_equal(left, right))
        if start == 0:
            trace_points = np.stack(points, axis=1)[:TRACE_STEPS].tolist() if points else [[]]
    walks, findings = [], []
    for state in states:
        walk, values, counts = state.result()
        walks.append(walk)
        # an input dim whose padding only reaches output elements past the edge, which are dropped
        harmless = {d for d in state.op.straight_to if walked == steps and
                    all(straight.get((state, d, o, a)) for o, a in _pairs_of(state, d, states))}
        findings += _findings(call, state, values, counts, harmless)
    if walked < steps:
        findings.append(Finding("info", "walk-sampled", f"{info.name}: the grid has {steps:,} steps; the walk covered "
                                f"the first {walked:,}", kernel=info.name, view="pallas"))
    dma, dma_read, dma_written = _dma_traffic(info, steps)
    for w, s in zip(walks, states):
        w.on_chip = not s.op.from_hbm
    hbm = [w for w in walks if not w.on_chip]
    return GridWalk(
        kernel=info.name, steps=steps, walked_steps=walked, operands=walks,
        hbm_bytes_read=sum(w.bytes for w in hbm if w.role == "input") + dma_read,
        hbm_bytes_written=sum(w.bytes for w in hbm if w.role == "output") + dma_written,
        findings=findings, seconds=time.perf_counter() - t0, trace_points=trace_points, trace_blocks=trace_blocks,
        dma_bytes=dma, onchip_bytes=sum(w.bytes for w in walks if w.on_chip),
    )
