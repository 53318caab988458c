"""A TPU topology as jax sees it without a TPU (``jax.experimental.topologies``, libtpu's
deviceless devices): the one-chip mesh a TPU target lowers under, and a whole slice's devices.
Here, below the compile path, because the interpreter's abstract mesh (``interpret``) needs the
same mesh the backends compile with."""
from __future__ import annotations

import functools


@functools.cache
def tpu_mesh(topology: str):
    """A mesh of the first device of ``topology`` (libtpu refuses a 1x1 topology, so a
    host-sized one is asked for and one chip of it used)."""
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh

    topo = topologies.get_topology_desc(platform="tpu", topology_name=topology)
    return Mesh(np.array(topo.devices[:1]), ("x",))


@functools.cache
def topology_devices(topology: str) -> tuple:
    from jax.experimental import topologies

    return tuple(topologies.get_topology_desc(platform="tpu", topology_name=topology).devices)
