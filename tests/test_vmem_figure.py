"""One VMEM figure per kernel, the same wherever it is quoted, and a verdict monotone in it (issue
64): the estimate is a range, what the kernel surely holds to the total with every unsure term at
its most; "fits" where the top is within the limit, "does not fit" where the bottom is over it,
"unsure" between. The sweep once showed 19.25 MiB "NO" beside 20.12 MiB "unsure" (the figure was
the top, the verdict the bottom's), and two findings quoted 22.25 and 23.5 MiB as the estimate."""
import pytest

from inspector.base.units import fmt_bytes_range

FLASH = "samples/attention.py:flash"


def test_a_range_is_one_unit_where_it_can_be():
    assert fmt_bytes_range(22.25 * 2**20, 23.5 * 2**20) == "22.25-23.5 MiB"
    assert fmt_bytes_range(900 * 2**10, 2**20) == "900 KiB-1 MiB"
    assert fmt_bytes_range(3 * 2**20, 3 * 2**20) == "3 MiB" and fmt_bytes_range(None, 2**20) == "1 MiB"


def test_the_sweeps_verdicts_are_monotone_in_its_figures():
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.pallas.sweep import sweep

    rows = sweep(load_target(FLASH, params={"block_q": 4096}), [get_chip("tpu-v5e")])
    limit = 16 * 2**20
    seen = set()
    for r in rows:
        low, high, fits = r.certain["tpu-v5e"], r.needs["tpu-v5e"], r.fits["tpu-v5e"]
        assert low <= high
        assert fits is (True if high <= limit else False if low > limit else None) or (fits is None and high <= limit), r
        seen.add(fits)
    assert seen == {True, False, None}  # the sweep holds each verdict: the check above is not empty


@pytest.mark.libtpu
def test_the_findings_quote_the_table_figure(cli):
    code, out, err = cli("check", FLASH, "--target", "tpu-v5e", "--set", "block_q=4096")
    assert code == 1, err
    table_row = next(line for line in out.splitlines() if line.strip().startswith("tpu-v5e"))
    figure = table_row.split()[1] + " " + table_row.split()[2]
    flat = " ".join(out.split())
    assert figure == "22.25-23.5 MiB" and f"the inspector's estimate: {figure} of 16 MiB" in flat
    assert "needs at least 22.25 MiB" in flat and "(23.50 MiB with the unsure terms)" in flat
