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
    found = _loops(bundles, starts)
    loops: list[Loop] = []
    least, most, outer = _span(bundles, 0, len(bundles), 0, starts, found, loops)
    first = min((l for l in loops if l.depth == 1), key=lambda l: l.start, default=None)
    return Walk(bundles=len(bundles), loops=sorted(loops, key=lambda l: (l.start, l.depth)), least=least, most=most,
                outer_trips=first.trips if first else None, outer_least=outer[0] if first else 0,
                outer_most=outer[1] if first else 0, unknown_trips=sum(1 for l in loops if l.trips is None))


def _loops(bundles: list[Bundle], starts: dict[int, int]) -> dict[int, tuple[int, int | None]]:
    """Loop start -> (one past its end, trip count): each branch back to an earlier bundle closes
    a loop (its delay slots, the empty bundles after it, belong to the loop); the trip count is the
    constant the branch's predicate compares the counter with (libtpu marks the grid loop's as its
    "loop exit test"), None where that is a register."""
    found: dict[int, tuple[int, int | None]] = {}
    for b in bundles:
        target = starts.get(b.branch.target) if b.branch is not None else None
        if target is None or target > b.index:
            continue
        end = b.index + 1
        while end < len(bundles) and not bundles[end].instructions:
            end += 1
        body = bundles[target:end]
        trips = next((x.exit_bound for x in reversed(body) if x.exit_bound is not None), None)
        if trips is None and b.branch is not None and b.branch.predicate:
            trips = next((x.compares[b.branch.predicate] for x in body if b.branch.predicate in x.compares), None)
        if end - target > found.get(target, (target, None))[0] - target:
            found[target] = (end, trips)
    return found


def _items(lo: int, hi: int, found: dict[int, tuple[int, int | None]], inside: bool) -> list[tuple[int, int, bool]]:
    """[lo, hi) as (start, end, is a loop) items: a bundle, or a loop that starts there (``inside``
    a loop [lo, hi), that loop is not its own item)."""
    items, i = [], lo
    while i < hi:
        end = found[i][0] if i in found and not (inside and i == lo) else i + 1
        end = min(max(end, i + 1), hi)
        items.append((i, end, i in found and not (inside and i == lo) and end - i >= 1 and found[i][0] == end))
        i = end
    return items


def _span(bundles: list[Bundle], lo: int, hi: int, depth: int, starts: dict[int, int],
          found: dict[int, tuple[int, int | None]], loops: list[Loop]) -> tuple[int, int, tuple[int, int]]:
    """(least, most) bundles issued over [lo, hi) at ``depth`` (0: the whole listing; else the body
    of a loop), and (least, most) of one trip of the first loop directly inside it."""
    items = _items(lo, hi, found, inside=depth > 0)
    first_loop: tuple[int, int] | None = None
    costs: list[tuple[int, int]] = []
    for s, e, is_loop in items:
        if not is_loop:
            costs.append((e - s, e - s))
            continue
        body_least, body_most, _ = _span(bundles, s, e, depth + 1, starts, found, loops)
        trips = found[s][1]
        loops.append(Loop(start=s, end=e, depth=depth + 1, trips=trips))
        first_loop = first_loop or (body_least, body_most)
        costs.append(((trips or 1) * body_least, (trips or 1) * body_most))
    index_of = {}
    for n, (s, e, _) in enumerate(items):
        for i in range(s, e):
            index_of[i] = n
    least = [0] * (len(items) + 1)
    most = [0] * (len(items) + 1)
    for n in range(len(items) - 1, -1, -1):
        s, e, is_loop = items[n]
        cost_least, cost_most = costs[n]
        least[n], most[n] = cost_least + least[n + 1], cost_most + most[n + 1]
        branch = bundles[s].branch if not is_loop else None
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


def _empty(bundles: list[Bundle], item: tuple[int, int, bool]) -> bool:
    s, e, is_loop = item
    return not is_loop and e - s == 1 and not bundles[s].instructions
