"""The only place that reads private jax/jaxlib API (``jax._src``, Pallas internals, the Mosaic
lowering, the TPU interpreter's state). Each module here turns what it reads into the
inspector's own plain dataclasses, so nothing outside this package holds or imports a private
jax object. When jax moves, this package is what changes.

Modules: ``tracing`` (source locations, jaxpr walks), ``pallas`` (pallas_call equations ->
PallasCall data), ``mosaic`` (the Mosaic MLIR of each kernel as it lowers), ``interpret``
(TPU interpret mode: chip lookups, race state), ``cost`` (XLA's cost analysis of HLO text),
``hlo_program`` (HLO text as compile inputs for libtpu's C API).
"""
from __future__ import annotations

TESTED_JAX = ("0.10.0", "0.10.1", "0.10.2")


def jax_version() -> str:
    import jax

    return jax.__version__


def check_version() -> str | None:
    """A one-line note when the installed jax is not one the inspector was tested with."""
    version = jax_version()
    if version in TESTED_JAX:
        return None
    return (f"jax {version} is untested with this inspector (tested: {', '.join(TESTED_JAX)}); "
            "analyses that read jax internals may report that they cannot follow a kernel")
