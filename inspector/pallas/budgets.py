"""A kernel's budget in the on-chip memory its chip row has: VMEM (vmem.py) or a GPU's shared
memory (gpu_smem.py, built on vmem's VmemBudget)."""
from __future__ import annotations

from ..base.chips import Chip
from ..base.pallas_model import PallasCall
from .gpu_smem import gpu_budget
from .vmem import VmemBudget, sparse_core_budget, tpu_budget


def budget(info: PallasCall, chip: Chip) -> VmemBudget | None:
    """The budget in the on-chip memory the chip row has: VMEM (a TPU's TensorCore or SparseCore),
    else a GPU's shared memory per block (a range: gpu_smem.py); None for a row with neither (the local backend)."""
    if chip.vmem_bytes is not None and (info.core_type or "").startswith("SparseCore"):
        return sparse_core_budget(info, chip)
    if chip.vmem_bytes is not None:
        return tpu_budget(info, chip)
    if chip.shared_mem_per_block and info.written_for != "mosaic_tpu":  # a TPU kernel never runs from shared memory
        return gpu_budget(info, chip)
    return None
