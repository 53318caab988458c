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
    from inspector.report import make_report
    from inspector.view_table import Needs

    target = load_target("tests/bench/chip_heldout.py:paged_attention", sets=["pages_per_compute_block=16"])
    report = make_report(target, get_chip("tpu-v5e"), Needs(compile=True, fusions=True, pallas=True, time=True))
    (finding,) = [f for f in report.findings if f.code == "libtpu-loop-unknown"]
    assert finding.severity == "warning" and finding.kernel == "paged_attention.1" and finding.data["loops"] == 1
    assert "far below the chip's time" in finding.message


def test_a_kernel_whose_loops_are_counted_gets_no_such_warning():
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.report import make_report
    from inspector.view_table import Needs

    report = make_report(load_target("samples/matmul.py:tiled"), get_chip("tpu-v5e"),
                         Needs(compile=True, fusions=True, pallas=True, time=True))
    assert report.time is not None and not [f for f in report.findings if f.code == "libtpu-loop-unknown"]
