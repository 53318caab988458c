"""A compilation-pipeline inspector for JAX functions and Pallas kernels.

The Python API (notebooks and scripts)::

    import inspector
    report = inspector.inspect(f, jax.ShapeDtypeStruct((8, 128), jnp.float32))   # or "file.py:func"
    report.fusions.totals["hbm_bytes"], report.findings, report.pallas, report.stages.hlo
    inspector.check("samples/matmul.py:tiled", targets=["tpu-v5e", "tpu-v6e"]).ok
    inspector.diff(kernel, reference, x, y).ok
    inspector.compare("samples/attention.py:flash", None, params_a={"block_q": 128}, params_b={"block_q": 256})

``import inspector`` sets, where unset, the variables that keep libtpu quiet and shareable and
jax's local backend off a TPU probe (``inspector.base.environment``). Import it before jax for all of
them to apply. Imported after jax, it still sets the libtpu ones (libtpu reads them when it
loads) and, if jax has not started a backend and nobody chose ``JAX_PLATFORMS``, sets
``jax_platforms`` through ``jax.config``; once jax has started its backends they are left as
they are (``inspector.base.environment.import_state`` says which case held). Nothing prints: the
functions return data (a Report, CheckResult or DiffResult, shown as HTML in Jupyter), raise an
``InspectorError`` for bad input, and keep jax's logs and warnings quiet while they run.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .base.environment import prepare_on_import as _prepare_on_import
from .base.version import __version__ as __version__
from .jax_internals.runtime import backends_started as _backends_started


_prepare_on_import(_backends_started)

from .base.errors import InspectorError, TargetFailure, UsageError  # noqa: E402

if TYPE_CHECKING:
    from .api import check, compare, diff, inspect
    from .tuning.api import tune
    from .verbs.comparison import Compare
    from .run.result import DiffResult
    from .verbs.checking import CheckResult
    from .results.report import Report

_LAZY = {"check": ("api", "check"), "compare": ("api", "compare"), "diff": ("api", "diff"), "inspect": ("api", "inspect"),
         "tune": ("tuning.api", "tune"),
         "Report": ("results.report", "Report"), "TuneResult": ("tuning.model", "TuneResult"),
         "CheckResult": ("verbs.checking", "CheckResult"), "DiffResult": ("run.result", "DiffResult"),
         "Compare": ("verbs.comparison", "Compare")}


# The functions and result types load on first use: a child process of ours (a libtpu compile, a
# tune worker) imports this package for its environment and one module, and the analyses behind
# the API were 45% of a libtpu child's start-up
def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'inspector' has no attribute {name!r}")


__all__ = ["CheckResult", "Compare", "DiffResult", "InspectorError", "Report", "TargetFailure", "TuneResult", "UsageError", "check",
           "compare", "diff", "inspect", "tune"]
