"""The tolerance a diff compares with: given (--atol/--rtol, INSPECT's), else derived from the
output's dtype and how many terms were summed to make it.

Why the number of terms: a kernel and its reference that add the same K products in another order
(a kernel's K tiles against XLA's loop) differ by rounding alone. Adding K terms of spread s one by
one, each addition rounds a partial sum of size about s*sqrt(k) by a uniform error of at most
u = eps/2, so the total error has a standard deviation of about u*s*K/sqrt(6); the output itself
is about s*sqrt(K) (its rms), so that error is 0.20 * eps * sqrt(K) * rms(output). Two orders
differ by sqrt(2) times that, 0.29 * eps * sqrt(K) * rms. The default allows

    atol = max(dtype's atol, C * eps * sqrt(K) * rms(reference output))
    rtol = max(dtype's rtol, C * eps * sqrt(K))            with C = 2

C = 2 is about 7 standard deviations of that difference: an element past it by chance is rarer
than 1 in 10^11, so a mismatch beyond it is not the summation order. ``eps`` is that of the
accumulation, float32 unless a contraction on the way is float64: the MXU and XLA:CPU accumulate
bfloat16 and float16 products in float32, so narrow outputs keep their dtype's own tolerance
(their last rounding is far larger). K comes from the reference's jaxpr (jax_internals.accumulation).
"""
from __future__ import annotations

import math

import numpy as np

from .result import Tolerance

# (atol, rtol) per dtype: a few units in the last place of typical O(1) values
TOLERANCES = {"float64": (1e-10, 1e-10), "float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}
SAFETY = 2.0  # C above: ~7 standard deviations of the difference between two summation orders
EPS = {False: float(np.finfo(np.float32).eps), True: float(np.finfo(np.float64).eps)}


def _base(dtype: str) -> tuple[float, float]:
    return TOLERANCES.get(dtype.replace("complex64", "float32").replace("complex128", "float64"), (0.0, 0.0))


def rms(values: np.ndarray) -> float:
    """Root mean square of the finite values (0.0 when there are none)."""
    a = np.abs(np.asarray(values)).astype(np.float64)
    a = a[np.isfinite(a)]
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


def choose(dtype: str, atol: float | None, rtol: float | None, terms: int = 1, wide: bool = False,
           reference: np.ndarray | None = None, op: str = "") -> Tolerance:
    """The tolerance for one output leaf of ``dtype``: ``atol``/``rtol`` when given, else derived
    (see the module's docstring) from ``terms`` summed (K), in float64 when ``wide``."""
    base_atol, base_rtol = _base(dtype)
    floating = dtype in ("float64", "float32", "float16", "bfloat16", "complex64", "complex128")
    derived_rtol = SAFETY * EPS[wide] * math.sqrt(terms) if floating and terms > 1 else 0.0
    scale = rms(reference) if reference is not None and derived_rtol else 0.0
    derived_atol = derived_rtol * scale
    a = atol if atol is not None else max(base_atol, derived_atol)
    r = rtol if rtol is not None else max(base_rtol, derived_rtol)
    derived = (atol is None and derived_atol > base_atol) or (rtol is None and derived_rtol > base_rtol)
    if atol is not None and rtol is not None:
        source, reason = "given", "as given"
    elif derived:
        acc = "float64" if wide else "float32"
        reason = (f"{C_TEXT} * eps({acc}) * sqrt(K={terms}) (the {op or 'contraction'} that sums the most terms on the way)"
                  f" = {derived_rtol:.3g} relative, times rms(reference)={scale:.3g} absolute: "
                  "what adding the same terms in another order can change")
        source = "derived" if atol is None and rtol is None else "given and derived"
    else:
        reason = f"{dtype}'s default" + (f" (K={terms} summed terms needs no more)" if floating and terms > 1 else "")
        source = "dtype" if atol is None and rtol is None else "given and dtype"
    return Tolerance(atol=float(a), rtol=float(r), source=source, terms=int(terms), reason=reason)


C_TEXT = f"{SAFETY:g}"
