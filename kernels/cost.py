"""What the kernels tell XLA through ``pl.CostEstimate``: flops of their matmuls, transcendentals
(exp, log), and the HBM bytes their BlockSpecs move, counted the way Pallas TPU iterates the grid
(row-major, last axis fastest): a block is fetched again only when its index differs from the
previous step's, and an output block is written back when its index changes."""
from __future__ import annotations

import math

import numpy as np


def nbytes(shape, dtype) -> int:
    """Bytes of one block (squeezed dims given as 1 or left out)."""
    return int(math.prod(shape)) * np.dtype(dtype).itemsize


def transfers(indices) -> int:
    """Fetches (or write-backs) of a block whose index, step after step, is ``indices`` (one
    row per grid step, or a flat sequence for one varying component): runs of an unchanged index."""
    a = np.asarray(indices)
    if a.size == 0:
        return 0
    a = a.reshape(len(a), -1)
    return 1 + int(np.any(a[1:] != a[:-1], axis=1).sum())
