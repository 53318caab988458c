"""HLO text as jaxlib's compile inputs, for a compile outside jax (libtpu/pjrt.py): the module as
a serialized HloModuleProto and the compile options that keep its entry layout, and where jax
finds libtpu. Private jaxlib API (``jax._src``), read here only."""
from __future__ import annotations


def tpu_library_path() -> str | None:
    """The libtpu jax loads (TPU_LIBRARY_PATH, else the libtpu package's), or None."""
    from jax._src import cloud_tpu_init

    return cloud_tpu_init.get_tpu_library_path()


def entry_shapes(hlo_text: str) -> tuple[list[str], str]:
    """The entry computation's parameter shapes and result shape, with their layouts, as text."""
    shape = _program_shape(_module_proto(hlo_text))
    return [str(s) for s in shape.parameter_shapes()], str(shape.result_shape())


def compile_inputs(hlo_text: str) -> tuple[bytes, bytes]:
    """(serialized HloModuleProto, serialized CompileOptions) for one device, the parameters and
    result laid out as the module's entry says (else PJRT lays them out anew)."""
    from jax._src.lib import xla_client as xc

    proto = _module_proto(hlo_text)
    shape = _program_shape(proto)
    options = xc.CompileOptions()
    options.argument_layouts = shape.parameter_shapes()
    options.executable_build_options.result_layout = shape.result_shape()
    options.executable_build_options.num_replicas = options.executable_build_options.num_partitions = 1
    return proto, options.SerializeAsString()


def _module_proto(hlo_text: str) -> bytes:
    from jax._src.lib import xla_client as xc

    return xc.hlo.hlo_module_from_text(hlo_text).as_serialized_hlo_module_proto()


def _program_shape(proto: bytes):
    from jax._src.lib import xla_client as xc

    return xc.XlaComputation(proto).program_shape()
