"""Measurement: the shared memory XLA:GPU gives a Pallas-Triton matmul, deviceless, per chip, block
shape and ``num_stages`` (the thunk sequence's figure, or the compiler's RESOURCE_EXHAUSTED
refusal with its requested bytes), written to tests/data/gpu/triton_smem.json. The figures the
GPU family's shared-memory estimate is to be judged against (tests/test_gpu_family.py reads them).
Run: .venv/bin/python tests/bench/gpu_triton_smem.py   (about a second a compile)
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
OUT = ROOT / "tests/data/gpu/triton_smem.json"
BLOCKS = ((64, 64, 32), (128, 128, 64), (128, 256, 64), (256, 256, 128))
STAGES = (1, 2, 3, 4, 5)
CHIPS = ("h100", "a100", "h200")


def main() -> None:
    import inspector  # noqa: F401  (the environment the inspector's own processes run in)
    import jax

    from inspector.base.chips import get_chip
    from inspector.families.gpu.compile.deviceless import compile_deviceless
    from inspector.families.gpu.compile.errors import shared_memory_refusal
    from inspector.families.gpu.jax.target_configs import spec_text
    from inspector.families.gpu.kernels.thunks import kernels
    from test_gpu_family import BF16, M, _matmul

    warnings.simplefilter("ignore", DeprecationWarning)
    rows = []
    for chip in CHIPS:
        spec = spec_text(get_chip(chip).target_config)
        for bm, bn, bk in BLOCKS:
            for stages in STAGES:
                row = {"chip": chip, "bm": bm, "bn": bn, "bk": bk, "num_stages": stages, "num_warps": 8}
                try:
                    (kernel,) = kernels(compile_deviceless(_matmul(bm, bn, bk, stages), BF16, spec).thunk_sequence)
                    row.update(fits=True, shared_memory_bytes=kernel.shared_memory_bytes)
                except jax.errors.JaxRuntimeError as err:
                    refusal = shared_memory_refusal(str(err))
                    if refusal is None:
                        raise
                    row.update(fits=False, requested_bytes=refusal.requested_bytes, available_bytes=refusal.available_bytes)
                rows.append(row)
                print(row, flush=True)
    OUT.write_text(json.dumps({"what": f"bf16 Pallas-Triton matmul, M=N=K={M}, the K loop in the kernel "
                                       "(tests/test_gpu_family.py _matmul), compiled deviceless by XLA:GPU",
                               "jax": jax.__version__, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
