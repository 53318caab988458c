"""The layout a TPU gives an array the program takes or returns, asked of libtpu (no compile).

A Mosaic kernel takes its operands row-major. An argument whose default TPU layout is not (a
(B, S, 64) array is stored with S minor: `{1,2,0:T(8,128)}`, which wastes no lanes) is copied
into the kernel's layout first, and a returned output copied back after it; XLA can write such a
copy straight into VMEM (`S(1)`), outside the kernel's scoped limit (measured with libtpu
0.0.42.1 on v5e: a (2, 16384, 64) f32 copy kernel, 32 MiB of blocks by the kernel's own layout
against a 16 MiB limit, compiled with 0 B of scoped VMEM, its input and output placed whole).
The choice is libtpu's own (`get_default_layout` of the compile-only client) rather than a rule
written here: it weighs every dimension and tile size, and it was the same on v4, v5e, v5p, v6e
and TPU7x for 800 shapes and dtypes (tests/test_tpu_layout.py)."""
from __future__ import annotations

import functools
import math
import re

from ..base.chips import DEFAULT_TPU, get_chip


@functools.cache
def _client():
    from .aot import start_backend

    # any TPU's topology: the default layouts did not differ between generations (see above)
    topology = get_chip(DEFAULT_TPU).topology
    assert topology is not None  # a TPU's (chips.py)
    device = start_backend(topology).devices[0]
    return device.client, device


def _signature(shape: tuple[int, ...], minor_to_major: list[int]) -> tuple:
    """The order of the dims larger than 1, minor first: what decides the bytes' order in memory
    (a dim of size 1 sits anywhere: T(1,128) tiles over it, as TPUs lay out (1, T, 1, 128), are
    (T, 128) rows one after another)."""
    return tuple(shape[d] for d in minor_to_major if shape[d] != 1)


def row_major_signature(shape: tuple[int, ...]) -> tuple:
    """The signature of a kernel's operand: Mosaic takes it row-major."""
    return _signature(shape, list(reversed(range(len(shape)))))


class DefaultLayout(tuple):
    """A default layout's signature (a tuple, as _signature gives it) and the rows of its tile
    (8 x packing for a (8, 128) tile, 1 for T(1,128)): the two decide its bytes."""
    tile_rows: int | None = None

    def __new__(cls, dims: tuple, tile_rows: int | None):
        layout = super().__new__(cls, dims)
        layout.tile_rows = tile_rows
        return layout


@functools.cache
def default_signature(shape: tuple[int, ...], dtype: str) -> tuple | None:
    """The signature of the layout a TPU gives an array of this shape and dtype by default, with its
    tile's rows (DefaultLayout); None where libtpu cannot say (not installed, or a dtype it does not
    lay out)."""
    if len(shape) < 2:
        return row_major_signature(shape)
    try:
        import numpy as np

        client, device = _client()
        text = str(client.get_default_layout(np.dtype(dtype), shape, device))  # "{1,2,0:T(8,128)}"
    except Exception:  # no libtpu, or one without this API: the origin stays as the program says
        return None
    match = re.match(r"\{([\d,]*)[:}]", text)
    if match is None:  # a layout written another way: not read, not guessed
        return None
    tile = re.search(r"T\((\d+),\d+\)(?:\((\d+),1\))?", text)  # T(8,128)(2,1): 8 rows of 2 packed
    rows = int(tile.group(1)) * int(tile.group(2) or 1) if tile else None
    return DefaultLayout(_signature(shape, [int(d) for d in match.group(1).split(",")]), rows)


def signature_of(aval) -> tuple | None:
    """The default layout's signature of an argument or result of the program."""
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return None
    return default_signature(tuple(int(d) for d in shape), str(dtype))


def tiled_signature(signature: tuple, bits: int) -> tuple:
    """A signature with every dim beyond the second-minor merged into it where the second-minor
    fills whole (8 x packing, 128) tiles: those dims are then tiles one after another, the same
    bytes either way (gdn2's (1, 512, 1, 4096) bf16 inputs, reshaped to (1, 1, 2, 256, 4096) for
    the kernel: a bitcast in the optimized HLO, the arguments handed over in HBM)."""
    rows = 8 * max(1, 32 // bits)
    if len(signature) > 2 and signature[1] % rows == 0:
        return signature[0], math.prod(signature[1:])
    return tuple(signature)


def copied_for_a_kernel(signature, aval) -> bool:
    """Whether XLA copies between an array of the program (its default layout's ``signature``,
    reached through views only) and a kernel operand of ``aval`` (row-major): a copy it can place
    in VMEM. A (1, 2, 1, 128) kernel result is tiled over its 1, the TPU's layout of it over its
    2: copied (Pallas-Unbound's flash decoding); (1024, 1, 8192) is the kernel's (1024, 8192) with
    a dim of size 1 added, and fused recurrent GLA's (1, T, 1, 128) inputs its (1, 1, T, 128): bitcasts."""
    shape = getattr(aval, "shape", None)
    if not isinstance(signature, tuple) or shape is None:
        return False
    shape = tuple(int(d) for d in shape)
    # a kernel operand whose second-minor dim is 1 pads it to a tile's rows, which the TPU's own
    # layout of the array (tiled over its dims larger than 1) does not
    padded = len(shape) >= 2 and shape[-2] == 1 and sum(d != 1 for d in shape) > 1
    bits = 8 * getattr(getattr(aval, "dtype", None), "itemsize", 4)
    # a kernel tiles its operand (8 x packing, 128); a layout tiled otherwise (T(1,128): f32 (1, 512,
    # 1, 1536) as GDN-2's inputs come) holds other bytes, unless one tile spans the lanes
    rows = getattr(signature, "tile_rows", None)
    retiled = rows is not None and rows != 8 * max(1, 32 // bits) and bool(signature) and signature[0] > 128
    return padded or retiled or tiled_signature(signature, bits) != tiled_signature(row_major_signature(shape), bits)
