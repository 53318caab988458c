"""Pallas asks which TPU it runs on (``pltpu.get_tpu_info()``, as ``emit_pipeline`` does). On the
CPU (tracing for the interpreter, running a diff) the answer is "cpu", which Pallas refuses.
``simulated_chip`` makes the lookup answer for the TPU being simulated instead, through the
registry jax keeps for device kinds it does not know."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def simulated_chip(jax_chip_version: str | None, cores_per_device: int = 1):
    """While active, a chip lookup on a CPU device answers for ``jax_chip_version`` (e.g. "5e")."""
    try:
        from jax._src.pallas.mosaic import tpu_info
        from jax.experimental.pallas import tpu as pltpu
        registry = tpu_info.registry
        version = pltpu.ChipVersion(jax_chip_version) if jax_chip_version else None
    except (ImportError, AttributeError, ValueError):
        yield
        return
    if version is None or "cpu" in registry:
        yield
        return
    registry["cpu"] = lambda: pltpu.get_tpu_info_for_chip(version, cores_per_device)
    _forget_answers(tpu_info)  # get_tpu_info() is cached per trace context, not per chip: a chip simulated
    try:                       # earlier in this process would answer again
        yield
    finally:
        registry.pop("cpu", None)
        _forget_answers(tpu_info)


def _forget_answers(tpu_info) -> None:
    clear = getattr(tpu_info.get_tpu_info, "cache_clear", None)
    if clear is not None:
        clear()
