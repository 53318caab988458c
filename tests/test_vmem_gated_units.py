"""The team's gated linear units (tests/data/gated_units.py), written to test one claim of the VMEM
estimate before they were compiled: where two matmul results meet in an element-wise op (SwiGLU's),
libtpu keeps at least 0.9 of one beyond the blocks. Borne out on v5e (1.00-1.20) and v6e
(1.44-2.19), not on TPU7x where the product feeds a third matmul (0.69-0.93), so the estimate
counted 0.6 of one as certain; with tests/data/second_values.py's 30 more compiles, 0.9 on v5e and
v6e (rule met_result). The control, whose
results are summed into scratch refs, kept nothing beyond its blocks and scratch on v5e and v6e.
tests/data/vmem_truth_gated.json holds libtpu's verdicts on 75 compiles (make_vmem_truth.py
--gated); BENCHMARKS.md, "Gated units"."""
from __future__ import annotations

import pytest

from conftest import assert_truth_outcome
from inspector.compilation.target import load_target

FILE = "tests/data/gated_units.py"


def unit(kernel: str, bm: int, bn: int, chip: str) -> tuple:
    """As make_vmem_truth.gated_args writes them: x (2 bm, 256), w1 and w3 (256, 2 bn), or for the
    down projection w1, w3 (256, bn) and w2 (bn, 256)."""
    dtype = "bf16" if kernel.endswith("bf16") else "f32"
    args = f"f32[{2 * bm},256] f32[256,{bn}] f32[256,{bn}] f32[{bn},256]" if kernel == "swiglu_down" else \
        f"{dtype}[{2 * bm},256] {dtype}[256,{2 * bn}] {dtype}[256,{2 * bn}]"
    return (kernel, args, {"block_m": bm, "block_n": bn}, chip)


# Undecided, none wrong: runs out where the certain share of a result leaves it under the limit
# (0.9 on v6e: SwiGLU at 2048 x 1024, 0.6 on TPU7x), fits on TPU7x and v6e within the room for both
# results
UNDECIDED = [unit("swiglu_f32", 1024, 2048, "tpu-7x"), unit("swiglu_f32", 2048, 1024, "tpu-v6e"),
             unit("swiglu_f32", 2048, 1024, "tpu-7x"), unit("swiglu_bf16", 2048, 2048, "tpu-7x"),
             unit("geglu_bf16", 2048, 2048, "tpu-7x"), unit("swiglu_down", 2048, 2048, "tpu-v6e"),
             unit("swiglu_down", 2048, 2048, "tpu-7x")]


def test_the_estimate_against_libtpu_on_the_gated_units():
    assert_truth_outcome("vmem_truth_gated.json", rows=75, refused=33, undecided=UNDECIDED, agree=68)


@pytest.mark.parametrize("kernel", ["swiglu_f32", "swiglu_bf16", "geglu_bf16", "swiglu_down", "swiglu_acc"])
def test_each_kernel_runs_on_the_cpu_and_matches_its_reference(kernel):
    from inspector.run import run_diff

    result = run_diff(load_target(f"{FILE}:{kernel}"), runs=0)
    assert result.ok and [o.ok for o in result.outputs] == [True], result
