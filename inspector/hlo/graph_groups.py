"""Which group each kernel of the graph belongs to: its top-level op_name scope (a layer) and
phase (forward: jvp, backward: transpose), with the kernels XLA made without an op_name and those
outside any scope placed beside the kernels they run with. `graph_model` builds the graph on it."""
from __future__ import annotations

import bisect
import re
from typing import cast

from .fusions import Kernel

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


def group_keys(kernels: list[Kernel]) -> tuple[dict[str, tuple[str, str | None]], dict[str, Kernel]]:
    """Each kernel's (top-level scope, phase). Kernels XLA made without an op_name (async copies
    and slices) join the group of a kernel they run beside: their reader's when nothing of
    another group runs between them, else their producer's when that one is beside them (an
    activation copied out during the forward, read back in the backward, belongs to the
    forward), else their reader's. Kernels outside any scope (a parameter update) join the scope
    they read most from when they run beside it. What is left outside splits into runs between
    the scoped groups, so one '<top>' does not span the whole step."""
    by_name = {k.name: k for k in kernels}
    index = {k.name: i for i, k in enumerate(kernels)}
    key = {k.name: (scope_of(k).split("/", 1)[0], phase_of(k)) for k in kernels}
    # named kernels only: a run is a stretch of the schedule where one group's named kernels follow each other
    named_at = [i for i, k in enumerate(kernels) if k.op_name is not None]
    run_of = {}  # schedule index of a named kernel -> its run
    run = -1
    for j, i in enumerate(named_at):
        if j == 0 or key[kernels[i].name] != key[kernels[named_at[j - 1]].name]:
            run += 1
        run_of[i] = run
    def beside(i: int, j: int, group: tuple) -> bool:
        """Nothing named of a group other than `group` runs strictly between schedule indices i and j."""
        lo, hi = min(i, j), max(i, j)
        a, b = bisect.bisect_right(named_at, lo), bisect.bisect_left(named_at, hi) - 1
        if a > b:
            return True
        return run_of[named_at[a]] == run_of[named_at[b]] and key[kernels[named_at[a]].name] == group

    readers: dict[str, list[str]] = {}
    for k in kernels:
        for t in k.inputs:
            readers.setdefault(t.producer, []).append(k.name)
    # the named kernel each unnamed one leads to (its first named reader, through unnamed ones) and comes from
    ahead: dict[str, str | None] = {}
    for k in reversed(kernels):  # readers come later in the schedule
        found = [r if by_name[r].op_name is not None else ahead.get(r) for r in readers.get(k.name, [])]
        ahead[k.name] = min((r for r in found if r), key=index.__getitem__, default=None)
    behind: dict[str, str | None] = {}
    for k in kernels:
        src = next((t.producer for t in sorted(k.inputs, key=lambda t: -t.bytes) if t.producer in by_name), None)
        behind[k.name] = None if src is None else src if by_name[src].op_name is not None else behind.get(src)
    borrowed: dict[str, str] = {}  # unnamed kernel -> the named kernel whose group it joins
    for k in kernels:
        if k.op_name is not None:
            continue
        i, r, p = index[k.name], ahead[k.name], behind[k.name]
        if r is not None and beside(i, index[r], key[r]):
            borrowed[k.name] = r
        elif p is not None and beside(i, index[p], key[p]):
            borrowed[k.name] = p
        elif r is not None or p is not None:
            borrowed[k.name] = cast(str, r or p)  # one of them is a name
    for k in kernels:  # outside autodiff and any scope (a parameter update): with the scope it reads most from
        if key[k.name] == (TOP, None) and k.name not in borrowed:
            sizes: dict[tuple, int] = {}
            last: dict[tuple, int] = {}
            for t in k.inputs:
                if t.producer in key and key[t.producer][0] != TOP:
                    sizes[key[t.producer]] = sizes.get(key[t.producer], 0) + t.bytes
                    last[key[t.producer]] = max(last.get(key[t.producer], -1), index[t.producer])
            if sizes:
                best = max(sizes, key=sizes.__getitem__)
                if beside(index[k.name], last[best], best):
                    key[k.name] = best
    run, last_scope = 0, None
    for k in kernels:  # one group per run of unscoped kernels, whatever their phase
        if k.name in borrowed:
            continue  # takes the group of the kernel it joins, below
        scope, phase = key[k.name]
        if scope == TOP:
            if last_scope is not None and last_scope != TOP:
                run += 1
            key[k.name] = (TOP if run == 0 else f"{TOP}{run}", None)
        last_scope = scope

    for name, anchor in borrowed.items():
        key[name] = key[anchor]
    return key, by_name
