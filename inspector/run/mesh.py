"""The mesh a sharded target's diff runs on: as many CPU devices as its mesh has where this process
has (or can still start) them, else every axis of size 1; and what a kernel that fails on the
smaller mesh is said to be (no finding against the kernel)."""
from __future__ import annotations

import math

from ..base.findings import Finding
from ..jax_internals import interpret as ji
from ..compilation.target import Target


def mesh_here(target: Target, start_devices: bool) -> tuple[dict[str, int], Finding | None]:
    """The mesh the diff runs on, and the info finding that says which. Its axes get their sizes
    when this process has (or can still start) that many devices; an axis of -1 ("the devices left
    over") gets 1. Where there are too few devices, every axis is of size 1, and a kernel that then
    fails is no finding against the kernel (see mesh_failure)."""
    mesh = dict(target.mesh or {})
    if not mesh:
        return {}, None
    sizes = {name: (size if size != -1 else 1) for name, size in mesh.items()}
    needed = math.prod(sizes.values())
    given = ", ".join(f"{name}={size if size != -1 else 'the rest'}" for name, size in mesh.items())
    free = [name for name, size in mesh.items() if size == -1]
    rest = (f"; {', '.join(free)} (the devices left over) has size 1 here: give --mesh with its size to run it wider"
            if free else "")
    data = {"axes": dict(mesh), "devices": needed}
    if needed > 1:
        have = ji.cpu_devices(needed if start_devices else 1)
        if have >= needed:
            return sizes, Finding("info", "mesh-on-cpu-devices", f"{target.name}: run on {needed} devices, its mesh ({given})"
                                  f"{rest}", view="diff", data=data | {"sizes": sizes, "reduced": bool(free)})
        ones = {name: 1 for name in mesh}
        return ones, Finding("info", "mesh-on-one-device", f"{target.name}: its mesh ({given}) needs {needed} devices and this "
                             f"process has {have}: run on one device, every "
                             f"axis of size 1. `inspector diff` on the command line runs it on {needed} CPU devices, as does "
                             f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} set before jax starts", view="diff",
                             data=data | {"sizes": ones, "reduced": True})
    return sizes, Finding("info", "mesh-on-one-device", f"{target.name}: run on one device, its mesh ({given}) with every axis "
                          f"of size 1{rest}; the compile views (show/check --target CHIP:SHAPE) have the real mesh", view="diff",
                          data=data | {"sizes": sizes, "reduced": bool(free)})


def mesh_failure(finding: Finding, mesh_note: Finding, strict: bool) -> Finding:
    """A kernel that raised on a mesh smaller than its own (a collective kernel on one device: its
    ring of neighbours is empty, a split over n - 1 steps divides by zero): it cannot be diffed here."""
    note = mesh_note.data or {}
    axes, sizes = note["axes"], note["sizes"]
    shape = ",".join(f"{k}={v}" for k, v in sizes.items())
    own = ",".join(f"{k}={v if v != -1 else 'the rest'}" for k, v in axes.items())
    if -1 in axes.values():
        hint = "give the axis sizes (e.g. --mesh " + ",".join(f"{k}=4" if v == -1 else f"{k}={v}" for k, v in axes.items()) \
               + ") to run it on that many CPU devices"
    else:
        hint = (f"`inspector diff` on the command line runs it on {note['devices']} CPU devices, as does "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={note['devices']} set before jax starts")
    return Finding("error" if strict else "info", "mesh-unavailable",
                   f"{finding.message.rstrip('.')}: on a mesh of {shape}, smaller than its own ({own}), so it cannot be "
                   f"diffed here (a collective kernel needs its mesh's devices): {hint}",
                   view="diff", data={"raised": finding.message, "detail": (finding.data or {}).get("detail", "")})
