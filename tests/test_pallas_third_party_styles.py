"""Kernels in the styles of third-party TPU kernels (tests/data/third_party_styles.py): traced and
compiled for TPUs without false findings, their VMEM estimate never a "does not fit" that libtpu
contradicts, and a libtpu abort on one chip that leaves the other chips' verdicts standing."""
import dataclasses

import pytest

from conftest import DATA, truth_outcome

from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.pallas.analysis import analyse_pallas
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

STYLES = str(DATA / "third_party_styles.py")
MiB = 2**20
V5E, V5P, V6E, TPU7X = (get_chip(c) for c in ("tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x"))


def target(name: str, **params):
    t = load_target(f"{STYLES}:{name}")
    return dataclasses.replace(t, params=dict(t.params, **params)) if params else t


def analysed(name: str, chips=(V5E,), **params):
    """The Pallas reports of a target traced on the CPU, budgeted and ruled on ``chips``."""
    program = capture(target(name, **params), Backend(get_chip("cpu")), compile=False).program
    reports, unread = analyse_pallas(program, list(chips), list(chips))
    assert unread == []
    return reports


def codes(reports) -> set[str]:
    return {f.code for r in reports for f in r.findings}


# --------------------------------------------------------------- jax.ensure_compile_time_eval

@pytest.mark.libtpu
def test_values_computed_at_trace_time_do_not_run_on_the_deviceless_tpu():
    """The wrapper computes its block map eagerly under jax.ensure_compile_time_eval(); traced for
    a TPU target that map must be computed here, not dispatched to the topology's devices (which
    compile but cannot run: "'Executable' object has no attribute 'local_devices'")."""
    captured = capture(target("block_sparse_map"), Backend(V5E), compile=True, use_cache=False)
    assert captured.stages.compile_error is None
    assert [e.primitive for e in captured.stages.jaxpr_eqns].count("pallas_call") == 1
    assert "tpu_custom_call" in captured.stages.hlo


# --------------------------------------------------------------- grids and DMAs sized at run time

def test_a_grid_sized_at_run_time_is_analysed_with_the_example_values():
    [r] = analysed("decode_traced_grid")
    assert r.call.grid == [1] and r.call.grid_dynamic == [True]
    assert "analysis-failed" not in codes([r])
    # the flush copies as many rows as were decoded: a size known at run time, bounded by the buffer
    [flush] = [d for d in r.call.dmas if not d.size_known]
    assert flush.shape == [2, 8, 128, 128] and flush.per_step[0] == 0.0
    assert all(d.size_known for d in r.call.dmas if d is not flush)


def test_a_grid_sized_at_run_time_without_values_says_what_it_cannot_walk():
    [r] = analysed("decode_traced_grid_abstract")
    assert r.call.grid == [None] and r.call.steps is None
    assert "walk-needs-values" in codes([r]) and "analysis-failed" not in codes([r])


def test_a_grid_sized_at_run_time_keeps_two_buffers_even_at_one_step():
    """libtpu cannot know the grid has one step: each block gets two buffers (8 MiB each here)."""
    [r] = analysed("wide_traced_grid", chips=(V5E, V6E))
    v5e, v6e = r.budgets
    assert [i.buffers for i in v5e.items] == [2, 2] and v5e.total_bytes == 32 * MiB
    assert v5e.verdict == "over" and v6e.verdict == "fits"


@pytest.mark.libtpu
@pytest.mark.slow
def test_traced_grids_against_libtpu(cli_run):
    """The estimate of the run-time grid equals libtpu's figure, and check says each warning once."""
    from inspector.checking import run_check

    result = run_check(target("wide_traced_grid"), [V5E, V6E], use_cache=False, memo=False)
    v5e, v6e = result.targets
    assert (v5e.fits, v5e.compiler_fits, v6e.fits, v6e.compiler_fits) == (False, False, True, True)
    assert v6e.compiler_vmem_bytes == v6e.vmem_bytes == 32 * MiB
    out = cli_run("check", f"{STYLES}:decode_traced_grid_abstract", "--target", "tpu-v5e,tpu-v6e", "--estimate-only")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("walk-needs-values") == 1


# --------------------------------------------------------------- packed dtypes in 8-row blocks

def test_bf16_in_8_row_blocks_is_no_finding_on_any_chip():
    """libtpu 0.0.42.1 compiles bf16 (8, 128) blocks on v5e, v6e and TPU7x alike."""
    reports = analysed("rows8_bf16", chips=(V5E, V6E, TPU7X))
    assert not {"tiling", "tiling-packing"} & codes(reports)


def test_int8_in_8_row_blocks_is_an_error_on_every_chip():
    """libtpu refuses int8 blocks of 8, 16 or 24 rows on every chip (E2002): 32 rows or the whole array."""
    reports = analysed("rows8_int8", chips=(V5E, V6E, TPU7X))
    packing = [f for r in reports for f in r.findings if f.code == "tiling-packing"]
    assert {f.data["chip"] for f in packing} == {"tpu-v5e", "tpu-v6e", "tpu-7x"}
    assert all(f.severity == "error" and f.data["native_rows"] == 32 for f in packing)


@pytest.mark.libtpu
def test_an_interpreted_kernel_is_held_to_no_mosaic_rule():
    """interpret=True: the interpreter's HLO on a TPU too; no tiling or VMEM rule applies. (Traced
    for a TPU: on the CPU every kernel is interpreted, the author's flag cannot be told apart.)"""
    from inspector.checking import run_check

    result = run_check(target("rows8_interpreted"), [V5E, TPU7X], estimate_only=True, memo=False)
    assert {f.code for f in result.findings} == {"kernel-interpret-flag"} and result.ok
    assert all(row.fits is True and row.vmem_bytes is None for row in result.targets)


@pytest.mark.libtpu
@pytest.mark.slow
def test_packing_rules_against_libtpu():
    for name, chip, fits in (("rows8_bf16", TPU7X, True), ("rows8_bf16", V5E, True), ("rows8_int8", V6E, False)):
        error = capture(target(name), Backend(chip), compile=True, use_cache=False, memo=False).stages.compile_error
        assert (error is None) == fits, (name, chip.name, error and error.message[:300])
        if not fits:
            assert "E2002" in error.message


# --------------------------------------------------------------- VMEM: what libtpu does with such blocks

def test_a_block_read_only_by_an_axis_of_one_step_is_single_buffered():
    """streaming_lse with the whole vocabulary in one tile: the weight's index map reads the vocab
    axis, of one step, so the block never moves (libtpu: 16.62 MiB at D=512, the weight once)."""
    [r] = analysed("streaming_lse", tile_v=8192)
    items = {i.what: i for i in r.budgets[0].items}
    assert items["w_ref"].buffers == 1 and items["x_ref"].buffers == 2
    [r] = analysed("streaming_lse", tile_v=4096)
    assert {i.what: i for i in r.budgets[0].items}["w_ref"].buffers == 2


def test_v5p_splits_a_parallel_axis_over_its_two_cores():
    """Grid (2, 1), the first axis parallel: one step per core on v5p, so one buffer per block
    (libtpu: 4.06 MiB); arbitrary, or on v4 and v5e, two (8.06 MiB)."""
    [r] = analysed("linear_attention", chips=(V5P, V5E))
    v5p, v5e = r.budgets
    assert v5p.total_bytes == 4 * MiB + 64 * 1024 and v5e.total_bytes == 8 * MiB + 64 * 1024
    [r] = analysed("linear_attention", chips=(V5P,), semantics="arbitrary")
    assert r.budgets[0].total_bytes == 8 * MiB + 64 * 1024


def test_operands_tpu7x_places_in_vmem_take_their_blocks_out_of_the_limit():
    """Linear attention over 16384-row chunks: 32 MiB of double-buffered blocks. v5e, v5p and v6e
    refuse it (32.06 MiB of scoped VMEM); TPU7x compiles it in 16.06 MiB, XLA having copied two of
    q, k, v (8 MiB each, 24 together, over the 22 MiB it places operands in) whole into VMEM:
    whichever two, their 16 MiB of blocks are out of the limit (tests/test_vmem_xla_placed_7x.py)."""
    [r] = analysed("linear_attention_long", chips=(V5E, V6E, TPU7X), chunk=16384)
    v5e, v6e, tpu7x = r.budgets
    assert v5e.verdict == v6e.verdict == "over"
    assert tpu7x.verdict == "fits" and tpu7x.placed_bytes == 16 * MiB and tpu7x.outside_bytes == 0
    assert round(tpu7x.total_bytes / MiB, 2) == 16.06
    assert "vmem-over-limit" not in {f.code for f in r.findings if (f.data or {}).get("chip") == "tpu-7x"}


@pytest.mark.libtpu
@pytest.mark.slow
def test_vmem_verdicts_against_libtpu():
    """Each new style on the chips where the estimate used to be a false error."""
    from inspector.checking import run_check

    cases = [("linear_attention_long", {"chunk": 16384}, [TPU7X, V6E]), ("streaming_lse", {"tile_v": 8192}, [V5E])]
    for name, params, chips in cases:
        result = run_check(target(name, **params), chips, use_cache=False, memo=False)
        for row in result.targets:
            assert not (row.fits is False and row.compiler_fits), (name, row)
            if row.compiler_fits is not None and row.fits is not None:
                assert row.fits == row.compiler_fits, (name, row)


# --------------------------------------------------------------- a libtpu abort on one chip

@pytest.mark.libtpu
@pytest.mark.slow
def test_a_libtpu_abort_is_that_chips_finding(run_cli, tmp_path):
    """libtpu aborts (SIGABRT) compiling for v4 with static LLO profiling on ("Dma latency model is
    currently only supported on VF/VL/GF/GL"): v4's row says so, v5e's verdict stands, and
    libtpu's log stays off the user's terminal unless --debug."""
    env = {"LIBTPU_INIT_ARGS": f"--xla_jf_dump_static_llo_profile_to={tmp_path}"}
    args = ("check", f"{STYLES}:rows8_bf16", "--target", "tpu-v4,tpu-v5e", "--no-cache")
    out = run_cli(*args, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip().startswith("tpu-")}
    assert "ABORTED" in rows["tpu-v4"] and "fits   fits" in rows["tpu-v5e"]
    assert "compile-aborted" in out.stdout and "tpu-v4: libtpu ended" in out.stdout
    assert "LloOpcode" not in out.stderr and "VF/VL/GF/GL" not in out.stderr and len(out.stderr.splitlines()) < 5
    debug = run_cli(*args, "--debug", env=env)
    assert "VF/VL/GF/GL" in debug.stderr


# --------------------------------------------------------------- the estimate against libtpu's verdicts

@pytest.mark.slow
def test_the_estimate_agrees_with_libtpu_on_these_styles():
    """tests/data/vmem_truth_styles.json (tests/data/make_vmem_truth.py --styles): libtpu's verdict
    on every style at its INSPECT params on v4, v5e, v5p, v6e and TPU7x. Never a "does not fit"
    where libtpu fits, never a "fits" where it does not; undecided only where XLA's placement
    decides (TPU7x), at most one row in twenty."""
    rows, outcome = truth_outcome("vmem_truth_styles.json")
    assert len(rows) >= 60 and outcome["short"] == outcome["false error"] == [], outcome
    assert len(outcome["agree"]) >= 0.95 * len(rows), outcome["undecided"]
    assert all(chip == "tpu-7x" for *_, chip in outcome["undecided"])
