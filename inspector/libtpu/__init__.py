"""libtpu's own view of a compiled TPU program: its static simulation (cycles per kernel, hence
time) and its final VLIW bundles (units, spills, source lines). The one place that reads libtpu's
undocumented dumps (``dumps``); everything else here works from plain data.

    estimate = estimate_times(target, get_chip("tpu-v5e"))           # TimeEstimate
    estimate.kernel("matmul.1").estimated_seconds, estimate.totals["estimated_seconds"]
    bundle_report(target, chip)                                      # list[KernelBundles]
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .model import (EXTRAPOLATED, LIBTPU, ROOFLINE, SOURCES, BundleRow, JobCost, KernelBundles,
                    KernelTime, LineBundles, StepFit, TimeEstimate, UnitUse)

if TYPE_CHECKING:
    from .budget import Budget
    from .estimate import bundle_report, estimate_times

_LAZY = {"Budget": "budget", "estimate_times": "estimate", "bundle_report": "estimate"}


def __getattr__(name: str):  # the estimate loads on first use, not in the libtpu child that imports .pjrt
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Budget", "estimate_times", "bundle_report", "TimeEstimate", "KernelTime", "KernelBundles", "UnitUse",
           "LineBundles", "BundleRow", "StepFit", "JobCost", "LIBTPU", "EXTRAPOLATED", "ROOFLINE",
           "SOURCES"]
