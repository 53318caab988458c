"""Human-readable figures, shared by every view and the graph so a number reads the same everywhere."""
from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{int(n)} B"


def fmt_bytes_range(low: float | None, high: float | None) -> str:
    """A figure known to lie between two bounds, one unit where both take it: "22.25-23.5 MiB";
    one figure where they meet."""
    if low is None or high is None or low == high:
        return fmt_bytes(high if high is not None else low)
    a, b = fmt_bytes(low), fmt_bytes(high)
    (x, unit_a), (y, unit_b) = a.split(" "), b.split(" ")
    return f"{x}-{y} {unit_b}" if unit_a == unit_b else f"{a}-{b}"


def fmt_count(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.2f}{unit}"
    return f"{x:.0f}"


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_estimate(seconds: float | None, kind: str | None = None, high: float | None = None) -> str:
    """A time as what it is: ``369 us`` (an estimate), ``>= 164 us`` (a floor: the time is at
    least that), ``161-387 us`` (a range)."""
    if seconds is None:
        return "-"
    if kind == "floor" or kind == "range" and high is None:  # a range without its top: its floor
        return ">= " + fmt_time(seconds)
    if kind == "range" and high is not None:
        low, top = fmt_time(seconds), fmt_time(high)
        unit = top.rsplit(" ", 1)[-1]
        return f"{low.rsplit(' ', 1)[0]}-{top}" if low.endswith(" " + unit) else f"{low}-{top}"
    return fmt_time(seconds)


def count(n: int, noun: str) -> str:
    """``1 finding``, ``2 findings``: a count with its noun (regular plurals only)."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
