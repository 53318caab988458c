"""Compile HLO text with libtpu, deviceless, through its PJRT C API (``PJRT_Compile``, program
format "hlo"): jax's compile-only client takes StableHLO only, which cannot carry an optimized
module's tiled layouts and backend configs (``mhlo.fusion`` is refused), so an op cut out of a
compiled program (hlo/replay.py) is compiled here. Runs in the dump child (child.py), after jax
started libtpu there: the same library, its flags (the dump folders) already read.

The C API is a versioned ABI (xla/pjrt/c/pjrt_c_api.h): within major version 0 its function
table only grows at the end, so the positions below hold for every libtpu of that major.
"""
from __future__ import annotations

import ctypes as C
import dataclasses
import functools

from ..jax_internals.hlo_program import compile_inputs, tpu_library_path

API_MAJOR = 0
MIN_MINOR = 33  # PJRT_Compile and the topology functions at the positions below
# positions in PJRT_Api's function table (after struct_size, extension_start and the version)
_ERROR_DESTROY, _ERROR_MESSAGE = 0, 1
_EXECUTABLE_DESTROY = 40
_TOPOLOGY_CREATE, _TOPOLOGY_DESTROY = 82, 83
_COMPILE = 89
_TABLE_OFFSET = 40  # bytes: size_t struct_size, void* extension_start, PJRT_Api_Version (24 bytes)


@dataclasses.dataclass(frozen=True)
class ReplayRequest:
    """For the dump child: compile ``hlo`` (an op cut out of its program) for ``topology``."""

    hlo: str
    topology: str


class PjrtUnavailable(Exception):
    """libtpu's C API is not one this module knows; ``str`` says why."""


class _Args(C.Structure):
    """A PJRT argument struct: its own size first, then an extension pointer."""

    def __init__(self, *values):
        super().__init__(C.sizeof(self), None, *values)


def _args(*fields) -> type:
    return type("Args", (_Args,), {"_fields_": [("struct_size", C.c_size_t), ("extension_start", C.c_void_p), *fields]})


_ErrorMessage = _args(("error", C.c_void_p), ("message", C.c_void_p), ("message_size", C.c_size_t))
_Pointer = _args(("pointer", C.c_void_p))  # Error_Destroy, TopologyDescription_Destroy, Executable_Destroy
_TopologyCreate = _args(("name", C.c_char_p), ("name_size", C.c_size_t), ("options", C.c_void_p),
                        ("num_options", C.c_size_t), ("topology", C.c_void_p))
_Program = _args(("code", C.c_char_p), ("code_size", C.c_size_t), ("format", C.c_char_p), ("format_size", C.c_size_t))
_Compile = _args(("topology", C.c_void_p), ("program", C.c_void_p), ("options", C.c_char_p),
                 ("options_size", C.c_size_t), ("client", C.c_void_p), ("executable", C.c_void_p))


@functools.cache
def _api() -> "_Api":
    return _Api()


class _Api:
    def __init__(self) -> None:
        path = tpu_library_path()  # where jax itself finds libtpu
        if path is None:
            raise PjrtUnavailable("libtpu is not installed")
        library = C.CDLL(path)  # already loaded by jax in this process: the same instance
        library.GetPjrtApi.restype = C.c_void_p
        self.address = library.GetPjrtApi()
        major, minor = C.cast(self.address + 32, C.POINTER(C.c_int))[:2]
        if major != API_MAJOR or minor < MIN_MINOR:
            raise PjrtUnavailable(f"libtpu's PJRT C API is version {major}.{minor}; this reads {API_MAJOR}.{MIN_MINOR} or "
                                  f"a later {API_MAJOR}.x")

    def _function(self, index: int, result):
        pointer = C.cast(self.address + _TABLE_OFFSET + 8 * index, C.POINTER(C.c_void_p))[0]
        return C.CFUNCTYPE(result, C.c_void_p)(pointer)

    def call(self, index: int, args: _Args) -> None:
        error = self._function(index, C.c_void_p)(C.addressof(args))
        if error:
            message = _ErrorMessage(error, None, 0)
            self._function(_ERROR_MESSAGE, None)(C.addressof(message))
            text = C.string_at(message.message, message.message_size).decode(errors="replace")
            self._function(_ERROR_DESTROY, None)(C.addressof(_Pointer(error)))
            raise RuntimeError(text)


def compile_hlo(hlo_text: str, topology: str) -> None:
    """Compile ``hlo_text`` for ``topology`` (e.g. v5e:2x2) as its entry layout says, one device;
    what it is for is the dumps libtpu writes. Raises RuntimeError with XLA's message on failure."""
    api = _api()
    proto, serialized = compile_inputs(hlo_text)
    name = topology.encode()
    created = _TopologyCreate(name, len(name), None, 0, None)
    api.call(_TOPOLOGY_CREATE, created)
    try:
        program = _Program(proto, len(proto), b"hlo", 3)
        args = _Compile(created.topology, C.addressof(program), serialized, len(serialized), None, None)
        api.call(_COMPILE, args)
        api.call(_EXECUTABLE_DESTROY, _Pointer(args.executable))
    finally:
        api.call(_TOPOLOGY_DESTROY, _Pointer(created.topology))

