"""The tolerance a diff compares with: given (--atol/--rtol, INSPECT's), else derived from the
output's dtype and how many terms were summed to make it.

Why the number of terms: a kernel and its reference that add the same K products in another order
(a kernel's K tiles against XLA's loop) differ by rounding alone. Adding K terms of spread s one by
one, each addition rounds a partial sum of size about s*sqrt(k) by a uniform error of at most
u = eps/2, so the total error has a standard deviation of about u*s*K/sqrt(6); the output itself
is about s*sqrt(K) (its rms), so that error is 0.20 * eps * sqrt(K) * rms(output). Two orders
differ by sqrt(2) times that, 0.29 * eps * sqrt(K) * rms. The default allows

    atol = max(dtype's atol, C * eps * sqrt(K) * rms(reference output))
    rtol = max(dtype's rtol, C * eps * sqrt(K))            with C = 3

C = 3 is about 10 of those standard deviations. Measured on JAX's megablox gmm in float32 against
XLA's einsum (K = 1024, 2,097,152 elements, inputs N(0, 1)): the differences have a standard
deviation of 0.11 * eps * sqrt(K) * rms (blocked sums round less than one-by-one ones) but a
largest of 1.63 * eps * sqrt(K) * rms, 15 of their standard deviations: the tails are far heavier
than Gaussian, so C leaves room over that largest (x1.8) rather than over a Gaussian bound. 12,496
of those elements are outside atol = rtol = 1e-5, none outside the derived tolerance. A real bug
is orders of magnitude past it. ``eps`` is that of the
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
SAFETY = 3.0  # C above: ~10 standard deviations of the difference between two summation orders
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
    formula = f"{SAFETY:g} * eps({'float64' if wide else 'float32'}) * sqrt(K={terms})"
    parts, sources = [], []
    for name, given, base, derived, extra in (("atol", atol, base_atol, derived_atol, f" * rms(reference)={scale:.3g}"),
                                              ("rtol", rtol, base_rtol, derived_rtol, "")):
        if given is not None:
            parts.append(f"{name} given")
            sources.append("given")
        elif derived > base:
            parts.append(f"{name} = {formula}{extra} = {derived:.3g}")
            sources.append("derived")
        else:
            parts.append(f"{name}: {dtype}'s default")
            sources.append("dtype")
    chosen = "derived" if "derived" in sources else "dtype"
    source = "given" if sources == ["given", "given"] else f"given and {chosen}" if "given" in sources else chosen
    why = ""
    if "derived" in sources:
        why = (f" (K: the terms the reference's {op or 'contraction'} sums; adding them in another order changes the "
               "result by about this much)")
    elif floating and terms > 1 and "dtype" in sources:
        why = f" (K={terms} summed terms need no more)"
    a = atol if atol is not None else max(base_atol, derived_atol)
    r = rtol if rtol is not None else max(base_rtol, derived_rtol)
    return Tolerance(atol=float(a), rtol=float(r), source=source, terms=int(terms), reason=", ".join(parts) + why)
