"""The team's row-statistics kernels (tests/data/row_statistics.py), written to test two claims of the
VMEM estimate before they were compiled: that one (rows, 1) statistic is certain where such values
are the body's largest (refuted as it stood: the RMSNorm, one reduction, kept none beyond its blocks,
and the claim gave two false "does not fit"; kept where several reductions make them:
test_vmem_row_reductions.py), and that a "fits" must leave room for them (borne out: the centred kernel
kept 2-2.9 of them and said "fits" at 15 of 16 and 30 of 32 MiB where libtpu needed 20.61 and 35.96).
tests/data/vmem_truth_statistics.json holds libtpu's verdicts on 42 compiles (make_vmem_truth.py
--statistics); BENCHMARKS.md, "Row statistics"."""
from __future__ import annotations

import pytest

from conftest import assert_truth_outcome
from inspector.compilation.target import load_target

FILE = "tests/data/row_statistics.py"


def norm(kernel: str, rows: int, chip: str) -> tuple:
    args = f"f32[{2 * rows},128]" + (" f32[1,128]" if kernel == "rms_norm" else "")
    return (kernel, args, {"block_rows": rows}, chip)


def attention(block_q: int, kv: int, chip: str) -> tuple:
    return ("online_softmax", f"bf16[{2 * block_q},128] bf16[{kv},128] bf16[{kv},128]", {"block_q": block_q, "chunk": 128}, chip)


# Undecided, none wrong (the RMSNorm's one reduction leaves no statistic waiting: its rows decide):
# - no longer the centred kernel: on TPU7x, where it fits in 27.96 of 32, room for one statistic more
#   (as TPU7x kept: rule row_statistics's most) rather than 0.3 of its six decides it; where it runs out
#   (20.61 MiB of 16 on v5e, 35.96 of 32 on v6e) the statistics its three reductions keep beside the
#   waiting one (rule waiting_statistics) are certain: over;
# - the online softmax where its blocks, carries and scores fit but libtpu runs out on v5e and v6e
#   (17.60, 32.88, 35.88 MiB), and where it fits on TPU7x (30.87 of 32).
UNDECIDED = [attention(4096, 2048, "tpu-v5e"), attention(8192, 2048, "tpu-v6e"), attention(8192, 2048, "tpu-7x"),
             attention(8192, 8192, "tpu-v6e"), attention(8192, 8192, "tpu-7x")]


def test_the_estimate_against_libtpu_on_the_row_statistics():
    assert_truth_outcome("vmem_truth_statistics.json", rows=42, refused=16, undecided=UNDECIDED, agree=37)


@pytest.mark.parametrize("kernel", ["rms_norm", "centred", "online_softmax"])
def test_each_kernel_runs_on_the_cpu_and_matches_its_reference(kernel):
    from inspector.run import run_diff

    result = run_diff(load_target(f"{FILE}:{kernel}"), runs=0)
    assert result.ok and [o.ok for o in result.outputs] == [True], result
