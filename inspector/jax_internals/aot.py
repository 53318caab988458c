"""A lowered program as plain bytes that a fresh process compiles exactly as jax would here.

libtpu reads its dump flags (LIBTPU_INIT_ARGS) once, when its backend starts, so a compile that
writes libtpu's dumps runs in a new process. That process gets the lowered module (StableHLO
bytecode) and the very compile options jax builds for it (``pxla.create_compile_options``,
serialized), and hands both to the topology's compile-only client: the user's code is never
imported there, and the optimized HLO (its op names included) is the one the ordinary compile
makes. ``grids_replaced`` lowers Pallas TPU kernels with a smaller grid (same body, same
blocks): a cheap compile whose cycles per grid step are the full kernel's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Callable

from .branches import Guard, forced, guard

@dataclasses.dataclass(frozen=True)
class CompileRequest:
    """What a fresh process needs to compile one lowered program for a TPU topology."""

    module: bytes  # StableHLO bytecode
    options: bytes  # xla CompileOptions, serialized
    device_ids: tuple[int, ...]  # the devices of the topology the program runs on, in order
    topology: str  # libtpu topology name, e.g. v5e:2x2


def compile_request(lowered, topology: str) -> CompileRequest:
    """The request for ``lowered`` (a ``jax.stages.Lowered`` for a TPU topology), built as
    ``Lowered.compile()`` builds its options (jax 0.10: ``UnloadedMeshExecutable.from_hlo``)."""
    import numpy as np
    from jax._src.interpreters import mlir, pxla

    computation = lowered._lowering
    args = computation.compile_args
    devices = computation._device_list
    ins = tuple(pxla.maybe_concretize_mesh(s, devices) for s in args["in_shardings"])
    outs = tuple(pxla.maybe_concretize_mesh(s, devices) for s in args["out_shardings"])
    to_inputs, to_outputs = pxla.get_prop_to_input_output(ins, outs, len(args["ordered_effects"]))
    device_array = np.array([devices[i] for i in range(len(devices))], dtype=object)
    options = pxla.create_compile_options(computation._hlo, args["tuple_args"], to_inputs, to_outputs,
                                          args["backend"], device_array, dict(computation._compiler_options_kvs))
    return CompileRequest(module=mlir.module_to_bytecode(computation._hlo), options=options.SerializeAsString(),
                          device_ids=tuple(int(d.id) for d in device_array), topology=topology)


@functools.cache
def start_backend(topology: str):
    """libtpu's description of ``topology``, starting libtpu (its flags are read then): once per
    process, so that the compiles after it are timed alone."""
    from jax.experimental import topologies

    return topologies.get_topology_desc(platform="tpu", topology_name=topology)


def compile_here(request: CompileRequest) -> str:
    """Compile ``request`` in this process (libtpu's flags as this process set them); the
    optimized HLO text. Raises what XLA raises on a failed compile."""
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir
    topology = start_backend(request.topology)
    by_id = {d.id: d for d in topology.devices}
    devices = tuple(by_id[i] for i in request.device_ids)
    options = xc.CompileOptions.ParseFromString(request.options)
    with mlir.make_ir_context():
        module = ir.Module.parse(request.module)
        executable = devices[0].client.compile(module, executable_devices=xc.DeviceList(devices),
                                               compile_options=options)
    modules = executable.hlo_modules()
    return modules[0].to_string() if modules else ""


@dataclasses.dataclass
class GridRecord:
    """One Pallas TPU kernel lowered under ``grids_replaced``: its own grid and the one used."""

    name: str | None  # the pallas_call's name (the custom call is named after it: "matmul.1")
    grid: tuple[int | None, ...]  # None: a size known only at run time
    used: tuple[int | None, ...]
    semantics: tuple[str, ...]  # per axis: parallel | arbitrary | core_parallel ...
    guard: Guard | None = None  # the body's costliest pl.when / lax.cond, over the full grid
    forced: str | None = None  # "heavy" | "light": lowered with that side of the guard taken at every step
    outputs: tuple[tuple[int, ...], ...] | None = None  # its results' shapes (its op when XLA names it otherwise)


@contextlib.contextmanager
def grids_replaced(choose: Callable[[tuple, tuple], tuple], force: str | None = None, prefetch: list | None = None):
    """While active, each Pallas TPU kernel that lowers gets the grid ``choose(grid, semantics)``
    returns (its block shapes, index maps and body unchanged; with ``force`` "heavy" or "light",
    its costliest guard takes that side at every step); yields the list of GridRecords, in lowering order.
    ``prefetch``: per kernel in that order, its scalar prefetch values where known (the guard's steps
    are counted on them).
    Where this jax lays the lowering out differently, nothing is replaced and the list stays empty."""
    try:
        from jax._src.pallas.mosaic import pallas_call_registration as registration
        lower_module = registration.lowering.lower_jaxpr_to_pipelined_module
        to_custom_call = registration._lower_to_custom_call
    except (ImportError, AttributeError):
        yield []
        return
    records: list[GridRecord] = []

    def lowering(ctx, grid_mapping, jaxpr, *args, dimension_semantics=None, **kwargs):
        grid = tuple(g if isinstance(g, int) else None for g in grid_mapping.grid)
        semantics = tuple(str(getattr(s, "value", s)).lower().rsplit(".", 1)[-1] for s in (dimension_semantics or ()))
        semantics = semantics or ("arbitrary",) * len(grid)
        used = tuple(choose(grid, semantics)) if None not in grid else grid
        found = guard(jaxpr, grid, prefetch[len(records)] if prefetch and len(records) < len(prefetch) else None)
        records.append(GridRecord(None, grid, used, semantics, found, force if found is not None else None))
        if used != grid:
            grid_mapping = dataclasses.replace(grid_mapping, grid=used)
        if force and found is not None:
            jaxpr = forced(jaxpr, found.eqn, found.heavy if force == "heavy" else found.light)
        return lower_module(ctx, grid_mapping, jaxpr, *args, dimension_semantics=dimension_semantics, **kwargs)

    def naming(ctx, *args, name=None, **kwargs):
        if records and records[-1].name is None:
            records[-1].name = name
            records[-1].outputs = tuple(tuple(int(d) for d in getattr(a, "shape", ())) for a in getattr(ctx, "avals_out", ()))
        return to_custom_call(ctx, *args, name=name, **kwargs)

    # a wrapper that passes jax's arguments through: jax's annotated signature is not restated here
    registration.lowering.lower_jaxpr_to_pipelined_module = lowering  # type: ignore[assignment]
    registration._lower_to_custom_call = naming
    try:
        yield records
    finally:
        registration.lowering.lower_jaxpr_to_pipelined_module = lower_module
        registration._lower_to_custom_call = to_custom_call
