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


@pytest.mark.parametrize("name", make_vmem_estimates.truth_files())
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

    from inspector.pallas import vmem

    tpu_budget = vmem.tpu_budget
    monkeypatch.setattr(vmem, "tpu_budget", lambda info, chip: dataclasses.replace(
        tpu_budget(info, chip), total_bytes=tpu_budget(info, chip).total_bytes + 1))
    name = "vmem_truth_checks.json"
    now = make_vmem_estimates.estimates(name, _CALLS)
    assert [n["budgets"] for n in now] != [b["budgets"] for b in RECORDED[name]]
