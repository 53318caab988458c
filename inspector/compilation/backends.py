"""Where a target compiles: jax's local backend, or a TPU chip through libtpu without a TPU.

A TPU target compiles deviceless on a host-sized topology, using one chip of it (libtpu refuses a 1x1 topology: "not divisible by chips_per_host_bounds");
``jax.set_mesh`` makes Pallas see that chip's device kind while lowering. A target with a
topology (``tpu-v5e:16x16``) spans every device of it: the program is traced under a mesh of
them (the target's ``mesh`` axes) and its inputs are placed with the target's shardings.
"""
from __future__ import annotations

import contextlib
import copy

from ..base.chips import CHIPS, Chip, get_chip
from ..base.environment import libtpu_available
from ..base.errors import UsageError
from ..jax_internals import tpu_topology


class Backend:
    """Places abstract inputs on the chip and provides the context to trace and lower under."""

    def __init__(self, chip: Chip):
        self.chip = chip
        if chip.is_tpu and not libtpu_available():
            from ..jax_internals import jax_version
            raise UsageError(f"target {chip.name} needs libtpu, which is not installed: pip install "
                             f"'jax[tpu]=={jax_version()}' (the libtpu of your jax; local targets such as cpu work without it)")
        # a GPU row: XLA:GPU on the deviceless cuda topology of its target config (a one-line refusal where it cannot)
        self.gpu_devices: tuple | None = None
        if chip.kind == "gpu":
            from ..families.gpu.jax.cuda_topology import chip_devices
            self.gpu_devices = chip_devices(chip)
        self.mesh = tpu_topology.tpu_mesh(chip.topology) if chip.is_tpu else None
        if self.gpu_devices is not None:
            from ..families.gpu.jax.cuda_topology import mesh_of
            self.mesh = mesh_of(list(self.gpu_devices[:1]))
        self.mesh_axes: dict[str, int] | None = None  # set when the program is sharded (with_mesh)
        if chip.devices > 1:
            self._set_mesh({"devices": chip.devices})
        if chip.name == "gpu":
            import jax
            if not any(d.platform == "gpu" for d in jax.devices()):
                raise UsageError("--target gpu: jax sees no GPU here (install jax[cuda12] on a GPU machine), use cpu or a TPU target")

    @property
    def platform(self) -> str:
        return "tpu" if self.chip.is_tpu else "cuda" if self.gpu_devices is not None else self.chip.name

    @property
    def device_kind(self) -> str:
        if self.mesh is not None:
            return self.mesh.devices.flat[0].device_kind
        import jax
        return jax.devices(self.platform)[0].device_kind

    @property
    def devices(self) -> int:
        if self.chip.is_tpu or self.gpu_devices is not None:
            return self.chip.devices
        import jax
        return len(jax.devices(self.platform))

    def _set_mesh(self, axes: dict[str, int]) -> None:
        from .sharding import device_mesh, fit_mesh

        sizes = fit_mesh(axes, self.devices, self.chip.name)
        if self.chip.is_tpu:
            assert self.mesh is not None  # a TPU backend has one (__init__)
            devices = tpu_topology.topology_devices(self.chip.topology) if self.chip.devices > 1 else tuple(self.mesh.devices.flat)
        elif self.gpu_devices is not None:
            devices = self.gpu_devices
        else:
            import jax
            devices = tuple(jax.devices(self.platform))
        self.mesh, self.mesh_axes = device_mesh(devices, sizes), sizes

    def with_mesh(self, axes: dict[str, int] | None) -> "Backend":
        """This backend with the program sharded over a mesh of ``axes`` (sizes by name, one may
        be -1); the product must be the device count of the target (one line, exit 2, if not)."""
        if axes is None:
            return self
        other = copy.copy(self)
        other._set_mesh(axes)
        return other

    def place(self, tree, specs=None):
        """Turn every array-like leaf into a ShapeDtypeStruct on this backend's devices: placed by
        ``specs`` (a PartitionSpec pytree, a prefix of ``tree``), replicated where it has none."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        if self.mesh is None:
            return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype) if _is_array(x) else x, tree)

        def placed(spec, sub):
            sharding = NamedSharding(self.mesh, spec if spec is not None else PartitionSpec())
            return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding) if _is_array(x) else x, sub)

        if specs is None:
            return placed(None, tree)
        from .sharding import is_spec
        return jax.tree.map(placed, specs, tree, is_leaf=is_spec)

    def describe_mesh(self) -> str | None:
        if not self.mesh_axes:
            return None
        from .sharding import format_mesh
        return format_mesh(self.mesh_axes)

    def context(self):
        """Lower and compile under this: the chip's devices as jax's mesh."""
        if self.mesh is None:
            return contextlib.nullcontext()
        import jax
        return jax.set_mesh(self.mesh)

    def trace_context(self):
        """Run the user's function under this: the mesh's abstract form only. Pallas reads the
        chip from it (``get_tpu_info``), and raw PartitionSpecs resolve against it; but values
        the function computes eagerly (``jax.ensure_compile_time_eval()``) must land on this
        host, not on the mesh's TPU devices, which compile here and cannot run."""
        if self.mesh is None:
            return contextlib.nullcontext()
        import jax
        stack = contextlib.ExitStack()
        stack.enter_context(jax.set_mesh(None))  # no concrete mesh (context() set one)
        stack.enter_context(jax.sharding.use_abstract_mesh(self.mesh.abstract_mesh))
        return stack


def local_chip() -> Chip:
    """``local``: the chip of jax's default backend here (cpu, gpu, or the TPU attached)."""
    import jax

    platform = jax.default_backend()
    if platform == "cpu":
        return get_chip("cpu")
    if platform in ("gpu", "cuda", "rocm"):
        return get_chip("gpu")
    if platform == "tpu":
        kind = jax.devices()[0].device_kind
        chip = next((c for c in CHIPS if c.is_tpu and c.device_kind == kind), None)
        if chip is not None:
            return chip
        raise UsageError(f"the local TPU is a {kind!r}, which the chip table does not know (see `inspector chips`)")
    raise UsageError(f"jax's default backend here is {platform!r}, which the inspector cannot compile for: use cpu or a TPU target")


GOOGLE_PCI_VENDOR = "0x1ae0"


def attached_chip() -> Chip | None:
    """The TPU attached to this machine, read without opening it (another process may hold it)
    and without jax: the PCI bus (the chip table's device ids, as jax reads them at start-up), else
    the Cloud TPU VM's TPU_ACCELERATOR_TYPE (v5litepod-8, v6e-4). None where no TPU is attached or
    neither says which."""
    import glob
    import os

    from ..base.environment import tpu_attached

    if not tpu_attached():
        return None
    by_id = {c.pci_device_id: c for c in CHIPS if c.pci_device_id}
    for vendor in sorted(glob.glob("/sys/bus/pci/devices/*/vendor")):
        try:
            if open(vendor).read().strip() != GOOGLE_PCI_VENDOR:
                continue
            device = open(os.path.join(os.path.dirname(vendor), "device")).read().strip()
        except OSError:
            continue
        if device in by_id:
            return by_id[device]
    accelerator = os.environ.get("TPU_ACCELERATOR_TYPE", "").strip().lower()
    if accelerator:
        try:
            chip = get_chip(accelerator.rsplit("-", 1)[0])
        except UsageError:
            return None
        return chip if chip.is_tpu else None
    return None



def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")
