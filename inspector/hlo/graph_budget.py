"""The node budget of the kernel graph, held on any program: which groups open (--expand, as many
as fit), and collapsed groups past the budget merged with their neighbours in schedule order (a
loop's repetitions among themselves first: `block #0-3 forward`). Each simplification is said
in a note, naming the program's own groups."""
from __future__ import annotations

import dataclasses
import heapq
import re

from .graph_groups import TOP
from .kernel_groups import KernelGroup, group_matches


@dataclasses.dataclass(kw_only=True)
class Group:
    """A group of the drawing: one of the program's KernelGroups, or neighbours merged to fit."""

    id: str
    label: str
    place: str
    phase: str | None
    order: int  # schedule index of its first kernel of its own
    kernels: list[str]
    by: str = "scope"
    expanded: bool = False
    members: list[str] = dataclasses.field(default_factory=list)  # merged: the labels of the groups it holds

    @property
    def scope(self) -> str:  # the name --expand matches on a program with scopes
        return self.place

    @classmethod
    def of(cls, g: KernelGroup, kernels: list[str]) -> "Group":
        return cls(id=g.id, label=g.label, place=g.place, phase=g.phase, order=g.order, kernels=kernels, by=g.by)


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def choose_expanded(groups: list[tuple[Group, KernelGroup]], expand: tuple[str, ...], room: int,
                    size: dict[str, int]) -> tuple[list[Group], list[str]]:
    """The groups `expand` names that fit in `room` nodes (in schedule order), and notes on the
    ones that did not fit. `size`: a group's nodes when open."""
    asked = [g for g, kg in groups if any(group_matches(kg, e) for e in expand)]
    opened, used = [], 0
    for g in asked:
        if used + size[g.id] <= room:
            opened.append(g)
            used += size[g.id]
    notes = []
    if len(opened) < len(asked):
        left = [g.label for g in asked if g not in opened]
        notes.append(f"--expand {' '.join(expand)} names {len(asked)} groups, {sum(size[g.id] for g in asked)} nodes open: "
                     f"opened {len(opened)}, not {', '.join(left[:3])}{' ...' if len(left) > 3 else ''} "
                     "(raise --max-nodes, or name fewer)")
    return opened, notes


def _merged_label(members: list[Group], reps: dict[str, int | None]) -> tuple[str, str]:
    """(label, place) of neighbours merged: `gpt2.py:34-35 block #0-3 forward` when they are one
    loop's repetitions of one phase, else named by the one with most kernels."""
    first = members[0]
    same = len({(g.place, g.phase) for g in members}) == 1
    if same and all(reps.get(g.id) is not None for g in members):
        found = [reps[g.id] for g in members]
        lo, hi = min(found), max(found)  # type: ignore[type-var]
        return f"{first.place} #{lo}-{hi}" + (f" {first.phase}" if first.phase else ""), first.place
    if same:
        return f"{first.label} ({len(members)} parts)", first.place
    if len({g.phase for g in members}) == 1 and TOP not in {g.place for g in members}:  # layer0 .. layer3 forward
        return f"{first.place} .. {members[-1].place}" + (f" {first.phase}" if first.phase else ""), first.place
    named = [g for g in members if g.place != TOP] or members  # named by a group of the program's own, not a <top> run
    big = max(named, key=lambda g: len(g.kernels))
    return f"{big.label} (+{len(members) - 1} groups)", big.place


def coarsen(collapsed: list[Group], room: int, reps: dict[str, int | None]) -> tuple[list[Group], list[str]]:
    """Collapsed groups in at most `room` nodes: neighbours in schedule order merged, the pair
    with the fewest kernels first, a pair of one place and phase (a loop's repetitions) before a
    run outside any group with its neighbour, before two groups of two places. Returns the
    groups and a note when some were merged."""
    if len(collapsed) <= room or not collapsed:
        return collapsed, []
    room = max(1, room)
    segs = [[g] for g in sorted(collapsed, key=lambda g: g.order)]
    size = [len(g.kernels) for g in sorted(collapsed, key=lambda g: g.order)]
    key: list[tuple[str | None, str | None]] = [(s[0].place, s[0].phase) for s in segs]
    nxt = list(range(1, len(segs))) + [-1]
    prv = [-1] + list(range(len(segs) - 1))
    version = [0] * len(segs)
    alive = len(segs)

    def cost(i: int, j: int) -> int:  # a run outside any group joins a neighbour before two groups merge
        return (size[i] + size[j]) * (1 if key[i] == key[j] else 2 if TOP in (key[i][0], key[j][0]) else 4)

    heap = [(cost(i, i + 1), i, i + 1, 0, 0) for i in range(len(segs) - 1)]
    heapq.heapify(heap)
    while alive > room and heap:
        _, i, j, vi, vj = heapq.heappop(heap)
        if version[i] != vi or version[j] != vj or nxt[i] != j:
            continue  # a pair that has changed since
        segs[i] += segs[j]
        size[i] += size[j]
        key[i] = key[i] if key[i] == key[j] else (None, None)
        version[i] += 1
        version[j] = -1
        nxt[i] = nxt[j]
        if nxt[j] >= 0:
            prv[nxt[j]] = i
        alive -= 1
        for a, b in ((prv[i], i), (i, nxt[i])):
            if a >= 0 and b >= 0:
                heapq.heappush(heap, (cost(a, b), a, b, version[a], version[b]))
    merged: list[Group] = []
    at = 0
    while at >= 0:
        run = segs[at]
        if len(run) == 1:
            merged.append(run[0])
        else:
            label, place = _merged_label(run, reps)
            merged.append(Group(id="g_" + _ident(label), label=label, place=place, phase=run[0].phase if len({g.phase for g in run}) == 1 else None,
                                order=min(g.order for g in run), kernels=[k for g in run for k in g.kernels], by=run[0].by, expanded=False,
                                members=[g.label for g in run]))
        at = nxt[at]
    example = next((g.label for g in merged if g.members), merged[0].label)
    note = (f"{len(collapsed)} groups drawn as {len(merged)} nodes to fit --max-nodes: neighbours merged "
            f"(e.g. {example}); raise --max-nodes to see each")
    return merged, [note]
