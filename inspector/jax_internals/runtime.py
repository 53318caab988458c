"""Whether jax has started its backends (private state: jax._src.xla_bridge)."""
from __future__ import annotations


def backends_started() -> bool:
    """True once jax made its backends (jax.devices(), a first computation): from then on its
    platform settings no longer change anything."""
    try:
        from jax._src import xla_bridge
    except ImportError:  # a jax that moved this: assume started, and change nothing
        return True
    return bool(getattr(xla_bridge, "_backends", True))
