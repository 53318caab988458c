"""Human-readable figures, shared by every view and the graph so a number reads the same everywhere."""
from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{int(n)} B"


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


def count(n: int, noun: str) -> str:
    """``1 finding``, ``2 findings``: a count with its noun (regular plurals only)."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
