"""Rank a kernel's parameter candidates per chip, without the chip: on a TPU by libtpu's estimated
time, on a GPU (h100, h200, a100) by the time floor of what XLA:GPU compiled.

    inspector tune samples/matmul.py:tiled --target tpu-v5e,tpu-v6e      # the command line (inspector/commands/tune.py)
    result = inspector.tuning.tune("samples/matmul.py:tiled", targets=["tpu-v5e"])   # the API (api.py)
    lookup("tuning.json", shape_key(a, b), "tpu-v5e")                    # a tuning table at run time

Nothing here imports jax at import time: the sweep's process only orchestrates; the workers
(``worker``/``pool``, or Ray tasks: ``ray_backend``) trace, compile and estimate (``evaluate``).
"""
from __future__ import annotations

from .api import tune
from .model import ChipRanking, ShapeResult, TuneResult, TuneRow
from .table import lookup, shape_key

__all__ = ["tune", "TuneResult", "TuneRow", "ChipRanking", "ShapeResult", "lookup", "shape_key"]
