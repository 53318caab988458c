"""The accelerator families, one implementation of ``base.families.Family`` each: the layers above
ask ``family_of(chip)`` what a chip's family can do and how, never the chip's kind.

A new family is a folder here (its ``__init__`` a ``Family``), its key in ``FAMILIES`` (the chip
rows' ``kind``) and its chip rows in ``base/chips.py`` (docs/backends.md).
"""
from __future__ import annotations

from ..base.chips import Chip
from ..base.families import Family
from ..compilation.backends import Backend
from .gpu import GpuFamily
from .gpu_spec import GpuSpecFamily
from .local import LocalFamily
from .tpu import TpuFamily

FAMILIES: dict[str, Family] = {"tpu": TpuFamily(), "gpu": GpuFamily(), "local": LocalFamily()}
SPEC_ONLY: Family = GpuSpecFamily()  # a row XLA has no target config for (b200): budgets and the roofline


def family_of(chip: Chip) -> Family:
    """The family of ``chip`` (its row's ``kind``); a GPU row without a target config is spec only."""
    if chip.kind == "gpu" and not chip.target_config:
        return SPEC_ONLY
    return FAMILIES[chip.kind]


def backend_for(chip: Chip) -> Backend:
    """Where ``chip`` compiles: a ``Backend`` on its family's compile path."""
    return Backend(chip, family_of(chip).compile_path(chip))
