"""The VMEM estimate on every kernel on record is what it was: each row of the truth files
(tests/data/vmem_truth*.json), recomputed now, gives the verdict and the bytes recorded in
tests/data/vmem_estimates.json (tests/data/make_vmem_estimates.py). A change to the rules that
moves one shows here, with the rows it moves; one meant to move them records them again."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import DATA

sys.path.insert(0, str(DATA))
import make_vmem_estimates  # noqa: E402

RECORDED = json.loads(make_vmem_estimates.OUT.read_text())
_CALLS: dict = {}  # traced kernels, shared across the truth files


def test_every_truth_file_is_recorded():
    assert sorted(RECORDED) == make_vmem_estimates.truth_files()


# Each truth file its own unit of work under pytest-xdist (the longest take minutes: one worker
# would run them all while the other waits); a kernel two files share is traced on each worker.
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xdist_group(f"vmem-estimates-{name}"))
                                  for name in make_vmem_estimates.truth_files()])
def test_estimate_unchanged_on_truth_rows(name):
    now = make_vmem_estimates.estimates(name, _CALLS)
    before = RECORDED[name]
    assert len(now) == len(before)
    moved = [(b["target"], b["params"], b["chip"], b["fits"], n["fits"]) for b, n in zip(before, now) if b["fits"] != n["fits"]]
    assert moved == [], f"verdicts moved (target, params, chip, before, now): {moved[:10]}"
    changed = [(b["target"], b["params"], b["chip"]) for b, n in zip(before, now) if b != n]
    assert changed == [], f"bytes moved on {len(changed)} rows, the first: {changed[:5]}"


def test_the_comparison_sees_a_moved_byte(monkeypatch):
    """A rule that adds one byte to every TPU budget moves the recorded figures: the test above can fail."""
    import dataclasses

    from inspector.pallas import budgets

    tpu_budget = budgets.tpu_budget
    monkeypatch.setattr(budgets, "tpu_budget", lambda info, chip: dataclasses.replace(
        tpu_budget(info, chip), total_bytes=tpu_budget(info, chip).total_bytes + 1))
    name = "vmem_truth_checks.json"
    now = make_vmem_estimates.estimates(name, _CALLS)
    assert [n["budgets"] for n in now] != [b["budgets"] for b in RECORDED[name]]


def counts_on_record() -> dict[str, int]:
    """Over every truth file, per conftest.TRUTH_KINDS, how many rows the recorded estimate's verdict
    gives that kind against libtpu's (rows libtpu refused for another reason than VMEM left out)."""
    from conftest import TRUTH_KINDS, truth_kind

    counts = dict.fromkeys(TRUTH_KINDS, 0)
    for name in make_vmem_estimates.truth_files():
        truth = json.loads((DATA / name).read_text())["rows"]
        for r, e in zip(truth, RECORDED[name], strict=True):
            if r["compiler_fits"] or "VMEM" in (r["compiler_message"] or ""):
                counts[truth_kind(e["fits"], r["compiler_fits"])] += 1
    return counts


def test_readme_and_docs_quote_the_counts_on_record():
    """README's and docs/vmem.md's figures of agreement are the truth files' (as recorded, and the
    test above holds the record to the rules): no claim beyond them."""
    from conftest import ROOT

    c = counts_on_record()
    total = sum(c.values())
    assert c["short"] == c["false error"] == 0, c  # what "none wrong on record" claims
    said = f"{c['agree']:,} of the {total:,} compiles on record ({100 * c['agree'] / total:.1f}%)"
    for page in ("README.md", "docs/vmem.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert said in text, (page, said)
        assert f"{c['undecided']:,} undecided" in text, (page, c)
    files = len(make_vmem_estimates.truth_files())
    assert f"{files} files" in " ".join((ROOT / "docs/vmem.md").read_text().split())


def test_every_recorded_verdict_follows_from_its_figures():
    """A "does not fit" only where what is certain (the total less its unsure terms) is over the
    limit; a "fits" only where the total, every unsure term at its most, is within it."""
    for name, rows in RECORDED.items():
        for r in rows:
            for b in r["budgets"]:
                certain = b["total"] - b["body"] - b["spill"] - b["outside"] + b["held"]
                if b["verdict"] == "over":
                    assert certain > b["limit"], (name, r["target"], r["params"], r["chip"])
                if b["verdict"] == "fits":
                    assert b["total"] <= b["limit"], (name, r["target"], r["params"], r["chip"])
