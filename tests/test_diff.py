"""`inspector diff`: correct kernels pass, each bug gives the right finding and the right blocks,
NaN handling, tolerances by dtype, gradients, JSON shape, a raising kernel is a finding."""
import json

import jax.numpy as jnp
import numpy as np

from conftest import DATA
from inspector.diff import TOLERANCES, compare, error_map, run_diff
from inspector.target import load_target

KERNELS = str(DATA / "pallas_kernels.py")


def diff(spec, **kw):
    args = kw.pop("args", None)
    sets = kw.pop("sets", None)
    ref = kw.pop("ref", None)
    return run_diff(load_target(spec, args=args, sets=sets, ref=ref), runs=0, **kw)


def test_correct_flash_attention_passes_with_gradients():
    result = diff("samples/attention.py:flash", args="bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]",
                  sets=["block_q=128", "block_k=128"], grad=True)
    assert result.ok and result.mode == "TPU interpret mode on the CPU"
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


def test_out_of_bounds_read_is_a_finding_with_the_grid_point():
    result = diff("samples/bugs.py:element_offset")
    [f] = result.findings
    assert (f.code, f.severity) == ("interpret-out-of-bounds", "error") and "grid point (1,)" in f.message
    assert result.outputs == [] and not result.ok


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


def test_json_and_exit_codes(run_cli):
    out = run_cli("diff", "samples/bugs.py:dropped_tail", "--runs", "1", "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["seed"] == 0 and data["timing"]["runs"] == 1
    assert data["outputs"][0]["error_map"]["bad_blocks"][0]["block"] == [7, 0]
    assert "interpret mode" in data["timing"]["note"]
    good = run_cli("diff", f"{KERNELS}:double", "--ref", "samples/bugs.py:reference_double", "--runs", "0")
    assert good.returncode == 0 and "ok" in good.stdout
    raising = run_cli("diff", "samples/bugs.py:element_offset", "--runs", "0")
    assert raising.returncode == 1 and "interpret-out-of-bounds" in raising.stdout and "Traceback" not in raising.stderr
    no_ref = run_cli("diff", "samples/attention.py:naive", "--args", "f32[1,8,8] f32[1,8,8] f32[1,8,8]")
    assert no_ref.returncode == 2 and "no reference" in no_ref.stderr


def test_seeded_inputs_are_reproducible_and_int_ranges_apply(tmp_path):
    from inspector.diff import make_inputs

    f = tmp_path / "ints.py"
    f.write_text("def f(x, idx):\n    return x[idx]\nINSPECT = {'f': {'args': 'f32[8] s32[4]', 'int_ranges': {'idx': [0, 8]}}}\n")
    target = load_target(f"{f}:f")
    (x1, i1), _ = make_inputs(target, seed=3)
    (x2, i2), _ = make_inputs(target, seed=3)
    assert np.array_equal(x1, x2) and np.array_equal(i1, i2)
    assert int(i1.min()) >= 0 and int(i1.max()) < 8 and i1.dtype == jnp.int32
