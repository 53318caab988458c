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
from ..base.errors import UsageError
from ..base.families import CompilePath
from .compile_paths import own_path


class Backend:
    """Places abstract inputs on the chip and provides the context to trace and lower under."""

    def __init__(self, chip: Chip, path: CompilePath | None = None):
        """``path``: how to compile for ``chip`` (its family's, ``family_of(chip).compile_path``);
        without one, the path the chip row names (``compile_paths.own_path``)."""
        self.chip = chip
        self.path: CompilePath = path if path is not None else own_path(chip)
        why = self.path.available()
        if why is not None:
            raise UsageError(why)
        self.mesh = self.path.mesh()
        self.mesh_axes: dict[str, int] | None = None  # set when the program is sharded (with_mesh)
        if chip.devices > 1:
            self._set_mesh({"devices": chip.devices})

    @property
    def platform(self) -> str:
        return self.path.platform

    @property
    def device_kind(self) -> str:
        if self.mesh is not None:
            return self.mesh.devices.flat[0].device_kind
        import jax
        return jax.devices(self.platform)[0].device_kind

    @property
    def devices(self) -> int:
        return self.path.device_count()

    def _set_mesh(self, axes: dict[str, int]) -> None:
        from .sharding import device_mesh, fit_mesh

        sizes = fit_mesh(axes, self.devices, self.chip.name)
        one_chip = self.mesh is not None and self.chip.devices == 1  # a deviceless topology's one chip (__init__)
        devices = tuple(self.mesh.devices.flat) if one_chip else self.path.devices()
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


# jax's default backends that are a local chip row, by name (jax calls a GPU "gpu", "cuda" or "rocm")
LOCAL_CHIP_ROWS = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu"}


def local_chip() -> Chip:
    """``local``: the chip of jax's default backend here (cpu, gpu, or the TPU attached)."""
    import jax

    platform = jax.default_backend()
    if platform in LOCAL_CHIP_ROWS:
        return get_chip(LOCAL_CHIP_ROWS[platform])
    kind = jax.devices()[0].device_kind
    chip = next((c for c in CHIPS if c.device_kind is not None and c.device_kind == kind), None)
    if chip is not None:
        return chip
    if kind.startswith("TPU"):
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
        return chip if chip.pci_device_id in by_id else None  # a TPU row
    return None



def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")
