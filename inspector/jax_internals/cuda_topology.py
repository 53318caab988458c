"""The deviceless cuda topology: jax's compile-only devices for a GPU described by XLA's target
config, and a mesh over them, so that ``jit(f).lower(...).compile()`` on inputs placed there runs
XLA:GPU for that chip on a machine with no GPU and no driver.

jax builds the topology through the CUDA plugin's topology factory, which the plugin registers only
when its start-up check of the CUDA libraries passes or is skipped: jax skips it when its platforms
exclude cuda (what the inspector's own processes set, JAX_PLATFORMS=cpu), else it fails where there
is no cuDNN, as on every machine without a GPU. Where jax had already started with the check failed
(a user's process that left JAX_PLATFORMS unset), the plugin is initialized again here with the check
skipped, so the user sets no variable either way."""
from __future__ import annotations

import contextlib
import importlib
import os
from typing import Iterator

PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")  # what jax discovers and initializes
_PLUGIN_PACKAGES = ("jax_cuda12_plugin", "jax_cuda13_plugin")  # what pip installs beside them
_SKIP_CHECK = "JAX_SKIP_CUDA_CONSTRAINTS_CHECK"


def plugin_missing() -> str | None:
    """Why a deviceless GPU compile cannot run here, or None when the CUDA plugin is installed."""
    import importlib.util

    if any(importlib.util.find_spec(name) for name in _PLUGIN_PACKAGES):
        return None
    return "jax's CUDA plugin is not installed: .ci/setup installs it, or pip install '.[gpu]' from the clone"


@contextlib.contextmanager
def _check_skipped() -> Iterator[None]:
    had = os.environ.get(_SKIP_CHECK)
    os.environ[_SKIP_CHECK] = "1"
    try:
        yield
    finally:
        if had is None:
            os.environ.pop(_SKIP_CHECK, None)
        else:
            os.environ[_SKIP_CHECK] = had


def _register_plugin() -> None:
    """Initialize the installed CUDA plugin with its library check skipped (no GPU, no cuDNN)."""
    from jax._src import xla_bridge

    for name in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        with _check_skipped():
            module.initialize()
        if "cuda" in xla_bridge._topology_factories:
            return


def cuda_devices(target_config: str, topology: str = "1x1x1") -> list:
    """The compile-only devices of ``topology`` (hosts x nodes x GPUs, "1x1x8": 8 GPUs) for the
    GPU that ``target_config`` (GpuTargetConfigProto text) describes."""
    from jax._src import xla_bridge
    from jax.experimental import topologies

    missing = plugin_missing()
    if missing:
        raise RuntimeError(missing)
    try:
        return list(topologies.get_topology_desc(platform="cuda", target_config=target_config, topology=topology).devices)
    except NotImplementedError:
        if "cuda" in xla_bridge._topology_factories:
            raise
    _register_plugin()
    return list(topologies.get_topology_desc(platform="cuda", target_config=target_config, topology=topology).devices)


def unavailable(chip) -> str | None:
    """Why ``chip`` (a GPU chip row) cannot compile here (one line), or None when it can."""
    if not chip.target_config:
        return (f"{chip.name} has no XLA target config (inspector/families/gpu/specs/): budgets and roofline "
                "only; h100, h200 and a100 compile without a GPU")
    return plugin_missing()


def chip_devices(chip) -> tuple:
    """The compile-only devices of ``chip`` (its ``chip.devices`` GPUs of one node), or UsageError
    saying why it cannot compile here (what the shared ``Backend`` asks for a GPU row)."""
    from ..families.gpu.jax.target_configs import spec_text
    from ..base.errors import UsageError

    why = unavailable(chip)
    if why is not None:
        raise UsageError(f"--target {chip.name}: {why}")
    try:
        return tuple(cuda_devices(spec_text(chip.target_config), f"1x1x{chip.devices}"))
    except RuntimeError as err:  # the plugin refused the topology
        raise UsageError(f"--target {chip.name}: XLA:GPU's deviceless topology failed: {err}") from err


def mesh_of(devices: list, axis: str = "x"):
    """A one-axis mesh over ``devices``."""
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(devices), (axis,))
