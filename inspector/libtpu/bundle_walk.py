"""How many bundles a kernel issues when it runs, read from its final bundles alone (no simulation).

The bundles of one kernel are a straight listing in which loops are runs of deeper bundles (the
``>`` marks; a Pallas kernel's grid is the outermost loop) ending in a counter compared with a
constant (libtpu's "loop exit test"), and guarded code is skipped by a predicated forward branch
(``sbr.rel (%p) target = $regionN``). A VLIW bundle issues in one cycle at best, so the bundles on
the cheapest path through the branches, each loop run as often as its constant says, are cycles
the kernel cannot do without: a floor on its time that counts the vector and scalar work the
roofline leaves out (a sorting network, a masked softmax, address arithmetic). The costliest path
(every guarded region run) says how much work libtpu's simulation, which unrolls every bundle it
runs, will have to do: the estimate's plan (plan.py) reads it before a simulation starts.

Neither figure counts stalls (a DMA not yet done, a result not yet popped), and a loop whose
bound is a register (a run-time count) counts once in both: ``unknown_trips`` says how many.
"""
from __future__ import annotations

import dataclasses

from .dumps import Bundle


@dataclasses.dataclass(frozen=True, kw_only=True)
class Loop:
    start: int  # its first bundle
    end: int  # one past its last
    depth: int  # 1: outermost (a Pallas kernel's grid)
    trips: int | None  # None: its bound is not a constant


@dataclasses.dataclass(frozen=True, kw_only=True)
class Walk:
    """One kernel's bundles as issued: per path through its branches and loops."""

    bundles: int  # in the listing, each once
    loops: list[Loop]
    least: int  # issued on the cheapest path (every guarded region skipped that can be)
    most: int  # issued with every guarded region run
    outer_trips: int | None  # the outermost loop's trip count (a Pallas kernel: its grid steps, plus the pipeline's two)
    outer_least: int  # of ``least``, what one trip of the outermost loop issues
    outer_most: int
    unknown_trips: int  # loops counted once because their bound is known only when they run

    def most_at(self, outer_trips: int) -> int:
        """``most`` with the outermost loop run ``outer_trips`` times (a cut grid's simulation)."""
        if self.outer_trips is None:
            return self.most
        return self.most - self.outer_trips * self.outer_most + outer_trips * self.outer_most


def walk(bundles: list[Bundle]) -> Walk:
    starts: dict[int, int] = {}
    for b in bundles:
        for region in b.regions:
            starts.setdefault(region, b.index)
    loops: list[Loop] = []
    least, most, outer = _span(bundles, 0, len(bundles), 0, starts, loops)
    first = min((l for l in loops if l.depth == 1), key=lambda l: l.start, default=None)
    return Walk(bundles=len(bundles), loops=sorted(loops, key=lambda l: (l.start, l.depth)), least=least, most=most,
                outer_trips=first.trips if first else None, outer_least=outer[0] if first else 0,
                outer_most=outer[1] if first else 0, unknown_trips=sum(1 for l in loops if l.trips is None))


def _items(bundles: list[Bundle], lo: int, hi: int, depth: int) -> list[tuple[int, int]]:
    """[lo, hi) as (start, end) items: a bundle at ``depth``, or a loop one deeper (a run of deeper
    bundles, split where a new loop body begins)."""
    items, i = [], lo
    while i < hi:
        if bundles[i].depth <= depth:
            items.append((i, i + 1))
            i += 1
            continue
        j = i + 1
        while j < hi and bundles[j].depth > depth and not (bundles[j].marker == "LB" and bundles[j].depth == depth + 1):
            j += 1
        items.append((i, j))
        i = j
    return items


def _span(bundles: list[Bundle], lo: int, hi: int, depth: int, starts: dict[int, int],
          loops: list[Loop]) -> tuple[int, int, tuple[int, int]]:
    """(least, most) bundles issued over [lo, hi) at ``depth``, and (least, most) of one trip of
    the first loop directly inside it."""
    items = _items(bundles, lo, hi, depth)
    first_loop: tuple[int, int] | None = None
    costs: list[tuple[int, int]] = []
    for s, e in items:
        if e - s == 1 and bundles[s].depth <= depth:
            costs.append((1, 1))
            continue
        body_least, body_most, _ = _span(bundles, s, e, depth + 1, starts, loops)
        bound = next((b.exit_bound for b in reversed(bundles[s:e]) if b.exit_bound is not None and b.depth == depth + 1), None)
        loops.append(Loop(start=s, end=e, depth=depth + 1, trips=bound))
        trips = bound if bound is not None else 1
        first_loop = first_loop or (body_least, body_most)
        costs.append((trips * body_least, trips * body_most))
    index_of = {}
    for n, (s, e) in enumerate(items):
        for i in range(s, e):
            index_of[i] = n
    least = [0] * (len(items) + 1)
    most = [0] * (len(items) + 1)
    for n in range(len(items) - 1, -1, -1):
        s, _ = items[n]
        cost_least, cost_most = costs[n]
        least[n], most[n] = cost_least + least[n + 1], cost_most + most[n + 1]
        branch = bundles[s].branch if bundles[s].depth <= depth else None
        target = starts.get(branch.target) if branch else None
        if branch is None or target is None or target <= s:  # no branch, or a loop's way back
            continue
        to = index_of.get(target, len(items)) if target < hi else len(items)
        delays = 0
        while n + 1 + delays < len(items) and _empty(bundles, items[n + 1 + delays]):
            delays += 1
        taken_least, taken_most = cost_least + delays + least[to], cost_most + delays + most[to]
        if branch.predicated:
            least[n], most[n] = min(least[n], taken_least), max(most[n], taken_most)
        else:
            least[n], most[n] = taken_least, taken_most
    return least[0], most[0], first_loop or (0, 0)


def _empty(bundles: list[Bundle], item: tuple[int, int]) -> bool:
    s, e = item
    return e - s == 1 and not bundles[s].instructions
