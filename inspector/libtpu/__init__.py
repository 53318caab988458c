"""libtpu's own view of a compiled TPU program: its static simulation (cycles per kernel, hence
time) and its final VLIW bundles (units, spills, source lines). The one place that reads libtpu's
undocumented dumps (``dumps``); everything else here works from plain data.

    estimate = estimate_times(target, get_chip("tpu-v5e"))           # TimeEstimate
    estimate.kernel("matmul.1").estimated_seconds, estimate.totals["estimated_seconds"]
    bundle_report(target, chip)                                      # list[KernelBundles]
"""
from __future__ import annotations

from .budget import Budget
from .estimate import bundle_report, estimate_times
from .model import (EXTRAPOLATED, LIBTPU, ROOFLINE, SOURCES, BundleRow, JobCost, KernelBundles,
                    KernelTime, LineBundles, StepFit, TimeEstimate, UnitUse)

__all__ = ["Budget", "estimate_times", "bundle_report", "TimeEstimate", "KernelTime", "KernelBundles", "UnitUse",
           "LineBundles", "BundleRow", "StepFit", "JobCost", "LIBTPU", "EXTRAPOLATED", "ROOFLINE",
           "SOURCES"]
