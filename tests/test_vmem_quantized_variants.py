"""Rule matmul_lowering (what a matmul's lowering may spill) on kernels it was not read from
(issue 48): quantized matmuls in six other styles and dtypes (int8 and fp8 weights against bf16,
int8 x int8, f32 against a bf16 weight, a weight in (out, in) layout) and megablox's gmm, gmm with
a transposed rhs, f32 gmm and tgmm at other tilings (tests/data/quantized_variants.py), 111 shapes
chosen by their blocks' bytes alone. tests/data/vmem_predictions_variants.json holds the estimate's
verdicts, written and committed before any of them was compiled (make_vmem_truth.py
--predict-variants); tests/data/vmem_truth_variants.json libtpu's on v5e, v5p, v6e and TPU7x
(make_vmem_truth.py --variants).
"""
from __future__ import annotations

import collections
import json

import pytest

from conftest import DATA, truth_outcome
from inspector.compilation.target import load_target

FILE = "tests/data/quantized_variants.py"
TRUTH = "vmem_truth_variants.json"


def _key(r: dict) -> tuple:
    return r["target"], r["args"], json.dumps(r["params"], sort_keys=True), r["chip"]


def test_the_predictions_made_before_compiling_were_never_wrong():
    """Each verdict written before the compiles against libtpu's: none says "fits" where libtpu runs
    out, none "does not fit" where it fits; how many were undecided, per chip, held."""
    predicted = json.loads((DATA / "vmem_predictions_variants.json").read_text())["rows"]
    truth = {_key(r): r for r in json.loads((DATA / TRUTH).read_text())["rows"]}
    kinds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for p in predicted:
        real = truth[_key(p)]
        if not (real["compiler_fits"] or "VMEM" in (real["compiler_message"] or "")):
            kinds[p["chip"]]["not about VMEM"] += 1  # libtpu refused it for another reason
            continue
        kind = "undecided" if p["predicted"] == "undecided" else \
            "agree" if (p["predicted"] == "fits") == real["compiler_fits"] else "wrong"
        kinds[p["chip"]][kind] += 1
    assert {chip: dict(c) for chip, c in kinds.items()} == PREDICTED_KINDS


def test_the_estimate_against_libtpu_on_the_variants():
    """Recomputed now: no "does not fit" where libtpu fits, no "fits" where it runs out; the counts held."""
    rows, outcome = truth_outcome(TRUTH)
    assert outcome["false error"] == [] and outcome["short"] == [], outcome
    assert {k: len(v) for k, v in outcome.items()} == AGREEMENT


PREDICTED_KINDS: dict = {}
AGREEMENT: dict = {}


@pytest.mark.parametrize("kernel", ["w8_out", "w8_dequant", "fp8_weight", "int8_int8", "f32_bf16", "wt_bf16",
                                    "gmm", "gmm_t", "gmm_f32", "tgmm"])
def test_each_kernel_runs_on_the_cpu_and_matches_its_reference(kernel):
    from inspector.run import run_diff

    result = run_diff(load_target(f"{FILE}:{kernel}"), runs=0)
    assert result.ok and [o.ok for o in result.outputs] == [True], result
