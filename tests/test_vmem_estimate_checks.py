"""New shapes of kernels on record, on a grid around the limits, compiled to check the VMEM rules of
2026-12-03 (a softmax stored whole is held beside its output block, the row statistics each chip
keeps, TPU7x placing the smallest operands first): the estimate's verdicts were written down before
libtpu's were known (BENCHMARKS.md). tests/data/vmem_truth_checks.json holds libtpu's verdicts on
the 30 compiles (make_vmem_truth.py --checks)."""
from conftest import assert_truth_outcome

# predicted before compiling: 28 agree, 2 undecided, none wrong. The statistics each chip surely
# keeps beside the waiting one where three or more reductions along 128-lane rows make them
# (rule waiting_statistics) were read from the rows on record afterwards; they decide four-stats at
# 5120 rows on v5e (over: libtpu 17.31 MiB of 16). Left undecided: the log-softmax of scores at
# 640 rows on v6e, 31.40 MiB certain of 32 where libtpu needs 32.65; and, since a matmul's spill is
# bounded by its shapes (issue 56), SSD at (2048, 1024, 512) on TPU7x, which libtpu fits in 26.03 MiB
UNDECIDED = [("scores_log_softmax", "bf16[1280,256] bf16[256,4096]", {"block_m": 640}, "tpu-v6e"),
             ("ssd_intra_chunk_pallas_tpu", "f32[1,4096] f32[1,4096] f32[1,4096,512] f32[1,4096,512] f32[1,4096,1024]",
              {"query_block_size": 2048, "key_block_size": 1024, "value_block_size": 512}, "tpu-7x")]


def test_the_estimate_against_libtpu_on_new_shapes():
    assert_truth_outcome("vmem_truth_checks.json", rows=30, refused=12, undecided=UNDECIDED, agree=28)
