"""Which group each kernel belongs to, by op_name scope: its top-level scope (a layer) and phase
(forward: jvp, backward: transpose), with the kernels XLA made without an op_name and those
outside any scope placed beside the kernels they run with (`settle`, which the grouping by
source uses too). `kernel_groups` builds the groups on it."""
from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import cast

from .kernel import Kernel

TOP = "<top>"  # kernels outside any named scope
_WRAPPER = re.compile(r"^(?:jvp|transpose|vmap|remat|checkpoint|pjit|jit|custom_jvp_call|custom_vjp_call)\((.*)\)$")


def scope_of(kernel: Kernel) -> str:
    """The user's scope of a kernel: the op_name path without the outer jit and transform
    wrappers, e.g. jit(train_step)/transpose(jvp(layer3))/dot_general -> layer3."""
    if not kernel.scope:
        return TOP
    parts = kernel.scope.split(";", 1)[0].split("/")[1:]  # XLA joins merged op_names with ';'; drop the outer jit(f)
    cleaned = []
    for part in parts:
        while (m := _WRAPPER.match(part)):
            part = m[1]
        if part:
            cleaned.append(part)
    return "/".join(cleaned) or TOP


def scope_matches(scope: str, asked: str) -> bool:
    """--expand layer3 opens layer3 (and layer3/attn opens it too), never layer30."""
    return scope == asked or scope.startswith(asked + "/") or asked.startswith(scope + "/")


def phase_of(kernel: Kernel) -> str | None:
    """'backward' for kernels of a transpose (the gradient), 'forward' for those of a jvp, None
    outside autodiff."""
    name = (kernel.op_name or "").split(";", 1)[0]
    if "transpose(" in name:
        return "backward"
    if "jvp(" in name:
        return "forward"
    return None


def _level(kernels: list[Kernel]) -> int:
    """How many leading scope names every scoped kernel shares (`model/` around all the layers):
    those say nothing, so groups are made one level in."""
    paths = [scope_of(k).split("/") for k in kernels if k.op_name is not None and scope_of(k) != TOP]
    level = 0
    while paths and all(len(p) > level + 1 for p in paths) and len({p[level] for p in paths}) == 1:
        level += 1
    return level


def scope_keys(kernels: list[Kernel]) -> dict[str, tuple[str, str | None] | None]:
    """Each named kernel's (scope, phase): the first scope name that tells the kernels apart; None
    for those XLA made without an op_name."""
    level = _level(kernels)

    def scope(k: Kernel) -> str:
        path = scope_of(k)
        return TOP if path == TOP else "/".join(path.split("/")[:level + 1])
    return {k.name: (scope(k), phase_of(k)) if k.op_name is not None else None for k in kernels}


_MADE_BY_JAX = re.compile(r"^(?:p?jit\(.*\)|while|cond|body|scan|checkpoint|remat\d*|custom_[jv]jp_call.*|shard_map|.*->.*|.*,.*)$")
_AUTODIFF = re.compile(r"^(?:jvp|transpose|vmap)\((.*)\)$")


def users_scope(kernel: Kernel) -> bool:
    """Whether the kernel's outer scope is one the user named (jax.named_scope: `jvp(layer3)`),
    not one jax made: a jitted jnp function's name (`jit(take_along_axis)`), a loop's `while`
    and `body`, an einsum's spec (`btc,vc->btv`)."""
    for part in (kernel.op_name or "").split(";", 1)[0].split("/")[1:-1]:
        while (m := _AUTODIFF.match(part)):
            part = m[1]
        if part:
            return not _MADE_BY_JAX.match(part)
    return False


def scope_structure(kernels: list[Kernel]) -> int:
    """How many scopes the program's grouping by scope would have, 0 when they do not structure
    it: none the user named (only jax's: jitted jnp functions, loops), scopes around a small part
    of the named kernels, or scopes that repeat in every layer (attn, mlp: each scope's kernels
    of one phase in many runs). Such programs are grouped by their source instead."""
    key = {n: k for n, k in scope_keys(kernels).items() if k is not None}
    named = {k.name for k in kernels if users_scope(k)}
    scoped = [n for n, k in key.items() if k[0] != TOP and n in named]
    counted = [n for n, k in key.items() if k[1] is not None] or list(key)  # the optimizer's update joins the layers anyway
    if not scoped or sum(1 for n in counted if n in named) < 0.5 * len(counted):
        return 0
    runs, last, mine = 0, None, set(scoped)
    for k in kernels:
        if k.name in mine:
            runs += key[k.name] != last
            last = key[k.name]
    keys = len({key[n] for n in scoped})
    return len({key[n][0] for n in scoped}) if runs <= 3 * keys else 0


def settle(kernels: list[Kernel], key: dict[str, tuple | None], loose: set[str], run_key,
           apart: set[str] | None = None, loose_between: bool = False) -> dict[str, tuple]:
    """Each kernel's final group key, from `key` (None: a kernel with nothing of its own to go
    by). Such kernels (async copies and slices XLA made without an op_name) join the group of a
    kernel they run beside: their reader's when nothing of another group runs between them, else
    their producer's when that one is beside them (an activation copied out during the forward,
    read back in the backward, belongs to the forward), else their reader's. `loose` kernels
    (outside any scope, or outside autodiff: a parameter update) join the group they read most
    from when they run beside it. What is left of them (and of `apart`: every unscoped kernel)
    splits into runs between the other groups, so one group does not span the whole step:
    `run_key(key, n)` names the n-th run. `loose_between`: other loose kernels between one and
    the group it reads from do not part them (a TPU step interleaves every layer's updates)."""
    key = dict(key)
    named = {k.name for k in kernels if key.get(k.name) is not None}
    beside = _stretches(kernels, key, named, set())
    borrowed = _borrowed(kernels, key, named, beside)
    beside_loose = _stretches(kernels, key, named, loose) if loose_between else beside
    joined = _join_loose(kernels, key, loose, set(borrowed), apart or set(), beside_loose)
    run, last_loose = 0, None
    for k in kernels:  # one group per run of loose kernels
        if k.name in borrowed:
            continue  # takes the group of the kernel it joins, below
        is_loose = (k.name in (loose | (apart or set())) and k.name not in joined) or k.name not in named  # (or nothing to go by)
        if is_loose:
            if last_loose is False:
                run += 1
            key[k.name] = run_key(key.get(k.name), run)
        last_loose = is_loose
    for name, anchor in borrowed.items():
        key[name] = key[anchor]
    return cast("dict[str, tuple]", key)  # every kernel keyed now


Beside = Callable[[int, int, tuple], bool]


def _stretches(kernels: list[Kernel], key: dict[str, tuple | None], named: set[str], skip: set[str]) -> Beside:
    """beside(i, j, group): nothing keyed (but `skip`) of a group other than `group` runs
    strictly between schedule indices i and j. A run is a stretch of the schedule where one
    group's keyed kernels follow each other. (It reads `key` as it is when asked: settle keys
    loose kernels as it goes.)"""
    at = [i for i, k in enumerate(kernels) if k.name in named and k.name not in skip]
    run_of, run = {}, -1
    for j, i in enumerate(at):
        if j == 0 or key[kernels[i].name] != key[kernels[at[j - 1]].name]:
            run += 1
        run_of[i] = run

    def beside(i: int, j: int, group: tuple) -> bool:
        lo, hi = min(i, j), max(i, j)
        a, b = bisect.bisect_right(at, lo), bisect.bisect_left(at, hi) - 1
        if a > b:
            return True
        return run_of[at[a]] == run_of[at[b]] and key[kernels[at[a]].name] == group
    return beside


def _borrowed(kernels: list[Kernel], key: dict[str, tuple | None], named: set[str], beside: Beside) -> dict[str, str]:
    """Unkeyed kernel -> the keyed kernel whose group it joins: the keyed kernel it leads to (its
    first keyed reader, through unkeyed ones) when beside it, else the one it comes from when
    beside that, else either."""
    by_name = {k.name: k for k in kernels}
    index = {k.name: i for i, k in enumerate(kernels)}
    readers: dict[str, list[str]] = {}
    for k in kernels:
        for t in k.inputs:
            readers.setdefault(t.producer, []).append(k.name)
    ahead: dict[str, str | None] = {}
    for k in reversed(kernels):  # readers come later in the schedule
        found = [r if r in named else ahead.get(r) for r in readers.get(k.name, [])]
        ahead[k.name] = min((r for r in found if r), key=index.__getitem__, default=None)
    behind: dict[str, str | None] = {}
    for k in kernels:
        src = next((t.producer for t in sorted(k.inputs, key=lambda t: -t.bytes) if t.producer in by_name), None)
        behind[k.name] = None if src is None else src if src in named else behind.get(src)
    borrowed: dict[str, str] = {}
    for k in kernels:
        if k.name in named:
            continue
        i, r, p = index[k.name], ahead[k.name], behind[k.name]
        if r is not None and beside(i, index[r], cast(tuple, key[r])):
            borrowed[k.name] = r
        elif p is not None and beside(i, index[p], cast(tuple, key[p])):
            borrowed[k.name] = p
        elif r is not None or p is not None:
            borrowed[k.name] = cast(str, r or p)  # one of them is a name
    return borrowed


def _join_loose(kernels: list[Kernel], key: dict[str, tuple | None], loose: set[str], borrowed: set[str],
                apart: set[str], beside: Beside) -> set[str]:
    """Loose kernels (but those `borrowed` already placed) keyed, in `key`, with the group they
    read most from, when they run beside it; the names of those that joined."""
    index = {k.name: i for i, k in enumerate(kernels)}
    joined = set()
    for k in kernels:
        if k.name not in loose or k.name in borrowed:
            continue
        sizes: dict[tuple, int] = {}
        last: dict[tuple, int] = {}
        for t in k.inputs:
            group = key.get(t.producer)
            if group is not None and t.producer not in loose and t.producer not in apart:
                sizes[group] = sizes.get(group, 0) + t.bytes
                last[group] = max(last.get(group, -1), index[t.producer])
        if sizes:
            best = max(sizes, key=sizes.__getitem__)
            if beside(index[k.name], last[best], best):
                key[k.name] = best
                joined.add(k.name)
    return joined


def group_keys(kernels: list[Kernel]) -> tuple[dict[str, tuple[str, str | None]], dict[str, Kernel]]:
    """Each kernel's (top-level scope, phase), unnamed and unscoped kernels settled beside the
    kernels they run with (`settle`); the runs outside any scope are <top>, <top>1, ..."""
    key = scope_keys(kernels)
    loose = {n for n, k in key.items() if k == (TOP, None)}  # outside autodiff and any scope: a parameter update
    unscoped = {n for n, k in key.items() if k is not None and k[0] == TOP}
    run_key = lambda _, run: (TOP if run == 0 else f"{TOP}{run}", None)
    return settle(kernels, key, loose, run_key, unscoped), {k.name: k for k in kernels}
