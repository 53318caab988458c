"""`inspector diff`: correct kernels pass, each bug gives the right finding and the right blocks,
NaN handling, tolerances by dtype, gradients, JSON shape, a raising kernel is a finding; interpret
mode as the simulated chip (emit_pipeline, cores per chip, races confirmed by rerunning), the
interpreter's prints kept off the terminal, output trees checked before values, usage checks."""
import json

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import DATA, line_of
from inspector.run import TOLERANCES, compare, error_map, run_diff
from inspector.compilation.target import load_target

KERNELS = str(DATA / "pallas_kernels.py")
DIFF = str(DATA / "diff_kernels.py")


def diff(spec, **kw):
    args = kw.pop("args", None)
    sets = kw.pop("sets", None)
    ref = kw.pop("ref", None)
    return run_diff(load_target(spec, args=args, sets=sets, ref=ref), runs=0, **kw)


@pytest.mark.slow
def test_correct_flash_attention_passes_with_gradients():
    result = diff("samples/attention.py:flash", args="bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]",
                  sets=["block_q=128", "block_k=128"], grad=True)
    assert result.ok and result.mode.startswith("TPU interpret mode on the CPU as tpu-v5e (1 TensorCore")
    [out] = result.outputs
    assert out.bad == 0 and out.max_abs <= TOLERANCES["bfloat16"][0] and out.max_ulp <= 2
    assert [g.output for g in result.gradients] == ["d/dq", "d/dk", "d/dv"] and all(g.ok for g in result.gradients)


def test_dropped_tail_names_the_unwritten_block():
    result = diff("samples/bugs.py:dropped_tail")
    assert not result.ok
    [out] = result.outputs
    assert out.nan_kernel == 104 * 128 and out.worst_index == [896, 0]
    m = out.error_map
    assert m.basis == "blockspec" and m.block_shape == [128, 128]
    assert [(b.block, b.nan, b.grid_points) for b in m.bad_blocks] == [([7, 0], 104 * 128, [])]
    assert m.rows == ["."] * 7 + ["N"]
    assert any(f.code == "mismatch" and "never written" in f.message for f in result.findings)


@pytest.mark.slow
def test_out_of_bounds_read_is_a_finding_with_the_grid_point():
    result = diff("samples/bugs.py:element_offset")
    [f, mismatch] = result.findings
    assert (f.code, f.severity) == ("interpret-out-of-bounds", "error") and "grid point (1,)" in f.message
    # the outputs are still compared, from a run that reads NaN past the end: blocks 1.. are wrong
    assert mismatch.code == "mismatch" and "read past the end" in mismatch.message
    assert result.outputs[0].error_map.rows == ["."] + ["N"] * 7 and not result.ok


def test_non_consecutive_revisit_is_a_finding():
    assert [f.code for f in diff("samples/bugs.py:revisit_not_consecutive").findings] == ["interpret-revisit"]


def test_parallel_reduction_is_wrong_in_every_block_and_names_the_steps():
    result = diff("samples/bugs.py:parallel_reduction")
    m = result.outputs[0].error_map
    assert m.bad_block_count == 4
    assert m.bad_blocks[0].grid_points == [[m.bad_blocks[0].block[0], k] for k in range(4)]


def test_plain_functions_fold_onto_a_coarse_grid():
    result = diff(f"{KERNELS}:double", ref="samples/bugs.py:reference_double")
    assert result.ok and result.outputs[0].error_map.bad_blocks == []


def test_tolerances_by_dtype_and_overrides():
    ref = jnp.ones((4, 4), jnp.float32)
    off = ref + 1e-3
    assert compare("x", off, ref, None, None)[0].bad == 16  # f32 default 1e-5
    assert compare("x", off.astype(jnp.bfloat16), ref.astype(jnp.bfloat16), None, None)[0].bad == 0  # bf16 default 2e-2
    assert compare("x", off, ref, 1e-2, 0.0)[0].bad == 0


def test_nan_on_one_side_is_wrong_and_on_both_is_not():
    ref = jnp.array([1.0, jnp.nan, 3.0])
    leaf, bad, nan, diff_ = compare("x", jnp.array([1.0, jnp.nan, jnp.nan]), ref, None, None)
    assert leaf.bad == 1 and leaf.nan_kernel == 2 and leaf.nan_reference == 1 and leaf.worst_index == [2]
    m = error_map(bad, nan, diff_, [1], "coarse")
    assert [(b.block, b.nan) for b in m.bad_blocks] == [([2], 1)]


def test_max_errors_are_over_elements_that_are_numbers_on_both_sides():
    """One meaning per column (docs/diff.md): max abs and max rel over numbers; NaN ("-") where
    there is none, as for a block all NaN; an infinity against a number is an error of inf."""
    import math

    from inspector.views.diff import _error

    ref = jnp.array([1.0, 2.0, 3.0, 4.0])
    leaf, bad, nan, diff_ = compare("x", jnp.array([1.5, 2.0, jnp.nan, jnp.nan]), ref, None, None)
    assert (leaf.max_abs, leaf.max_rel, leaf.bad) == (0.5, 0.5, 3)
    assert leaf.worst_index in ([2], [3])  # a NaN on one side is the worst, though no number to subtract
    m = error_map(bad, nan, diff_, [2], "coarse")
    assert [(b.block, b.max_abs) for b in m.bad_blocks if not math.isnan(b.max_abs)] == [([0], 0.5)]
    assert [_error(b.max_abs) for b in m.bad_blocks if b.block == [1]] == ["-"]  # all NaN: no number
    everywhere, *_ = compare("x", jnp.array([jnp.nan, jnp.nan]), jnp.array([1.0, 2.0]), None, None)
    assert math.isnan(everywhere.max_abs) and math.isnan(everywhere.max_rel)
    inf, *_ = compare("x", jnp.array([jnp.inf, 2.0]), jnp.array([1.0, 2.0]), None, None)
    assert inf.max_abs == inf.max_rel == math.inf


def test_json_and_exit_codes(cli_run):
    out = cli_run("diff", "samples/bugs.py:dropped_tail", "--runs", "1", "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["seed"] == 0 and data["timing"]["runs"] == 1
    assert data["outputs"][0]["error_map"]["bad_blocks"][0]["block"] == [7, 0]
    assert "interpret mode" in data["timing"]["note"]
    good = cli_run("diff", f"{KERNELS}:double", "--ref", "samples/bugs.py:reference_double", "--runs", "0")
    assert good.returncode == 0 and "ok" in good.stdout
    raising = cli_run("diff", "samples/bugs.py:element_offset", "--runs", "0")
    assert raising.returncode == 1 and "interpret-out-of-bounds" in raising.stdout and "Traceback" not in raising.stderr
    no_ref = cli_run("diff", "samples/attention.py:naive", "--args", "f32[1,8,8] f32[1,8,8] f32[1,8,8]")
    assert no_ref.returncode == 2 and "no reference" in no_ref.stderr


def test_seeded_inputs_are_reproducible_and_int_ranges_apply(tmp_path):
    from inspector.run import make_inputs

    f = tmp_path / "ints.py"
    f.write_text("def f(x, idx):\n    return x[idx]\nINSPECT = {'f': {'args': 'f32[8] s32[4]', 'int_ranges': {'idx': [0, 8]}}}\n")
    target = load_target(f"{f}:f")
    (x1, i1), _ = make_inputs(target, seed=3)
    (x2, i2), _ = make_inputs(target, seed=3)
    assert np.array_equal(x1, x2) and np.array_equal(i1, i2)
    assert int(i1.min()) >= 0 and int(i1.max()) < 8 and i1.dtype == jnp.int32


# ----------------------------------------------------------------------------- interpret mode as the chip


@pytest.mark.slow
def test_emit_pipeline_kernel_runs_as_the_simulated_chip():
    """pltpu.emit_pipeline asks get_tpu_info() while tracing: on a bare CPU that raises
    "Unsupported TPU device kind: cpu"; traced as the chip it runs."""
    result = diff(f"{DIFF}:pipelined")
    assert result.ok and result.chip == "tpu-v5e" and result.findings == []
    assert diff(f"{DIFF}:pipelined", chip="tpu-v6e").chip == "tpu-v6e"


@pytest.mark.slow
def test_benign_race_is_a_warning_after_reruns_agree():
    """Both cores of a megacore chip write the same values to one output block: the race is
    reported (buffer, block, cores, grid points) and confirmed harmless by the reruns."""
    result = diff(f"{DIFF}:benign_race", chip="tpu-v5p")
    assert result.ok and "2 TensorCores" in result.mode
    [f] = result.findings
    assert (f.code, f.severity) == ("race-detected", "warning")
    assert "o_ref" in f.message and "block (0, 0)" in f.message and "cores 0 and 1" in f.message and "tpu-v5p" in f.message
    assert f.data["runs"] == {"2 cores": 0, "one core": 0, "the parallel steps in another order": 0}
    assert "RACE DETECTED" in f.data["detail"] and sorted(f.data["races"][0]["cores"]) == [0, 1]  # either core may write last


@pytest.mark.slow
def test_benign_race_on_a_single_core_chip_is_not_simulated():
    result = diff(f"{DIFF}:benign_race")  # tpu-v5e: one TensorCore, nothing to race with
    assert result.ok and result.findings == [] and "1 TensorCore" in result.mode


@pytest.mark.slow
def test_harmful_race_is_confirmed_as_an_error():
    result = diff(f"{DIFF}:harmful_race", chip="tpu-v5p")
    race = next(f for f in result.findings if f.code == "race-detected")
    assert race.severity == "error" and "Confirmed" in race.message
    assert race.data["runs"]["one core"] == 0 and race.data["runs"]["2 cores"] > 0
    assert not result.ok


@pytest.mark.slow
def test_exception_inside_a_kernel_names_its_type_message_and_grid_point():
    result = diff(f"{DIFF}:raises_inside")
    [f] = result.findings
    assert f.code == "kernel-raised" and f.severity == "error"
    assert "raised ValueError: boom at step 2 at grid point (2,)" in f.message and "CpuCallback" not in f.message
    assert f.data["type"] == "ValueError" and f.data["grid_point"] == [2]
    assert f.data["source"].endswith("diff_kernels.py:" + str(line_of("tests/data/diff_kernels.py", "raise ValueError")))


@pytest.mark.slow
def test_interpreter_prints_never_reach_the_terminal(run_cli):
    out = run_cli("diff", f"{DIFF}:benign_race", "--target", "tpu-v5p", "--runs", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert "RACE DETECTED" not in out.stderr and "@@inspector" not in out.stdout
    data = json.loads(out.stdout)  # stdout is the JSON and nothing else
    assert data["chip"] == "tpu-v5p" and "RACE DETECTED" in data["interpreter_output"]
    assert [f["severity"] for f in data["findings"]] == ["warning"]


def test_captured_output_takes_python_and_file_descriptor_writes(capfd):
    import os

    from inspector.run.capture import captured_output

    with captured_output() as out:
        print("from python")
        os.write(1, b"from fd 1\n")
        os.write(2, b"from fd 2\n")
    assert "from python" in out.text and "from fd 1" in out.text and "from fd 2" in out.text
    seen = capfd.readouterr()
    assert "from" not in seen.out + seen.err


def test_known_interpreter_limits_are_info_and_strict_makes_them_errors():
    from inspector.base.chips import get_chip
    from inspector.run.interpreted import failure_finding

    err = AttributeError("'ReshapeTransform' object has no attribute 'indices'")
    f = failure_finding(err, "", "k", get_chip("tpu-v5e"), strict=False)
    assert (f.severity, f.code) == ("info", "interpret-unsupported")
    assert f.message.startswith("k: cannot run in interpret mode: ") and "the compile views still hold" in f.message
    assert failure_finding(err, "", "k", get_chip("tpu-v5e"), strict=True).severity == "error"
    unpack = NotImplementedError("MLIR translation rule for primitive 'unpack_elementwise' not found for platform cpu")
    assert "unpack_elementwise" in failure_finding(unpack, "", "k", get_chip("tpu-v5e"), False).data["reason"]
    zipped = ValueError("safe_zip() argument 2 is shorter than argument 1")
    assert failure_finding(zipped, "", "k", get_chip("tpu-v5e"), False).severity == "info"


def test_zero_length_read_at_the_end_is_recognised():
    from inspector.jax_internals.interpret import zero_length_out_of_bounds

    at_end = IndexError("Out-of-bounds read of (0 0 hbm 101): reading [(slice(128, 128, 1), slice(0, 128, 1))] but buffer has shape (128, 128).")
    past = IndexError("Out-of-bounds read of (0 0 hbm 101): reading [(slice(128, 136, 1), slice(0, 128, 1))] but buffer has shape (128, 128).")
    assert zero_length_out_of_bounds(at_end) and not zero_length_out_of_bounds(past)


def test_the_faster_clock_order_is_jaxs_on_every_pair():
    import itertools

    import numpy as np
    from jax._src.pallas.mosaic.interpret import vector_clock

    from inspector.jax_internals.interpret import clocks_ordered

    def jaxs(x, y):  # vector_clock.lt and ordered as jax 0.10 writes them (the module's may be ours by now)
        lt = lambda a, b: bool((a <= b).all() & (a < b).any())  # noqa: E731
        return lt(x, y) | lt(y, x)

    clocks = [np.array(c, dtype=np.int32) for c in itertools.product((0, 1, 2), repeat=3)]
    clocks += list(np.random.default_rng(0).integers(0, 3, size=(200, 65), dtype=np.int32))
    pairs = list(itertools.product(clocks[:27], repeat=2)) + list(zip(clocks[27:], clocks[28:]))
    assert [clocks_ordered(x, y) for x, y in pairs] == [jaxs(x, y) for x, y in pairs]
    assert sum(jaxs(x, y) for x, y in pairs) > 100 and sum(not jaxs(x, y) for x, y in pairs) > 100
    assert vector_clock.make_vector_clock(3).dtype == np.int32  # what a clock is, so the pairs above are clocks


@pytest.mark.slow
def test_unsupported_kernel_exits_0_unless_strict(cli_run):
    """A DMA through a reshaped HBM ref: libtpu compiles it, the interpreter cannot run it."""
    out = cli_run("diff", f"{DIFF}:reshaped_dma", "--runs", "0")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "info  interpret-unsupported" in out.stdout and "cannot run in interpret mode" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert cli_run("diff", f"{DIFF}:reshaped_dma", "--runs", "0", "--strict").returncode == 1


# ----------------------------------------------------------------------------- output trees


def test_dict_with_other_keys_is_a_structure_finding():
    result = diff(f"{DIFF}:as_dict")
    structure = [f for f in result.findings if f.code == "output-structure"]
    assert len(structure) == 1 and "['c']" in structure[0].message and "['b']" in structure[0].message
    assert [l.output for l in result.outputs] == ["['a']"] and not result.ok


def test_tuple_against_dict_is_a_finding_and_values_still_compared():
    result = diff(f"{DIFF}:as_tuple")
    [f] = result.findings
    assert f.code == "output-structure" and "a tuple of 2" in f.message and "a dict with keys ['a', 'b']" in f.message
    assert len(result.outputs) == 2 and all(l.ok for l in result.outputs) and not result.ok


def test_dtype_and_shape_differences_are_findings():
    dtype = diff(f"{DIFF}:as_f32")
    assert [f.code for f in dtype.findings] == ["output-dtype"] and "float32" in dtype.findings[0].message
    assert not dtype.ok and dtype.outputs[0].ok
    shape = diff(f"{DIFF}:wrong_shape")
    assert [f.code for f in shape.findings] == ["output-shape"] and "[8, 64]" in shape.findings[0].message
    assert not shape.ok and shape.outputs == []


def test_zero_size_outputs_compare():
    result = diff(f"{DIFF}:empty_rows")
    assert result.ok and result.outputs[0].shape == [0, 128] and result.outputs[0].error_map is None


def test_mismatches_exit_1_and_bad_tolerances_exit_2(cli_run):
    assert cli_run("diff", f"{DIFF}:as_dict", "--runs", "0").returncode == 1
    for flag, value in (("--atol", "nan"), ("--rtol", "-1"), ("--atol", "inf")):
        out = cli_run("diff", f"{DIFF}:as_f32", flag, value)
        assert out.returncode == 2 and "finite number >= 0" in out.stderr and "Traceback" not in out.stderr


def test_tolerances_from_inspect_are_validated(tmp_path):
    f = tmp_path / "tol.py"
    f.write_text("def f(x):\n    return x\nINSPECT = {'f': {'args': 'f32[4]', 'reference': 'f', 'atol': -1e-3}}\n")
    with pytest.raises(ValueError, match="atol must be a finite number >= 0"):
        diff(f"{f}:f")


def test_memory_is_checked_before_inputs_are_made(cli_run, monkeypatch):
    from inspector.run import inputs

    monkeypatch.setattr(inputs, "available_memory", lambda: 24 * 1024**3)
    with pytest.raises(ValueError, match=r"need about [\d.]+ GiB; this machine has 24 GiB available"):
        diff(f"{DIFF}:double", args="f32[65536,65536]", ref=f"{DIFF}:double")
    out = cli_run("diff", f"{DIFF}:double", "--ref", f"{DIFF}:double", "--args", "f32[1048576,1048576]")  # 4 TiB: more than any machine here
    assert out.returncode == 2 and "this machine has" in out.stderr and "MemoryError" not in out.stderr


def test_target_names_the_simulated_chip_and_spec_only_targets_are_refused(cli_run):
    out = cli_run("diff", f"{DIFF}:double", "--target", "b200")
    assert out.returncode == 2 and "interpret mode simulates" in out.stderr
