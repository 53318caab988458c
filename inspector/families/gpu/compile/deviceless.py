"""A deviceless XLA:GPU compile: ``fn`` on abstract inputs, compiled for the GPU a target config
describes, returning the optimized HLO and the dumps XLA:GPU writes on the way (the thunk sequence:
each kernel's launch; the PTX per kernel module; the memory-usage report). The dump folder is asked
for through the compile's own options, so nothing is set in the environment, and removed after."""
from __future__ import annotations

import dataclasses
import tempfile
from typing import Any, Callable, Sequence

from ..jax.compile_dumps import read_dumps
from ....jax_internals.cuda_topology import cuda_devices, mesh_of


@dataclasses.dataclass(frozen=True)
class GpuCompile:
    """What one deviceless XLA:GPU compile gave."""

    hlo: str  # the optimized HLO module, as text
    dumps: dict[str, str]  # e.g. "thunk_sequence.txt", "1.ptx" -> the file's text
    devices: int  # GPUs the program spans
    device_kind: str  # jax's name for the GPU ("NVIDIA H100 80GB HBM3")
    stablehlo: str = ""  # the lowered module: a Mosaic GPU kernel's launch is in it (kernels/mosaic_gpu.py)

    @property
    def thunk_sequence(self) -> str:
        return self.dumps.get("thunk_sequence.txt", "")

    @property
    def ptx(self) -> dict[str, str]:
        """Each PTX dump (read_dumps keeps none of the empty ones XLA writes for a module with no kernel)."""
        return {name: text for name, text in self.dumps.items() if name.endswith(".ptx")}


def sharded_inputs(args: Sequence[Any], devices: list) -> list:
    """Each abstract input (anything with shape and dtype) placed on the GPU mesh, replicated."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh_of(devices), PartitionSpec())
    return [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in args]


def compile_deviceless(fn: Callable, args: Sequence[Any], target_config: str, *, topology: str = "1x1x1") -> GpuCompile:
    """Lower and compile ``fn`` for the GPU ``target_config`` describes. The compiler's refusal
    (e.g. RESOURCE_EXHAUSTED for shared memory) propagates as jax raised it:
    ``errors.shared_memory_refusal`` reads its figures."""
    import jax

    devices = cuda_devices(target_config, topology)
    lowered = jax.jit(fn).lower(*sharded_inputs(args, devices))
    with tempfile.TemporaryDirectory(prefix="inspector-xla-gpu-") as folder:
        compiled = lowered.compile(compiler_options={"xla_dump_to": folder, "xla_dump_hlo_as_text": True})
        dumps = read_dumps(folder)
    return GpuCompile(hlo=compiled.as_text() or "", dumps=dumps, devices=len(devices), device_kind=devices[0].device_kind,
                      stablehlo=lowered.as_text())
