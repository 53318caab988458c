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
import re

# any TPU topology: the default layouts did not differ between generations (see above)
_TOPOLOGY = "v5e:2x2"


@functools.cache
def _client():
    from .aot import start_backend

    device = start_backend(_TOPOLOGY).devices[0]
    return device.client, device


@functools.cache
def row_major_by_default(shape: tuple[int, ...], dtype: str) -> bool | None:
    """Whether a TPU stores an array of this shape and dtype row-major by default (dims of size 1
    aside); None where libtpu cannot say (not installed, or a dtype it does not lay out)."""
    if len(shape) < 2:
        return True
    try:
        import numpy as np

        client, device = _client()
        text = str(client.get_default_layout(np.dtype(dtype), shape, device))  # "{1,2,0:T(8,128)}"
    except Exception:  # no libtpu, or one without this API: the origin stays as the program says
        return None
    match = re.match(r"\{([\d,]*)[:}]", text)
    if match is None:  # a layout written another way: not read, not guessed
        return None
    # dims of size 1 may sit anywhere: the bytes are laid out the same (a bitcast in XLA)
    order = [int(d) for d in match.group(1).split(",") if shape[int(d)] != 1]
    return order == sorted(order, reverse=True)


def copied_for_a_kernel(aval) -> bool:
    """Whether XLA copies this argument (or returned value) between its default layout and a
    kernel's row-major one: a copy it can place in VMEM."""
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return False
    return row_major_by_default(tuple(int(d) for d in shape), str(dtype)) is False
