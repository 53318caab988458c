"""The groups a program's kernels fall into, one grouping for every view (the graph, the fusions
table's group column, `compare`'s pairing): by named scope where the program has scopes that
give it structure (layer3 forward), else by source (gpt2.py:34-35 block #7 backward: the 8th
run of a loop's body, its backward). Built once by `analyse_fusions`."""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

from .graph_groups import TOP, group_keys, phase_of, scope_matches, scope_structure, settle
from .kernel import Kernel
from .module import Frame
from .source_groups import SourcePlace, source_places


@dataclasses.dataclass(kw_only=True)
class KernelGroup:
    """Kernels that belong together: a scope's kernels of one phase, or one stretch of source
    lines (a loop body's i-th repetition) of one phase."""

    id: str  # an identifier (the graph's node id when collapsed)
    label: str  # unique: layer3 forward, gpt2.py:34-35 block #7 backward
    place: str  # what its repetitions share: the scope (layer3) or the lines (gpt2.py:34-35 block)
    phase: str | None  # forward | backward | None (outside autodiff)
    order: int  # schedule index of its first kernel of its own
    kernels: list[str]  # names, in schedule order
    by: str = "scope"  # scope | source
    repetition: int | None = None  # a loop body's i-th run (0: the first layer), by source
    repetitions: int | None = None  # how many times the loop runs (or a small call repeats: x291)
    site: str | None = None  # the loop's line: file:line function


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)  # no ':' in ids: graphviz reads node:port


def _unique(groups: list[KernelGroup]) -> None:
    """Two runs of one place get (2), (3) ... after the first, in schedule order."""
    seen: Counter = Counter()
    ids: set[str] = set()
    for g in groups:
        seen[g.label] += 1
        if seen[g.label] > 1:
            g.label = f"{g.label} ({seen[g.label]})"
        while g.id in ids:
            g.id += "_"
        ids.add(g.id)


def _scope_groups(kernels: list[Kernel]) -> list[KernelGroup]:
    key, by_name = group_keys(kernels)
    groups: dict[tuple, KernelGroup] = {}
    for i, k in enumerate(kernels):
        scope, phase = key[k.name]
        g = groups.get((scope, phase))
        if g is None:
            ident = scope.replace(TOP, "top") + ("_" + phase if phase else "")
            place = TOP if scope.startswith(TOP) else scope
            g = groups[(scope, phase)] = KernelGroup(id="g_" + _ident(ident), label="", place=place, phase=phase, order=i, kernels=[])
        g.kernels.append(k.name)
    index = {k.name: i for i, k in enumerate(kernels)}
    for g in groups.values():  # placed by its first kernel of its own: copies XLA starts early for it do not move it
        own = [x for x in g.kernels if by_name[x].op_name]
        g.order = index[own[0]] if own else g.order
        if g.place == TOP:  # a run outside any scope: named by its phase when it has one
            phases = {phase_of(by_name[x]) for x in own}
            g.phase = phases.pop() if len(phases) == 1 else None
        g.label = g.place if g.phase is None else f"{g.place} {g.phase}"
    return sorted(groups.values(), key=lambda g: g.order)


def _source_label(place: SourcePlace, phase: str | None) -> str:
    rep = f" #{place.repetition}" if place.repetition is not None else f" x{place.repetitions}" if place.repetitions else ""
    return place.where + rep + (f" {phase}" if phase else "")


def _longest_stretches(names: list[str], key: dict[str, tuple]) -> dict[tuple, tuple[int, int]]:
    """Each group's longest unbroken stretch of the schedule, (first, last) index: where it is
    placed, though XLA starts a copy for it early or delays a weight gradient to the end."""
    best: dict[tuple, tuple[int, int]] = {}
    start = 0
    for i in range(1, len(names) + 1):
        if i == len(names) or key[names[i]] != key[names[start]]:
            k = key[names[start]]
            if k not in best or i - 1 - start > best[k][1] - best[k][0]:
                best[k] = (start, i - 1)
            start = i
    return best


def _join_runs(names: list[str], key: dict[str, tuple]) -> dict[str, tuple]:
    """Runs of one loose place (parameter updates) that only other groups' stragglers part (the
    weight gradients XLA delays to the end of a step, each a layer's) join into one run."""
    main = _longest_stretches(names, key)
    runs: dict[object, list[tuple]] = {}
    for k in dict.fromkeys(key[n] for n in names):
        if k is not None and isinstance(k[1], tuple):
            runs.setdefault(k[0], []).append(k)
    index = {n: i for i, n in enumerate(names)}
    span: dict[tuple, list[int]] = {}
    for n in names:
        span.setdefault(key[n], []).append(index[n])
    rename: dict[tuple, tuple] = {}
    for place_runs in runs.values():
        head = place_runs[0]
        for k in place_runs[1:]:
            gap = names[max(span[head]) + 1:min(span[k])] if max(span[head]) < min(span[k]) else []
            strays = all(not main[key[x]][0] <= index[x] <= main[key[x]][1] for x in gap)
            if gap and strays or not gap:
                rename[k] = head
                span[head] = span[head] + span[k]
            else:
                head = k
    return {n: rename.get(k, k) for n, k in key.items()}


def _source_groups(kernels: list[Kernel], stacks: dict[str, tuple[Frame, ...]]) -> list[KernelGroup]:
    names = [k.name for k in kernels]
    phases = {k.name: phase_of(k) for k in kernels}
    places = source_places(names, stacks, phases, {k.name: k.opcode for k in kernels})
    key = {n: (p.key, p.repetition, phases[n]) if (p := places.get(n)) else None for n in names}
    autodiff = any(phases.values())
    loose = {n for n in places if phases[n] is None} if autodiff else set()  # a parameter update: beside its layer
    final = settle(kernels, key, loose, lambda k, run: (k[0] if k else None, ("run", run), None), loose_between=True)
    final = _join_runs(names, final)
    groups: dict[tuple, KernelGroup] = {}
    own: dict[tuple, list[str]] = {}
    for i, n in enumerate(names):
        g = groups.get(final[n])
        if g is None:
            g = groups[final[n]] = KernelGroup(id="", label="", place="", phase=None, order=i, kernels=[], by="source")
        g.kernels.append(n)
        if n in places:
            own.setdefault(final[n], []).append(n)
    index = {n: i for i, n in enumerate(names)}
    main = _longest_stretches(names, final)
    for gkey, g in groups.items():
        mine = own.get(gkey, [])
        if mine:
            g.order = next((index[n] for n in mine if index[n] >= main[gkey][0]), index[mine[0]])
            place = Counter(places[n] for n in mine).most_common(1)[0][0]
            looped = gkey[1] is not None and not isinstance(gkey[1], tuple)
            found = {phases[n] for n in mine if final[n] == key[n]}  # its own, not the loose ones that joined it
            g.phase = gkey[2] if looped or gkey[1] is None else (found.pop() if len(found) == 1 else None)
            g.place, g.repetition, g.repetitions, g.site = place.where, place.repetition, place.repetitions, place.site
            g.label = _source_label(place, g.phase)
        else:
            g.place = g.label = TOP
        g.id = "g_" + _ident(g.label)
    return sorted(groups.values(), key=lambda g: g.order)


def group_kernels(kernels: list[Kernel], stacks: dict[str, tuple[Frame, ...]] | None = None) -> list[KernelGroup]:
    """Every kernel in exactly one group, the groups in schedule order (of their first own kernel).
    `stacks`: each kernel's Python stack (outermost first), for programs without useful scopes."""
    if not kernels:
        return []
    scopes = scope_structure(kernels)
    groups = None
    if scopes < 2 and any((stacks or {}).values()):  # one scope or none: the source may say more (a loop)
        by_source = _source_groups(kernels, stacks or {})
        if not scopes or any(g.repetition is not None for g in by_source):
            groups = by_source
    if groups is None:
        groups = _scope_groups(kernels)
    _unique(groups)
    return groups


def group_matches(group: KernelGroup, asked: str) -> bool:
    """--expand NAME: a scope opens by its name (layer3, never layer30); a source group by a run of
    the words of its label (`block #7` opens its forward and backward, `#7 backward` one of them)."""
    if group.by == "scope":
        return group.place != TOP and scope_matches(group.place, asked)
    words, label = asked.lower().split(), group.label.lower().split()
    return bool(words) and any(label[i:i + len(words)] == words for i in range(len(label) - len(words) + 1))


def summary(groups: list[KernelGroup], limit: int = 12) -> str:
    """The program's groups in a few words: its scopes (layer0, layer1, ...), or its source
    places with the loops counted (gpt2.py:34-35 block (forward) x24, ...)."""
    seen: dict[tuple, int] = {}
    for g in groups:
        if g.place == TOP:
            continue
        k = (g.place, None, False) if g.by == "scope" else (g.place, g.phase, g.repetition is not None)
        seen[k] = seen.get(k, 0) + 1
    parts = [f"{place} ({phase}) x{n}" if looped and phase else f"{place} x{n}" if looped
             else f"{place} {phase}" if phase else place for (place, phase, looped), n in seen.items()]
    return ", ".join(parts[:limit]) + (f" (+{len(parts) - limit} more)" if len(parts) > limit else "")
