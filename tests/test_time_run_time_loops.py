"""A Pallas kernel whose body loops a number of times known only when it runs (JAX's paged
attention walks each sequence's pages): neither libtpu's static simulation nor the roofline can
count the trips. On the
v5e it simulated the held-out paged attention at 25 us where the chip took 540 to 1,700 us; the
time view says so rather than showing the figure as if it held."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.libtpu


def test_a_kernel_that_loops_a_run_time_number_of_times_says_its_time_may_be_far_below_the_chips():
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs

    target = load_target("tests/bench/chip_heldout.py:paged_attention", sets=["pages_per_compute_block=16"])
    report = make_report(target, get_chip("tpu-v5e"), Needs(compile=True, fusions=True, pallas=True, time=True))
    (finding,) = [f for f in report.findings if f.code == "libtpu-loop-unknown"]
    assert finding.severity == "warning" and finding.kernel == "paged_attention.1" and finding.data["loops"] == 1
    assert "far below the chip's time" in finding.message


def test_a_kernel_whose_loops_are_counted_gets_no_such_warning():
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs

    report = make_report(load_target("samples/matmul.py:tiled"), get_chip("tpu-v5e"),
                         Needs(compile=True, fusions=True, pallas=True, time=True))
    assert report.time is not None and not [f for f in report.findings if f.code == "libtpu-loop-unknown"]


def test_tune_does_not_rank_candidates_by_a_figure_that_counts_the_loop_once(tmp_path, monkeypatch):
    """The held-out paged attention on the v5e: 25 us estimated for every pages_per_compute_block
    while the chip took 540 to 1,700 us; ranked by it, tune picked the slowest (3.2x). Such a row
    is untimed, saying why and that --measure ranks by the chip."""
    from inspector.tuning.evaluate import evaluate_task

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    row = evaluate_task({"spec": "tests/bench/chip_heldout.py:paged_attention", "args": None,
                         "params": {"pages_per_compute_block": 16}, "swept": {"pages_per_compute_block": 16},
                         "shape": "inputs", "chip": "tpu-v5e", "default": False, "budget": {"seconds": 60}, "cache": False})
    assert row["status"] == "untimed", row
    assert "loops a number of times known only when it runs" in row["reason"] and "--measure" in row["reason"]
