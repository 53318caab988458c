"""Third-party model kernels held out from the VMEM estimate's fitting (tests/data/heldout3; it was
issue 28's third round): twelve Pallas TPU kernels from sglang-jax, MaxText, MaxDiffusion and
RecurrentGemma that the inspector was not written against. Every verb on each entry, as a new user
runs them, is tests/test_corpus_heldout.py (this round's row there). Here, what the round found: the
collectives view of Pallas remote DMAs, a SparseCore program traced on the CPU, and the VMEM
estimate against libtpu's verdicts at production shapes (vmem_truth_heldout.json).

Defects other helpers are fixing are expected failures here (not strict: the test passes once
they land), each naming what is wrong; /work/notes/heldout3.md has the full table."""
from __future__ import annotations

import io
import json

import pytest

from conftest import DATA, HeldOut, errors, estimate_against_truth, render, shared_report
from inspector.base.chips import get_chip
from inspector.verbs.checking import run_check
from inspector.compilation.target import load_target
from inspector.views.printer import make_console

ROUND = HeldOut("heldout3")
CHECK_CHIPS = ["tpu-v5e", "tpu-v6e", "tpu-7x"]


def report(spec: str, chip: str):
    return shared_report(spec, chip)


# --------------------------------------------------------------------------- collectives done by a Pallas kernel

def test_collectives_view_names_pallas_remote_dmas():
    """A program whose only device-to-device traffic is a Pallas kernel's remote DMAs (a ring
    all-gather) has no XLA collective: the view must not say that nothing moves between devices."""
    from types import SimpleNamespace as NS

    from inspector.views.collectives import collectives_view, remote_dma_lines

    dma = lambda remote, per_step: NS(remote=remote, per_step=per_step, bytes=64 * 1024)
    ring = NS(call=NS(name="ring", steps=4, dmas=[dma(False, [1, 1]), dma(True, [0, 2]), dma(True, [1, 1])]))
    local = NS(call=NS(name="copy", steps=1, dmas=[dma(False, [1, 1])]))
    lines = remote_dma_lines([ring, local])
    assert lines == ["ring: up to 3 remote DMAs, 192 KiB per device per grid step, 768 KiB per call over 4 steps (--view pallas lists them)"]
    out = io.StringIO()
    make_console(out).print(collectives_view(NS(collectives=[], mesh={"x": 4}), remote=lines))
    assert "moves nothing" not in out.getvalue() and "remote DMAs" in out.getvalue() and "ring: up to 3" in out.getvalue()
    out = io.StringIO()
    make_console(out).print(collectives_view(NS(collectives=[], mesh={"x": 4}), remote=remote_dma_lines([local])))
    assert "moves nothing between devices" in out.getvalue()


@pytest.mark.libtpu
def test_ring_all_gather_collectives_on_a_slice():
    """MaxText's ring all-gather over the four chips of a v5e:2x2: six 64 KiB remote copies per
    device (three ring steps in two directions), shown by the pallas and collectives views."""
    r = report(ROUND.names["ring_gather"], "tpu-v5e:2x2")
    assert r.stages.compile_error is None and errors(r.findings) == []
    remote = [d for d in r.pallas[0].call.dmas if d.remote]
    assert len(remote) == 6 and {d.bytes for d in remote} == {64 * 1024}
    text = render(r, "collectives")
    assert "moves nothing" not in text and "up to 6 remote DMAs, 384 KiB per device" in text


# --------------------------------------------------------------------------- a kernel libtpu does not time

@pytest.mark.libtpu
@pytest.mark.slow
def test_a_kernel_simulated_to_zero_cycles_keeps_its_roofline():
    """sglang's fused MLP (emit_pipeline inside a pallas_call over HBM refs): on tpu-v6e libtpu's
    static simulation writes 0 cycles for it (on v5e it times it). No kernel runs in no time: the
    estimate is the roofline, marked so, with a finding, never "0 ns"."""
    from inspector.libtpu import LIBTPU, ROOFLINE, estimate_times

    target = load_target(ROUND.names["fused_mlp"])
    v6e = estimate_times(target, get_chip("tpu-v6e"), use_cache=False)
    kernel = v6e.kernel("fused_mlp.1")
    assert kernel.estimate_source == ROOFLINE and kernel.estimated_seconds == kernel.roofline_seconds > 0
    assert [f for f in v6e.findings if f.code == "libtpu-no-time" and "fused_mlp.1" in f.message]
    assert all(b.cycles_per_step is None for b in v6e.bundles if b.kernel == "fused_mlp.1")
    v5e = estimate_times(target, get_chip("tpu-v5e"), use_cache=False).kernel("fused_mlp.1")
    assert v5e.estimate_source == LIBTPU and v5e.estimated_seconds > 0


def test_a_sparse_core_program_on_the_cpu_is_traced_simulating_a_chip_with_sparse_cores():
    r = report("tests/data/heldout3/maxtext_gather_reduce_sc.py:gather_reduce", "cpu")
    [note] = [f for f in r.findings if f.code == "simulated-chip"]
    assert note.data == {"chip": "tpu-7x"} and r.stages.simulated_chip == "tpu-7x"
    assert "cannot lower SparseCore kernels" in r.stages.compile_error.interpreter_limit
    assert errors(r.findings) == []


@pytest.mark.libtpu
def test_a_kernel_that_raises_for_one_chip_is_that_chips_finding(cli_run):
    """MaxText's SparseCore kernel raises its own "SparseCore is not available" on v5e and a shape
    error on v6e (its default grouping gives a zero-sized dimension there): each is that chip's
    error finding, and TPU7x, where it traces, still gets its verdict. Raising on every chip is
    the code's error, one line as before."""
    spec = ROUND.names["gather_reduce"]
    result = run_check(load_target(spec), [get_chip(c) for c in CHECK_CHIPS], estimate_only=True)
    by_code = {f.code: f for f in result.findings if f.severity == "error"}
    assert set(by_code) == {"no-sparse-core", "raised-for-chip"}
    assert by_code["no-sparse-core"].data == {"chip": "tpu-v5e"} and by_code["raised-for-chip"].data == {"chip": "tpu-v6e"}
    assert "ValueError" in by_code["raised-for-chip"].message and len(by_code["raised-for-chip"].message) < 500
    assert [(t.chip, t.fits) for t in result.targets] == [("tpu-v5e", None), ("tpu-v6e", None), ("tpu-7x", True)]
    assert result.failed and result.undecided == []
    both = cli_run("check", spec, "--target", "tpu-v5e,tpu-v6e", "--estimate-only", "--json")
    assert both.returncode == 1, both.stderr
    assert sorted(f["code"] for f in json.loads(both.stdout)["findings"]) == ["no-sparse-core", "raised-for-chip"]
    every = cli_run("check", spec, "--target", "tpu-v6e,tpu-v5p", "--estimate-only")
    assert every.returncode == 1 and every.stdout == "" and len(every.stderr.strip().splitlines()) == 1, every.stderr

# --------------------------------------------------------------- a held-out measurement of the estimate

HELDOUT_TRUTH = DATA / "vmem_truth_heldout.json"
# What was measured on 2026-12-02 (BENCHMARKS.md, "Values built in their ref, unrolled values, and
# the margin", "TPU7x's placement in the estimate", "Placed operands on v5e and v6e", "Layout copies
# and summed softmaxes" and "Heads one at a time"): of the 147 rows about VMEM, 140 agree, 4
# undecided where libtpu fits, 3 undecided where it refuses (cross attention's VPU-summed heads
# decided by half of their straight-line scores), none where the estimate says "does not fit" and
# libtpu fits, none where it says "fits" and libtpu runs out (cross attention's twenty heads in
# VPU-sum mode on v5e were, until rule unrolled_dots left room for 0.8 of their matmul results).
# Before "Heads one at a time", 128 agreed and 16 were undecided where libtpu fits: the heads of
# cross attention in "mxu" mode were taken as 0.8 of all their scores live at once.
# A row where the estimate says "fits" and libtpu runs out would go here, explained in BENCHMARKS.md
# (and the test then asks for the list to shrink with its fix); a new one fails the test.
# Since rule matmul_lowering (issue 48) leaves room for a matmul lowering's lhs and partial sums,
# sglang's fused MLP at b_seq = b_inter = 256 on v6e and TPU7x (blocks of 30 MiB, a (256, 4096) bf16
# lhs) is undecided where it agreed: 139 agree, 5 undecided where libtpu fits. Since that room is
# bounded by the matmul's shapes (issue 56: the whole result's partial sums, ragged MQA's (q rows,
# block_size) scores among them), six rows of maxtext's ragged MQA that libtpu fits are undecided too:
# 133 agree, 11 undecided where libtpu fits.
KNOWN_SHORT: list[tuple] = []
AGREE_HELD_OUT = 133
UNDECIDED_FITS_HELD_OUT = 11
UNDECIDED_REFUSES_HELD_OUT = 3


def heldout_outcome() -> tuple[list[dict], dict[str, list], int]:
    """The VMEM rows of the held-out truth, each classified by the estimate recomputed now (agree,
    undecided by libtpu's verdict, short, false does-not-fit), and how many lie near a limit."""
    found = estimate_against_truth(HELDOUT_TRUTH.name)
    outcome: dict[str, list] = {"agree": [], "undecided, libtpu fits": [], "undecided, libtpu refuses": [],
                                "short": [], "false does-not-fit": []}
    near = 0
    for r, estimate, limit in found:
        row = (r["target"].rsplit(":", 1)[1], r["params"], r["chip"])
        if estimate == r["compiler_fits"]:
            outcome["agree"].append(row)
        elif estimate is None:
            outcome["undecided, libtpu fits" if r["compiler_fits"] else "undecided, libtpu refuses"].append(row)
        else:
            outcome["short" if estimate else "false does-not-fit"].append(row)
        near += bool(r["compiler_bytes"] and 0.75 * limit <= r["compiler_bytes"] <= 1.5 * limit)
    return [r for r, _, _ in found], outcome, near


@pytest.mark.slow
@pytest.mark.skipif(not HELDOUT_TRUTH.exists(), reason="run tests/data/make_vmem_truth.py --heldout")
def test_the_estimate_against_libtpu_on_held_out_kernels():
    """tests/data/vmem_truth_heldout.json (make_vmem_truth.py --heldout): libtpu's verdict on these
    kernels at production-like shapes that straddle the limits, on v5e, v6e and TPU7x. The
    estimate's shares (rule held_dot, UNROLLED_*_SHARE) were fitted on the corpus and the styles,
    not here: this is what they are worth on kernels they did not see, held at what was measured
    (BENCHMARKS.md) so that it cannot get worse unnoticed. The rows where the estimate says "does
    not fit" and libtpu fits: none; the short ones are exactly the known ones (none may be added)."""
    rows, outcome, near = heldout_outcome()
    # the set straddles the limits: many rows libtpu refuses, many near a limit on either side
    assert len(rows) >= 120 and sum(not r["compiler_fits"] for r in rows) >= 0.3 * len(rows)
    assert near >= 0.3 * len(rows), near
    assert outcome["false does-not-fit"] == [], outcome["false does-not-fit"]
    assert [row for row in outcome["short"] if row not in KNOWN_SHORT] == [], outcome["short"]
    # fewer known wrong rows than listed: the list must shrink with the fix that removed them
    assert len(outcome["short"]) == len(KNOWN_SHORT), outcome["short"]
    assert len(outcome["agree"]) >= AGREE_HELD_OUT, {k: len(v) for k, v in outcome.items()}
    assert len(outcome["undecided, libtpu fits"]) <= UNDECIDED_FITS_HELD_OUT, outcome["undecided, libtpu fits"]
    assert len(outcome["undecided, libtpu refuses"]) <= UNDECIDED_REFUSES_HELD_OUT, outcome["undecided, libtpu refuses"]
