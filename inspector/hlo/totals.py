"""A program's totals over its kernels, and how they compare with XLA's own cost analysis."""
from __future__ import annotations

from typing import NotRequired, TypedDict

from ..base.units import fmt_bytes, fmt_count
from .kernel import Kernel, TensorRef
from .module import parse_shape


class Totals(TypedDict):
    """A program's totals over its kernels (JSON ``totals``): typed keys, read as a dict."""

    kernels: int
    bytes_read: int
    bytes_written: int
    hbm_bytes: int
    flops: float
    transcendentals: float
    pallas_kernels: int
    custom_call_operand_bytes: int  # operands of custom calls without a pl.CostEstimate (XLA counts their results only)
    # Pallas kernels with a pl.CostEstimate, whose bytes_accessed XLA takes for them: what ``bytes``
    # counts of them (operands once, results), and their HBM traffic (the BlockSpec walk's, re-fetched blocks counted)
    cost_estimate_counted_bytes: int
    cost_estimate_traffic_bytes: int
    async_copy_bytes: int
    gather_unread_bytes: int  # of the operands gathered from, what a gather leaves unread (XLA counts it in a fusion)
    reduce_window_flops: float
    bytes: int
    padding_bytes: int
    roofline_s: float | None
    estimated_seconds: NotRequired[float | None]  # libtpu's estimate of the whole program (--time)
    estimate_kind: NotRequired[str | None]  # estimate | floor (some kernel's figure is one) | range
    high_seconds: NotRequired[float | None]  # a range's upper end
    floor_share: NotRequired[float | None]  # the part of estimated_seconds that floors make
    measured_seconds: NotRequired[float | None]  # its device time on the attached TPU (--measure)


def sums(kernels: list[Kernel], roofline: bool, trips: bool = True) -> Totals:
    """Sums over the kernels, each counted as often as it runs (``trips``) or once."""
    r = (lambda k, v: v * k.repeat) if trips else (lambda k, v: v)
    logical = sum(r(k, sum(_logical(t) for t in k.inputs + k.outputs)) for k in kernels)
    read, written = sum(r(k, k.bytes_read) for k in kernels), sum(r(k, k.bytes_written) for k in kernels)
    estimated = [k for k in kernels if k.cost_estimate_bytes is not None]
    return Totals(
        kernels=len(kernels),
        bytes_read=read,
        bytes_written=written,
        hbm_bytes=sum(r(k, k.hbm_bytes) for k in kernels),
        flops=sum(r(k, k.flops) for k in kernels),
        transcendentals=sum(r(k, k.transcendentals) for k in kernels),
        pallas_kernels=sum(k.kind == "custom-call:pallas" for k in kernels),
        custom_call_operand_bytes=sum(r(k, k.bytes_read) for k in kernels
                                      if k.opcode == "custom-call" and k.cost_estimate_bytes is None),
        cost_estimate_counted_bytes=sum(r(k, k.bytes_read + k.bytes_written) for k in estimated),
        cost_estimate_traffic_bytes=sum(r(k, k.hbm_bytes) for k in estimated),
        async_copy_bytes=sum(r(k, k.bytes_written) for k in kernels if k.opcode == "copy-start"),
        gather_unread_bytes=sum(r(k, sum(t.buffer_bytes - t.bytes for t in k.inputs if t.buffer_bytes))
                                for k in kernels if k.opcode == "fusion" and k.ops.get("gather")),
        reduce_window_flops=sum(r(k, k.reduce_window_flops) for k in kernels),
        bytes=read + written,
        padding_bytes=read + written - logical,
        roofline_s=overlapped([(r(k, k.roofline_s), is_async(k.opcode)) for k in kernels if k.roofline_s]) if roofline else None,
    )


def is_async(opcode: str) -> bool:
    """An op the program starts and later waits for (copy-start, slice-start, all-gather-start):
    its DMA runs while the kernels between run."""
    return opcode.endswith("-start")


def overlapped(times: list[tuple[float, bool]]) -> float:
    """A program's time from its kernels' (seconds, asynchronous): the asynchronous ones' DMAs run
    beside the others, so the total is the longer of the two sums (a lower bound: each engine is
    busy that long), not their sum."""
    return max(sum(t for t, a in times if not a), sum(t for t, a in times if a))


def compared_bytes(t: Totals) -> int:
    """Our bytes counted as XLA's cost analysis counts them: a custom call's results without its
    operands, a Pallas kernel with a pl.CostEstimate by its HBM traffic (XLA takes the estimate's
    bytes_accessed, which counts each block fetched again, as the BlockSpec walk does)."""
    return (t["bytes"] - t["custom_call_operand_bytes"] - t["cost_estimate_counted_bytes"]
            + t["cost_estimate_traffic_bytes"])


def agreement(totals: Totals, xla: dict | None, once: Totals | None = None, trips: list[int] | None = None) -> dict:
    """Our totals against XLA's cost analysis, with what is known to count differently.

    XLA counts a while loop's body once, whatever its trip count: where the program has loops
    (``once``: our sums with each kernel counted once; ``trips``: the loops' repeat counts) those
    sums are compared, and the note says so. XLA counts a custom call's result but not its
    operands, or takes the bytes_accessed of a pl.CostEstimate the kernel gives: the bytes compared
    leave the operands out, and take such a kernel's HBM traffic (compared_bytes).
    Where the rest still differs by more than 5%, the note names the known causes and their size,
    as measured on the samples with libtpu 0.0.42.1: XLA:TPU counts an async copy's result twice
    more at copy-done (read and write; we count the transfer once, at copy-start), counts the whole
    operand a fused gather reads from (we count what it gathers), and counts far fewer flops for a
    reduce-window than window x output (log_softmax's padded-window max)."""
    if not xla or "flops" not in xla:
        return {"flops_ratio": None, "bytes_ratio": None, "note": "XLA reported no cost analysis for this module"}

    def ratio(ours, theirs):
        return ours / theirs if theirs else (1.0 if not ours else None)

    t = once or totals
    compared = compared_bytes(t)
    out = {"flops_ratio": ratio(t["flops"], xla.get("flops", 0)), "bytes_ratio": ratio(compared, xla.get("bytes accessed", 0)),
           "bytes_compared": compared, "flops_compared": t["flops"], "transcendentals_compared": t["transcendentals"],
           "loop_bodies_once": once is not None}
    notes = []
    if once is not None:
        runs = " or ".join(str(n) for n in trips) if trips else "several"
        notes.append(f"XLA counts a while loop's body once; its kernels here run {runs} times: compared per trip "
                     f"({fmt_count(t['flops'])} flops, {fmt_bytes(compared)}; every trip: {fmt_count(totals['flops'])} "
                     f"flops, {fmt_bytes(compared_bytes(totals))})")
    if t["custom_call_operand_bytes"]:
        notes.append(f"bytes compared leave out {fmt_bytes(t['custom_call_operand_bytes'])} of custom-call operands "
                     "(XLA counts a custom call's result only)")
    if t["cost_estimate_counted_bytes"]:
        notes.append(f"a Pallas kernel with a pl.CostEstimate is compared by its HBM traffic "
                     f"({fmt_bytes(t['cost_estimate_traffic_bytes'])}, the BlockSpec walk's) against the estimate's "
                     "bytes_accessed, which XLA takes for it: both count each block fetched again")
    known_causes: dict[str, list[tuple[float, str]]] = {  # what XLA counts differently, by metric: (amount, what it is)
        "flops": [(t["reduce_window_flops"], "reduce-window flops")],
        "bytes": [(2 * t["async_copy_bytes"], "async copy results XLA counts again at copy-done"),
                  (t["gather_unread_bytes"], "gathered operands left unread, which XLA counts whole in a fusion")],
    }
    for what, causes in known_causes.items():
        r = out[f"{what}_ratio"]
        if r is not None and abs(r - 1) > 0.05:
            said = [f"{fmt_bytes(n) if what == 'bytes' else f'{n:.3g}'} of {label}" for n, label in causes if n]
            notes.append(f"{what} differ by {100 * (r - 1):+.1f}%" + (f": {'; '.join(said)}" if said else ""))
    if totals["padding_bytes"]:
        notes.append(f"tiled-layout padding is {totals['padding_bytes'] / max(totals['bytes'], 1):.0%} of the bytes (XLA counts it too)")
    out["note"] = "; ".join(notes) or "within 5% of XLA's cost analysis"
    return out


def _logical(t: TensorRef) -> int:
    """The bytes moved less the tiled layout's padding (a slice pads as its buffer does)."""
    shapes = parse_shape(t.shape)
    if not shapes:
        return t.bytes
    return shapes[0].logical_bytes * t.bytes // t.buffer_bytes if t.buffer_bytes else shapes[0].logical_bytes
