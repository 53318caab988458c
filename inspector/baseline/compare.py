"""What moved between two baselines (a saved one and the figures of now, or two saved ones):
per target, chip and kernel, each figure past its tolerance. Defaults: time 2% (libtpu's
simulation is exact, but a gate on every push should not fail on a rounding change of the
compiler), everything else exact. A floor compares as a floor (one that rises is a slowdown), a
range by both ends; a change of kind (estimate -> floor) is always reported."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..base.errors import UsageError
from .record import FIGURES, NUMERIC, PROGRAM, Baseline


@dataclasses.dataclass(frozen=True)
class Tolerance:
    relative: float = 0.0  # a share of the old figure: 0.02 is 2%
    absolute: float = 0.0  # in the figure's unit: bytes, flops, seconds, bundles

    def allows(self, before: float, after: float) -> bool:
        return abs(after - before) <= max(self.absolute, self.relative * abs(before))

    def describe(self) -> str:
        parts = ([f"{self.relative * 100:g}%"] if self.relative else []) + ([f"{self.absolute:g}"] if self.absolute else [])
        return " or ".join(parts) or "exact"


DEFAULT_TOLERANCES: dict[str, Tolerance] = {"time": Tolerance(relative=0.02)}
EXACT = Tolerance()


def parse_tolerances(texts: list[str], base: dict[str, Tolerance] | None = None,
                     option: str = "--tolerance") -> dict[str, Tolerance]:
    """``time=2%,hbm_bytes=0`` (repeatable): a figure's tolerance as a share (``N%``) or an amount in
    its unit (bytes, flops, seconds, bundles); ``0`` is exact. Over ``base`` (the defaults).
    ``option``: how the door spells it in an error (``--tolerance``; the Python API's ``tolerance``)."""
    example = f"{option} time=2%,hbm_bytes=0" if option.startswith("-") else f"{option}='time=2%,hbm_bytes=0'"
    found = dict(DEFAULT_TOLERANCES if base is None else base)
    figures = ", ".join(NUMERIC)
    for text in texts:
        for item in (t.strip() for t in text.split(",")):
            if not item:
                continue
            name, sep, value = item.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not value:
                raise UsageError(f"{option} {item!r}: give FIGURE=N% or FIGURE=N, e.g. {example}")
            if name not in FIGURES:
                raise UsageError(f"{option} {item!r}: no figure {name!r}; the figures with a tolerance: {figures}")
            if name not in NUMERIC:
                raise UsageError(f"{option} {item!r}: {name} is compared exactly; the figures with a tolerance: {figures}")
            share = value.endswith("%")
            try:
                number = float(value[:-1] if share else value)
            except ValueError:
                raise UsageError(f"{option} {item!r}: {value!r} is not a number: give a share (2%) or an amount in "
                                 f"the figure's unit, e.g. {example}") from None
            if not math.isfinite(number) or number < 0:
                raise UsageError(f"{option} {item!r}: give a share (2%) or an amount in the figure's unit (0 is exact), "
                                 "not negative")
            found[name] = Tolerance(relative=number / 100) if share else Tolerance(absolute=number)
    return found


def describe_tolerances(tolerances: dict[str, Tolerance]) -> str:
    loose = [f"{name} {t.describe()}" for name, t in sorted(tolerances.items()) if t != EXACT]
    return ", ".join(loose) + ("; the rest exact" if loose else "every figure exact")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    """One thing that moved. ``kernel``: the kernel's name without numbering, ``(program)`` for a
    figure of the whole program, ``-`` for the target itself; ``what``: worse | better | changed |
    new | removed | stopped | started."""

    target: str
    chip: str
    kernel: str
    source: str | None
    figure: str  # a key of FIGURES, or "target", "kernel", "chip"
    before: Any
    after: Any
    change: str  # in words: "+100.0%", "new kernel", "stopped compiling (compile-vmem-oom)"
    what: str


@dataclasses.dataclass(kw_only=True)
class Comparison:
    ok: bool
    changes: list[Change]
    tolerances: dict[str, Tolerance]
    before: dict  # the versions of each side
    after: dict
    before_path: str | None
    after_path: str | None
    targets: int = 0  # targets whose figures were compared on a chip (traced both times)
    chips: list[str] = dataclasses.field(default_factory=list)
    kernels: int = 0  # kernel x chip pairs compared
    notes: list[str] = dataclasses.field(default_factory=list)
    compiles: int = 0  # the compiles this run needed (a check), and how many the compile cache answered
    from_cache: int = 0
    refused: int = 0  # of the others, those libtpu refused (never cached)
    compiled: list[str] = dataclasses.field(default_factory=list)  # "target on chip" the compiler ran for

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["tolerances"] = {name: dataclasses.asdict(t) for name, t in self.tolerances.items()}
        return data


def _flag(figure: str, value: Any) -> str:
    if value is None:
        return "undecided" if figure == "vmem_fits" else "-"
    if figure == "compiled":
        return "compiles" if value else "refused"
    return ("fits" if value else "does not fit") if figure.endswith("fits") else str(value)


def _relative(before: float, after: float) -> str:
    if before == 0:
        return f"{after - before:+g}"
    return f"{(after - before) / abs(before):+.1%}"


def _time_change(before: dict, after: dict, tol: Tolerance) -> tuple[str, str] | None:
    """(words, worse|better|changed) when a time moved past ``tol``, else None."""
    kb, ka = before.get("kind"), after.get("kind")
    if kb != ka:
        return f"{kb} -> {ka}", "changed"
    low = not tol.allows(before["seconds"], after["seconds"])
    hb, ha = before.get("high_seconds"), after.get("high_seconds")
    high = (hb is None) != (ha is None) or (hb is not None and ha is not None and not tol.allows(hb, ha))
    if not (low or high):
        return None
    words = _relative(before["seconds"], after["seconds"])
    if ka == "floor":
        words += " (floor)"
    elif ka == "range" and hb is not None and ha is not None:
        words += f", top {_relative(hb, ha)}"
    up = after["seconds"] > before["seconds"] or (ha or 0) > (hb or 0)
    down = after["seconds"] < before["seconds"] or (ha or 0) < (hb or 0)
    return words, "worse" if up and not down else "better" if down and not up else "changed"


def figure_change(figure: str, before: Any, after: Any, tol: Tolerance) -> tuple[str, str] | None:
    """(words, worse|better|changed) when ``figure`` moved from ``before`` to ``after`` past ``tol``."""
    if before == after:
        return None
    unit = FIGURES[figure][0]
    if unit == "flag":
        worse = (before is True and after is not True) or (before is None and after is False)
        return f"{_flag(figure, before)} -> {_flag(figure, after)}", "worse" if worse else "better" if after is True else "changed"
    if unit == "text" or (unit != "codes" and (before is None or after is None)):
        if unit == "text":
            return f"{before or '-'} -> {after or '-'}", "changed"
        return ("no figure now" if after is None else "a figure now"), "changed"
    if unit == "codes":
        added, gone = sorted(set(after) - set(before)), sorted(set(before) - set(after))
        if not added and not gone:
            return None
        return " ".join([*(f"+{c}" for c in added), *(f"-{c}" for c in gone)]), "worse" if added and not gone else "changed"
    if unit == "time":
        return _time_change(before, after, tol)
    if tol.allows(float(before), float(after)):
        return None
    return _relative(float(before), float(after)), "worse" if after > before else "better"


def kernel_label(key: str) -> str:
    """A kernel's key as its column shows it: the name without numbering (and ``#N`` of a repeat)."""
    parts = key.split(" ")
    name = parts[1] if len(parts) > 1 else key
    return f"{name} {parts[-1]}" if len(parts) > 3 and parts[-1].startswith("#") else name


def _pair_kernels(before: dict[str, dict], after: dict[str, dict]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(pairs of keys, keys only before, keys only after): the same key first; then a kernel whose
    line moved (an edit above it) by its kind, name and file, where that names one kernel each side."""
    pairs = [(k, k) for k in before if k in after]
    gone = [k for k in before if k not in after]
    new = [k for k in after if k not in before]

    def loose(key: str, entry: dict) -> tuple:
        return entry.get("kind"), key.split(" ")[1] if " " in key else key, (entry.get("source") or "").rpartition(":")[0]

    by_before: dict[tuple, list[str]] = {}
    by_after: dict[tuple, list[str]] = {}
    for k in gone:
        by_before.setdefault(loose(k, before[k]), []).append(k)
    for k in new:
        by_after.setdefault(loose(k, after[k]), []).append(k)
    for group, keys in by_before.items():
        other = by_after.get(group, [])
        if len(keys) == 1 and len(other) == 1:
            pairs.append((keys[0], other[0]))
            gone.remove(keys[0])
            new.remove(other[0])
    return pairs, gone, new


_PROGRAM_ONLY = ("compiled", "error_kind", "vmem_fits", "compiler_fits", "hbm_device", "hbm_fits", "findings")


class _Collector:
    def __init__(self, tolerances: dict[str, Tolerance]):
        self.tolerances = tolerances
        self.changes: list[Change] = []
        self.kernels = 0

    def add(self, **kw) -> None:
        self.changes.append(Change(**kw))

    def figures(self, label: str, chip: str, kernel: str, source: str | None, before: dict, after: dict,
                skip: tuple[str, ...] = ()) -> None:
        for figure in FIGURES:
            if figure in skip or (figure not in before and figure not in after):
                continue
            moved = figure_change(figure, before.get(figure), after.get(figure), self.tolerances.get(figure, EXACT))
            if moved:
                self.add(target=label, chip=chip, kernel=kernel, source=source, figure=figure, before=before.get(figure),
                         after=after.get(figure), change=moved[0], what=moved[1])

    def chip(self, label: str, chip: str, before: dict, after: dict) -> None:
        base = dict(target=label, chip=chip, source=None)
        if "error" in before or "error" in after:
            if "error" in before and "error" not in after:
                self.add(**base, kernel="-", figure="chip", before=before["error"], after=None,
                         change="traces again for this chip", what="started")
            elif "error" in after and "error" not in before:
                self.add(**base, kernel="-", figure="chip", before=None, after=after["error"],
                         change=f"raises while tracing for this chip: {after['error']}", what="stopped")
            return
        pb, pa = before.get("program", {}), after.get("program", {})
        if pb.get("compiled") is not False and pa.get("compiled") is False:
            self.add(target=label, chip=chip, kernel=pa.get("error_kernel") or PROGRAM, source=pa.get("error_source"),
                     figure="compiled", before=True, after=False,
                     change=f"stopped compiling ({pa.get('error_kind') or 'compile error'})", what="stopped")
            self.figures(label, chip, PROGRAM, None, pb, pa, skip=("compiled", "error_kind", "compiler_fits", "compiler_vmem",
                                                                    "hbm_device", "hbm_fits", "hbm_bytes", "flops", "time"))
            return
        if pb.get("compiled") is False and pa.get("compiled") is not False:
            self.add(**base, kernel=PROGRAM, figure="compiled", before=False, after=True,
                     change=f"compiles again (was {pb.get('error_kind') or 'compile error'})", what="started")
            return
        start = len(self.changes)
        self.figures(label, chip, PROGRAM, None, pb, pa)
        program = self.changes[start:]
        del self.changes[start:]
        kb, ka = before.get("kernels", {}), after.get("kernels", {})
        pairs, gone, new = _pair_kernels(kb, ka)
        for old, now in pairs:
            self.kernels += 1
            entry = ka[now]
            self.figures(label, chip, kernel_label(now), entry.get("source"), kb[old], entry)
        for key in gone:
            self.add(**{**base, "source": kb[key].get("source")}, kernel=kernel_label(key), figure="kernel",
                     before=kb[key].get("name"), after=None, change="kernel removed", what="removed")
        for key in new:
            self.add(**{**base, "source": ka[key].get("source")}, kernel=kernel_label(key), figure="kernel",
                     before=None, after=ka[key].get("name"), change="new kernel", what="new")
        # the program's sums and peaks say again what a kernel's row says: kept where no kernel's does
        by_kernels = {c.figure for c in self.changes[start:]}
        self.changes[start:start] = [c for c in program if c.figure not in by_kernels or c.figure in _PROGRAM_ONLY]


def compare(before: Baseline, after: Baseline, tolerances: dict[str, Tolerance], *, covered: list[str] | None = None,
            chips: list[str] | None = None) -> Comparison:
    """``covered``: the files whose targets were all computed now (a baseline's target of one of
    them missing now was removed; one of another file was not asked for); None: every file.
    ``chips``: the chips compared (None: every chip either side has)."""
    out = _Collector(tolerances)
    chips = chips if chips is not None else list(dict.fromkeys([*before.chips, *after.chips]))
    compared = 0
    for label in list(dict.fromkeys([*before.targets, *after.targets])):
        b, a = before.targets.get(label), after.targets.get(label)
        base = dict(target=label, chip="-", kernel="-", source=None, figure="target")
        if a is None:
            if b is not None and (covered is None or b["spec"].rpartition(":")[0] in covered):  # the spec: a path may hold a space
                out.add(**base, before="recorded", after=None, change="target removed (not found now)", what="removed")
            continue
        if b is None:
            out.add(**base, before=None, after="computed", change="new target (not in the baseline)", what="new")
            continue
        if "error" in b or "error" in a:  # nothing compared: a target that raised both times is no pass of itself
            if "error" in a and "error" not in b:
                out.add(**base, before=None, after=a["error"], change=f"now fails: {a['error']}", what="stopped")
            elif "error" in b and "error" not in a:
                out.add(**base, before=b["error"], after=None, change="works again", what="started")
            continue
        both = False
        for chip in chips:
            cb, ca = b["chips"].get(chip), a["chips"].get(chip)
            if cb is None and ca is None:
                continue
            if cb is None or ca is None:
                out.add(target=label, chip=chip, kernel="-", source=None, figure="chip", before=None if cb is None else "recorded",
                        after=None if ca is None else "computed",
                        change="chip not in the first" if cb is None else "chip not in the second", what="changed")
                continue
            out.chip(label, chip, cb, ca)
            both = both or ("error" not in cb and "error" not in ca)
        compared += both
    notes = []
    moved = [k for k in ("jax", "jaxlib", "libtpu", "inspector") if before.versions.get(k) != after.versions.get(k)]
    if moved:
        notes.append("versions differ (" + ", ".join(f"{k} {before.versions.get(k)} -> {after.versions.get(k)}" for k in moved)
                     + "): figures may move with the compiler, not the code")
    return Comparison(ok=not out.changes, changes=out.changes, tolerances=tolerances, before=before.versions,
                      after=after.versions, before_path=before.path, after_path=after.path, targets=compared,
                      chips=chips, kernels=out.kernels, notes=notes)
