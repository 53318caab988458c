"""The diff's inputs: seeded arrays for every input, and a memory check before any is made."""
from __future__ import annotations

import os

import numpy as np

from ..compilation.target_inputs import make_inputs as make_inputs  # the diff's seeded inputs: the same as a measurement's
from ..base.units import fmt_bytes

# Bytes held per byte of input/output: the array itself, the host copy it is made from, the
# interpreter's simulated HBM copy; per element of the largest output the comparison's float64
# working arrays (both sides, the error, the relative error, masks).
INPUT_FACTOR, OUTPUT_FACTOR, COMPARE_BYTES_PER_ELEMENT = 3, 3, 48


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable, else free physical pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _bytes(tree) -> tuple[int, int]:
    """(total bytes, elements of the largest leaf) of the array-like leaves of a pytree."""
    import jax

    total, largest = 0, 0
    for leaf in jax.tree.leaves(tree):
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            n = int(np.prod(leaf.shape, dtype=np.int64))
            total += n * np.dtype(leaf.dtype).itemsize
            largest = max(largest, n)
    return total, largest


def memory_needed(inputs, kernel_outputs, reference_outputs) -> int:
    """An estimate of the bytes a diff holds at its peak (abstract trees: ShapeDtypeStructs)."""
    in_bytes, _ = _bytes(inputs)
    k_bytes, k_largest = _bytes(kernel_outputs)
    r_bytes, r_largest = _bytes(reference_outputs)
    return INPUT_FACTOR * in_bytes + OUTPUT_FACTOR * k_bytes + r_bytes + COMPARE_BYTES_PER_ELEMENT * max(k_largest, r_largest)


def check_memory(needed: int, available: int | None) -> None:
    """Raise (a usage error: one line, exit 2) when the diff would not fit in memory."""
    if available is not None and needed > available:
        raise ValueError(f"these inputs and outputs need about {fmt_bytes(needed)}; this machine has {fmt_bytes(available)} "
                         "available: give smaller shapes with --args")
