"""The team's row-reduction kernels (tests/data/row_reductions.py), written to test two claims of the
VMEM estimate before they were compiled. One: the results of all but the last of several reductions
along a block's rows wait whole in VMEM; refuted (four reductions kept 1.9 statistics on v6e and
TPU7x, not 3, and gave a false "does not fit" on TPU7x), and narrowed to the rule kept: one statistic
waits where there are several, none where there is one. Two: a value the body computes, which a
reduction must see whole before it is used whole, is kept whole; refuted at 128 lanes (nothing kept),
borne out in part wider (0.36-1.44 of it), so it is room a "fits" leaves. Both rounds found "fits"
where libtpu ran out under the rules before them. tests/data/vmem_truth_reductions.json holds
libtpu's verdicts on 165 compiles (make_vmem_truth.py --reductions); BENCHMARKS.md, "Row reductions"."""
from __future__ import annotations

import pytest

from conftest import assert_truth_outcome
from inspector.target import load_target

FILE = "tests/data/row_reductions.py"


def rows(kernel: str, block_rows: int, chip: str, dim: int = 128) -> tuple:
    return (kernel, f"f32[{2 * block_rows},{dim}]", {"block_rows": block_rows}, chip)


# Undecided, none wrong: each within the room a "fits" leaves for row statistics of its limit
# (v5e: 14.97 MiB fits, 20.73, 16.98, 16.28 and 19.04 ran out; v6e: 30.05 and 29.86 fit, 35.80 and
# 34.86 ran out). With room for no more statistics than each chip kept beside the waiting one
# (Chip.statistics_room: one on v6e and TPU7x, two on v5e) four-stats on v5e at 13.82 MiB and on
# TPU7x at 23.80 and 27.80, and the centred rows at 512 lanes on v6e at 30.06, fit, as libtpu says
UNDECIDED = [rows("mean_max", 6144, "tpu-v5e"), rows("mean_max", 12288, "tpu-v6e"),
             rows("four_stats", 6144, "tpu-v5e"), rows("four_stats", 12288, "tpu-v6e"),
             rows("wide_centred", 1792, "tpu-v5e", 512),
             rows("layer_norm_256", 3072, "tpu-v5e", 256), rows("layer_norm_256", 3584, "tpu-v5e", 256),
             rows("layer_norm_256", 6144, "tpu-v6e", 256), rows("layer_norm_256", 7168, "tpu-v6e", 256)]


def test_the_estimate_against_libtpu_on_the_row_reductions():
    assert_truth_outcome("vmem_truth_reductions.json", rows=165, refused=32, undecided=UNDECIDED, agree=156)


@pytest.mark.parametrize("kernel", ["one_max", "mean_max", "four_stats", "wide_centred", "layer_norm_256",
                                    "layer_norm_1024", "layer_norm_2048", "shifted_square", "shifted_square_1024",
                                    "centred_1024", "row_softmax_1024"])
def test_each_kernel_runs_on_the_cpu_and_matches_its_reference(kernel):
    from inspector.run import run_diff

    result = run_diff(load_target(f"{FILE}:{kernel}"), runs=0)
    assert result.ok and [o.ok for o in result.outputs] == [True], result
