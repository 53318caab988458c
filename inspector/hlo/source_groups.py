"""Structure from the source when the program has no named scopes: the Python stack jax records
for each op says which function and line made a kernel, and a Python loop over layers runs the
same lines again and again, so the schedule repeats them: the i-th repetition is layer i.

The stacks form a tree (outermost call first). From the top, a call whose kernels all repeat N
times is a loop (its N repetitions become N places); a call whose kernels run once is one place,
and neighbouring calls of one function that run once share it, named by their line range. Each
phase (forward, backward, outside autodiff) is split on its own; the backward runs the layers in
reverse, so its first repetition is the last layer."""
from __future__ import annotations

import dataclasses
from collections import Counter

from .module import Frame

LOOP_SHARE = 0.75  # of a call's kernels whose count is a multiple of N: a loop run N times
NEAR = 0.05  # counts explaining this much less than the best one are a loop inside the loop
MIN_PER_REPETITION = 3  # fewer kernels per repetition (a tree.map over parameters): one place, not N
SPLIT_LARGE = 64  # a call run once with more kernels than this splits into its calls when it can


@dataclasses.dataclass(frozen=True)
class SourcePlace:
    """Where a kernel comes from in the source: a function's line range, and for a loop's body
    which repetition (0-based, in the order the loop runs) of how many."""

    file: str
    lines: tuple[int, int]
    function: str
    repetition: int | None = None
    repetitions: int | None = None  # N of a loop, or the times a small repeated call runs (x292)
    site: str | None = None  # where the loop (or call) is: file:line function

    @property
    def where(self) -> str:
        lo, hi = self.lines
        return f"{self.file.rsplit('/', 1)[-1]}:{lo}" + (f"-{hi}" if hi != lo else "") + f" {self.function}"

    @property
    def key(self) -> tuple:
        return (self.file, self.lines, self.function, self.site)


def clean_stack(stack: tuple[Frame, ...], start: int = 0) -> tuple[Frame, ...]:
    """The stack up to the first frame from `start` on that it holds twice: jax appends the stack
    of the first trace of a cached rule (a custom_jvp's division, say) to the op's own, which
    would name another layer. Frames before `start` (the caller's: pytest's recursion) may repeat."""
    for i in range(start, len(stack)):
        if stack[i] in stack[:i]:
            return stack[:i]
    return stack


def _common_prefix(paths: list[tuple[Frame, ...]]) -> int:
    if not paths:
        return 0
    first = paths[0]
    n = min(len(p) for p in paths)
    i = 0
    while i < n and all(p[i] == first[i] for p in paths):
        i += 1
    return i


def _loop_count(members: list[str], count: dict[str, int]) -> int:
    """N >= 2 when most of these kernels occur a multiple of N times in their phase; else 1. Of
    the counts that explain nearly as many kernels as the best, the largest: a loop over 4 heads
    inside a loop over 24 layers is 24 (every count a multiple), not 96 (the heads' share)."""
    counts = Counter(count[m] for m in members)
    share = {n: sum(v for c, v in counts.items() if c % n == 0) / len(members) for n in counts if n >= 2}
    best = max(share.values(), default=0.0)
    fits = [n for n, s in share.items() if s >= LOOP_SHARE and s >= best - NEAR]
    return max(fits, default=1)


class _Splitter:
    """One phase's kernels (schedule order) split into places."""

    def __init__(self, names: list[str], paths: dict[str, tuple[Frame, ...]], sig: dict[str, tuple], backward: bool):
        self.names, self.paths, self.backward = names, paths, backward
        self.index = {n: i for i, n in enumerate(names)}
        tally = Counter(sig[n] for n in names)
        self.sig = sig
        self.count = {n: tally[sig[n]] for n in names}
        self.place: dict[str, SourcePlace] = {}

    def run(self) -> dict[str, SourcePlace]:
        self._split(self.names, 0)
        return self.place

    def _children(self, members: list[str], depth: int) -> tuple[list[str], dict[Frame, list[str]]]:
        own: list[str] = []
        children: dict[Frame, list[str]] = {}
        for m in members:
            p = self.paths[m]
            if len(p) > depth:
                children.setdefault(p[depth], []).append(m)
            else:
                own.append(m)
        return own, children

    def _split(self, members: list[str], depth: int) -> None:
        own, children = self._children(members, depth)
        if not children:
            self._plain(members, depth)
            return
        if len(children) == 1 and not own:  # a call that only calls: look inside
            self._split(members, depth + 1)
            return
        loops: dict[int, list[Frame]] = {}
        plain: list[Frame] = []
        for frame, kids in children.items():
            kind, n = self._kind(kids, depth + 1)
            if kind == "loop":
                loops.setdefault(n, []).append(frame)
            elif kind == "plain":
                plain.append(frame)
            else:
                self._split(kids, depth + 1)  # the loop is further in
        for n, frames in loops.items():
            for group in self._interleaved(frames, children):
                members = [m for f in group for m in children[f]]
                calls = any(len(self.paths[m]) > depth + 1 for m in members)
                if (calls or len(group) > 1) and len(members) >= MIN_PER_REPETITION * n:
                    self._loop(members, group, depth, n)
                else:  # one line's own ops repeating (take_along_axis), or a small call repeated: one place
                    plain += group
        self._plain_runs(own, plain, children, depth)

    def _kind(self, members: list[str], depth: int) -> tuple[str, int]:
        """("loop", N) for a call whose kernels all repeat N times, ("mixed", 1) for one that runs
        once around a loop further in, ("plain", 1) otherwise. `depth`: the members' calls."""
        n = _loop_count(members, self.count)
        if n >= 2 and self._alternations(members) < 2 * n:
            n = 1  # one line's ops repeated side by side (a reduction's backward), not a loop's body
        own, inner = self._children(members, depth)
        parts = list(inner.values()) + ([own] if own else [])
        if n >= 2 and all(self._repeats(part, n) for part in parts):  # a call in it that runs once: the loop is further in
            return "loop", n  # (enough kernels per repetition is judged with its siblings in the loop)
        if any(self._kind(k, depth + 1)[0] != "plain" for k in inner.values()):
            return "mixed", 1
        return "plain", 1

    def _repeats(self, members: list[str], n: int) -> bool:
        return sum(1 for m in members if self.count[m] % n == 0) >= LOOP_SHARE * len(members)

    def _alternations(self, members: list[str]) -> int:
        """Runs of equal signatures in schedule order: a loop's body of two or more kernels,
        run N times, makes at least 2N."""
        runs, last = 0, None
        for m in sorted(members, key=self.index.__getitem__):
            runs += self.sig[m] != last
            last = self.sig[m]
        return runs

    def _span(self, members: list[str]) -> tuple[int, int]:
        idx = [self.index[m] for m in members]
        return min(idx), max(idx)

    def _interleaved(self, frames: list[Frame], children: dict[Frame, list[str]]) -> list[list[Frame]]:
        """Sibling loop calls whose kernels overlap in the schedule: one loop with two lines in its body."""
        spans = sorted((self._span(children[f]), f) for f in frames)
        groups: list[list[Frame]] = []
        end = -1
        for (lo, hi), f in spans:
            if groups and lo <= end:
                groups[-1].append(f)
                end = max(end, hi)
            else:
                groups.append([f])
                end = hi
        return groups

    def _loop(self, members: list[str], frames: list[Frame], depth: int, n: int) -> None:
        members = sorted(members, key=self.index.__getitem__)
        site = frames[0]
        inner = {self.paths[m][depth + 1] for m in members if len(self.paths[m]) > depth + 1}
        if len(frames) == 1 and len({f.function for f in inner}) == 1:  # a loop calling one function: its lines
            f0 = next(iter(inner))
            lines = [f.line for f in inner if f.file == f0.file]
            where = (f0.file, (min(lines), max(lines)), f0.function)
        else:
            lines = [f.line for f in frames]
            where = (site.file, (min(lines), max(lines)), site.function)
        seen: Counter = Counter()
        rep: dict[str, int] = {}
        for m in members:
            c = self.count[m]
            if c % n == 0:
                r = seen[self.sig[m]] // (c // n)
                seen[self.sig[m]] += 1
                rep[m] = n - 1 - r if self.backward else r
        last = None
        pending: list[str] = []
        for m in members:  # the odd ones (fused across a layer's edge): with the kernel before them
            if m in rep:
                last = rep[m]
                for p in pending:
                    rep[p] = last
                pending = []
            elif last is not None:
                rep[m] = last
            else:
                pending.append(m)
        for p in pending:
            rep[p] = 0
        loop_site = f"{site.file}:{site.line} {site.function}"
        for m in members:
            self.place[m] = SourcePlace(*where, repetition=rep[m], repetitions=n, site=loop_site)

    def _plain_runs(self, own: list[str], plain: list[Frame], children: dict[Frame, list[str]], depth: int) -> None:
        """Calls run once, and the node's own lines: neighbours in the schedule (nothing of a loop
        between them) share one place named by their line range."""
        members = own + [m for f in plain for m in children[f]]
        if not members:
            return
        if len(members) > SPLIT_LARGE and len(plain) > 1:  # too big for one place: each call its own
            for f in plain:
                if len(children[f]) > SPLIT_LARGE and self._children(children[f], depth + 1)[1]:
                    self._split(children[f], depth + 1)
                else:
                    self._plain(children[f], depth)
            if own:
                self._plain(own, depth - 1 if depth else 0)
            return
        placed = set(self.place)
        members.sort(key=self.index.__getitem__)
        runs: list[list[str]] = [[members[0]]]
        for a, b in zip(members, members[1:]):
            between = self.names[self.index[a] + 1:self.index[b]]
            if any(x in placed and self.place[x].repetitions and self.place[x].repetition is not None for x in between):
                runs.append([b])
            else:
                runs[-1].append(b)
        for run in runs:
            self._plain(run, depth)

    def _plain(self, members: list[str], depth: int) -> None:
        """One place: the lines of the frame at `depth` (the calls it makes, or its own ops)."""
        frames = [self.paths[m][depth] if len(self.paths[m]) > depth else (self.paths[m][-1] if self.paths[m] else None)
                  for m in members]
        found = [f for f in frames if f is not None]
        if not found:
            return
        first = found[0]
        lines = [f.line for f in found if f.file == first.file and f.function == first.function] or [first.line]
        n = _loop_count(members, self.count)
        paths = {self.paths[m] for m in members}
        path = next(iter(paths))
        called = len(paths) == 1 and len(path) >= 2 and path[-1].function != path[-2].function
        repeated = n if n >= 8 and called else None  # one function called again and again: a tree.map over the parameters
        for m in members:
            self.place[m] = SourcePlace(first.file, (min(lines), max(lines)), first.function, None, repeated)


def source_places(names: list[str], stacks: dict[str, tuple[Frame, ...]], phases: dict[str, str | None],
                  opcodes: dict[str, str]) -> dict[str, SourcePlace]:
    """The place of every kernel with a stack (`names` in schedule order). Frames every kernel
    shares (the caller of the function, the function's own call of value_and_grad) say nothing."""
    stacks = {n: stacks[n] for n in names if stacks.get(n)}
    cut = _common_prefix(list(stacks.values()))
    paths = {n: clean_stack(s, cut)[cut:] for n, s in stacks.items()}
    sig = {n: (p, opcodes.get(n)) for n, p in paths.items()}
    places: dict[str, SourcePlace] = {}
    for phase in dict.fromkeys(phases.get(n) for n in names):
        members = [n for n in names if n in paths and phases.get(n) == phase]
        if members:
            places.update(_Splitter(members, paths, sig, phase == "backward").run())
    return places
