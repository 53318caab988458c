"""Each kernel's time on a GPU, deviceless: no GPU runs it and XLA:GPU simulates nothing, so the
time is the inspector's own floor, from what the kernel moves and computes (the HLO's count) at
the chip's peaks (inspector/base/chips.py), with the compute spread over the SMs its grid fills.

- **Memory**: HBM bytes / the chip's bandwidth. Occupancy does not lower it here: how much of the
  bandwidth few resident warps reach is a measured figure we do not have, so it stays a roofline.
- **Compute**: a kernel with a dot (or a Pallas kernel) at the tensor core's rate for its operands (bf16/f16: bf16;
  f32: tf32, XLA:GPU's default precision on sm80+, a floor also for HIGHEST); other flops at
  the CUDA cores' (packed f16 where any input is 16-bit); transcendentals at the SFUs' where
  every one of them is an op the SFU computes (exp, logistic, rsqrt).
- **Tail**: blocks run whole on one SM, so the busiest SM computes ceil(blocks / SMs) blocks' share:
  a partial last wave costs a whole one (a grid of 133 blocks on 132 SMs: twice the compute time
  of 132). Blocks that share an SM (occupancy) share its units: the SM, not the slot, is the unit.

Every figure is a floor (``estimate_kind`` "floor"): the real kernel reaches none of the peaks.
An XLA GEMM compiled deviceless runs XLA's fallback tiling (deviceless XLA:GPU does not autotune):
its grid, and so its waves, are not the tuned kernel's; its note says so."""
from __future__ import annotations

import math
import re

from ...base.chips import Chip
from ...base.findings import Finding
from ...hlo.costs import TRANSCENDENTAL
from ...hlo.totals import is_async
from ...libtpu.budget import Budget
from ...libtpu.kernel_times import totals
from ...libtpu.model import FLOOR, ROOFLINE, KernelTime, TimeEstimate

DOTS = ("dot", "convolution")
PALLAS = "custom-call:pallas"  # which of its flops are dots is not told apart: all at the tensor cores' rate (a floor)
SFU_OPS = frozenset({"exponential", "logistic", "rsqrt"})  # each at least one SFU op (ex2, rsqrt) per element
UNTUNED = "XLA's fallback GEMM tiling (deviceless XLA:GPU does not autotune): the tuned kernel's grid and waves differ"
# a Pallas-Triton custom call's kernel function, in its backend config: `name = "kernel"`
_TRITON_CALL = re.compile(r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*custom_call_target="__gpu\$xla\.gpu\.triton".*?\bname = "([^"]+)"',
                          re.MULTILINE)
_DTYPE = re.compile(r"^([a-z]+\d*)")


def launch_names(hlo: str | None) -> dict[str, str]:
    """HLO op -> the name its kernel launches under where that is not the op's own: a Pallas-Triton
    call's kernel function (``kernel`` for ``pallas_call.1``)."""
    return {m.group(1): m.group(2) for m in _TRITON_CALL.finditer(hlo or "")}


def match_launches(kernels: list, launches: list, hlo: str | None) -> dict[str, object]:
    """HLO kernel name -> its launch (verdict.GpuKernel): XLA names a fusion's kernel after the op
    with ``.`` and ``-`` made ``_``; a Pallas call's after its kernel function (with a suffix when
    several share it: taken in order)."""
    left = list(launches)
    calls = launch_names(hlo)
    found: dict[str, object] = {}
    for k in kernels:
        wanted = calls.get(k.name, re.sub(r"[.\-]", "_", k.name))
        hit = next((g for g in left if g.name == wanted), None)
        if hit is None and k.name in calls:
            hit = next((g for g in left if g.name.startswith((wanted + "_", wanted + "."))), None)
        if hit is not None:
            left.remove(hit)
            found[k.name] = hit
    return found


def _dtypes(kernel) -> set[str]:
    return {m.group(1) for t in kernel.inputs if (m := _DTYPE.match(t.shape))}


def compute_peak(kernel, chip: Chip) -> tuple[float | None, str]:
    """The rate the kernel's flops are held to, and its name."""
    types = _dtypes(kernel)
    sixteen = bool(types & {"bf16", "f16"})
    if any(op in kernel.ops for op in DOTS) or kernel.kind == PALLAS:  # a Pallas kernel's dots are in its body
        if sixteen or not types & {"f32"}:  # 16-bit (or 8-bit, held to the bf16 rate) operands
            return chip.bf16_flops, "bf16 tensor core"
        return chip.tf32_flops, "tf32 tensor core"
    if sixteen and chip.f16_flops:
        return chip.f16_flops, "f16 CUDA cores"
    return chip.f32_flops, "f32 CUDA cores"


def kernel_time(kernel, chip: Chip, launch=None) -> KernelTime:
    """One kernel's floor on ``chip``; ``launch``: its verdict.GpuKernel (grid, occupancy), if any."""
    times = {"memory": kernel.hbm_bytes / chip.hbm_bytes_per_s} if chip.hbm_bytes_per_s else {}
    peak, unit = compute_peak(kernel, chip)
    blocks = math.prod(launch.grid) if launch is not None and launch.grid else None
    # the busiest SM's share of the work, as a share of an even spread over every SM
    tail = math.ceil(blocks / chip.sms) * chip.sms / blocks if blocks and chip.sms else 1.0
    if peak and kernel.flops:
        times[unit] = kernel.flops / peak * tail
    transcendental = {op for op in kernel.ops if op in TRANSCENDENTAL}
    if kernel.transcendentals and transcendental and transcendental <= SFU_OPS and chip.sfu_ops_per_s:
        times["SFU"] = kernel.transcendentals / chip.sfu_ops_per_s * tail
    seconds = max(times.values(), default=None)
    bound = max(times, key=times.__getitem__) if times else None
    notes = [f"bound: {bound}"] if bound else []
    occupancy = launch.occupancy if launch is not None else None
    if occupancy is not None and occupancy.waves is not None:
        notes.append(f"{occupancy.waves:.2f} waves of {occupancy.ctas_per_sm} blocks per SM ({occupancy.limit})")
    if launch is not None and kernel.kind == "fusion:custom" and any(op in kernel.ops for op in DOTS):
        notes.append(UNTUNED)
    return KernelTime(name=kernel.name, kind=kernel.kind,
                      estimated_cycles=seconds * chip.clock_hz if seconds is not None and chip.clock_hz else None,
                      estimated_seconds=seconds, estimate_source=ROOFLINE if seconds is not None else None,
                      estimate_kind=FLOOR if seconds is not None else None, repeat=kernel.repeat,
                      roofline_seconds=kernel.roofline_s, overlaps=is_async(getattr(kernel, "opcode", "")),
                      note="; ".join(notes) or None)


def estimate(chip: Chip, kernels: list, launches: list, hlo: str | None, budget: Budget | None = None) -> TimeEstimate:
    """Every kernel's floor on ``chip`` (``launches``: Report.gpu_kernels, with occupancy)."""
    matched = match_launches(kernels, launches, hlo)
    times = [kernel_time(k, chip, matched.get(k.name)) for k in kernels]
    findings = [Finding("info", "time-roofline-only",
                        f"{chip.name}: no GPU to run on and no simulator, so each kernel's time is a floor: its HBM bytes, "
                        "flops and transcendentals at the chip's peaks, the compute of a partial last wave counted whole",
                        view="fusions", data={"chip": chip.name})]
    findings += [Finding("info", "time-roofline-only", f"{t.name} on {chip.name}: its floor is for {UNTUNED}",
                         kernel=t.name, view="fusions", data={"chip": chip.name})
                 for t in times if t.note and UNTUNED in t.note]
    return TimeEstimate(chip=chip.name, clock_hz=chip.clock_hz, kernels=times, totals=totals(times, chip), method=ROOFLINE,
                        budget=(budget or Budget()).as_dict(), jobs=[], findings=findings)

