"""The node budget of the kernel graph, held on any program: which groups open (--expand, as many
as fit), and collapsed groups past the budget merged with their neighbours in schedule order (a
loop's repetitions among themselves first: `block #0-3 forward`). Each simplification is said
in a note, naming the program's own groups."""
from __future__ import annotations

import dataclasses
import math
import re

from .kernel_groups import KernelGroup, group_matches


@dataclasses.dataclass
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
        return cls(g.id, g.label, g.place, g.phase, g.order, kernels, g.by)


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
    loop's repetitions of one phase, else the first and last labels."""
    first, last = members[0], members[-1]
    same = len({(g.place, g.phase) for g in members}) == 1
    if same and all(reps.get(g.id) is not None for g in members):
        lo, hi = min(reps[g.id] for g in members), max(reps[g.id] for g in members)  # type: ignore[type-var]
        return f"{first.place} #{lo}-{hi}" + (f" {first.phase}" if first.phase else ""), first.place
    if same:
        return f"{first.label} ({len(members)} parts)", first.place
    return f"{first.label} .. {last.label} ({len(members)} groups)", first.place


def _split(run: list[Group], parts: int) -> list[list[Group]]:
    size = math.ceil(len(run) / parts)
    return [run[i:i + size] for i in range(0, len(run), size)]


def coarsen(collapsed: list[Group], room: int, reps: dict[str, int | None]) -> tuple[list[Group], list[str]]:
    """Collapsed groups in at most `room` nodes: neighbours in schedule order merged. Runs of one
    place and phase (a loop's repetitions) merge among themselves when there is room for one node
    per run at least, each run getting nodes in proportion to its length; else any neighbours
    merge. Returns the groups and a note when some were merged."""
    if len(collapsed) <= room or not collapsed:
        return collapsed, []
    room = max(1, room)
    ordered = sorted(collapsed, key=lambda g: g.order)
    runs: list[list[Group]] = []
    for g in ordered:
        if runs and (runs[-1][-1].place, runs[-1][-1].phase) == (g.place, g.phase):
            runs[-1].append(g)
        else:
            runs.append([g])
    if len(runs) <= room:
        spare = room - len(runs)  # nodes beyond one per run, shared by the long runs
        extra = {i: math.floor(spare * (len(r) - 1) / max(1, len(ordered) - len(runs))) for i, r in enumerate(runs)}
        buckets = [b for i, r in enumerate(runs) for b in _split(r, 1 + extra[i])]
    else:
        buckets = _split(ordered, room)
    index = {g.id: i for i, g in enumerate(ordered)}
    merged = []
    for b in buckets:
        if len(b) == 1:
            merged.append(b[0])
            continue
        label, place = _merged_label(b, reps)
        kernels = [k for g in sorted(b, key=lambda g: index[g.id]) for k in g.kernels]
        merged.append(Group("g_" + _ident(label), label, place, b[0].phase if len({g.phase for g in b}) == 1 else None,
                            min(g.order for g in b), kernels, b[0].by, False, [g.label for g in b]))
    example = next((g.label for g in merged if g.members), merged[0].label)
    note = (f"{len(collapsed)} groups drawn as {len(merged)} nodes to fit --max-nodes: neighbours merged "
            f"(e.g. {example}); raise --max-nodes to see each")
    return merged, [note]
