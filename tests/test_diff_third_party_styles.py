"""`inspector diff` on kernels in the styles of issue 28 (tests/data/diff_kernels.py): a float32
grouped matmul compared at a tolerance derived from its contraction length, an out-of-bounds read
reported with the outputs still compared, a zero-length copy at the end of a buffer that is no
false error, a DMA hazard named with its buffer and grid step, a collective kernel run on as many
CPU devices as its mesh has (or said to be undiffable here)."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import DATA, line_of
from inspector.run import compare, run_diff
from inspector.compilation.target import load_target

DIFF = str(DATA / "diff_kernels.py")


def diff(name, **kw):
    return run_diff(load_target(f"{DIFF}:{name}"), runs=0, **kw)


# ----------------------------------------------------------------------------- the tolerance


def test_contraction_lengths_are_read_per_output():
    from inspector.jax_internals.accumulation import accumulations

    def f(x, w):
        return x @ w, x + 1, jnp.sum(x), jax.jit(lambda a: a @ w)(x) * 2

    accs = accumulations(jax.make_jaxpr(f)(jnp.ones((8, 300)), jnp.ones((300, 16))))
    assert [a.terms for a in accs] == [300, 1, 8 * 300, 300]
    assert accs[0].op == "dot_general" and not accs[0].wide
    ragged = accumulations(jax.make_jaxpr(lambda a, b, g: jax.lax.ragged_dot(a, b, g))(
        jnp.ones((8, 300)), jnp.ones((2, 300, 16)), jnp.array([4, 4], jnp.int32)))
    assert [(a.terms, a.op) for a in ragged] == [(300, "ragged_dot_general")]  # megablox's reference


def test_tolerance_grows_with_sqrt_k_and_given_values_win():
    from inspector.jax_internals.accumulation import Accumulation

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((64, 64)).astype(np.float32) * 30
    off = ref + np.float32(2e-4)
    dot = Accumulation(1024, False, "dot_general")
    leaf = compare("x", off, ref, None, None, dot)[0]
    eps = float(np.finfo(np.float32).eps)
    rms = float(np.sqrt(np.mean(ref.astype(np.float64) ** 2)))
    assert leaf.tolerance.source == "derived" and leaf.tolerance.terms == 1024
    assert leaf.atol == pytest.approx(3 * eps * 32 * rms) and leaf.bad == 0
    assert "atol = 3 * eps(float32) * sqrt(K=1024)" in leaf.tolerance.reason and "rtol = 3 * eps(float32)" in leaf.tolerance.reason
    given = compare("x", off, ref, 1e-5, 1e-5, dot)[0]  # --atol/--rtol win
    assert given.tolerance.source == "given" and given.bad > 0
    half = compare("x", off, ref, 1e-5, None, dot)[0]  # one given, the other derived
    assert half.atol == 1e-5 and half.tolerance.source == "given and derived" and "atol given" in half.tolerance.reason
    small = compare("x", off / 30, ref / 30, None, None, Accumulation(4, False, "dot_general"))[0]  # K=4, O(1): the default
    assert small.tolerance.source == "dtype" and small.atol == 1e-5
    bf16 = compare("x", off.astype(jnp.bfloat16), ref.astype(jnp.bfloat16), None, None, dot)[0]
    assert bf16.atol == 2e-2  # float32 accumulation: far below bfloat16's own rounding


@pytest.mark.slow
def test_megablox_gmm_in_float32_passes_at_the_derived_tolerance():
    """megablox gmm sums K=1024 in 128-wide tiles, XLA in its own order: at atol = rtol = 1e-5
    some elements differ by more (rounding alone); the derived tolerance says why it allows more."""
    result = diff("gmm_f32")
    [out] = result.outputs
    assert result.ok and out.tolerance.source == "derived" and out.tolerance.terms == 1024
    assert 1e-5 < out.max_abs < out.atol
    strict = diff("gmm_f32", atol=1e-5, rtol=1e-5)
    [mismatch] = [f for f in strict.findings if f.code == "mismatch"]
    assert not strict.ok and "tolerance given: atol given, rtol given" in mismatch.message


# ----------------------------------------------------------------------------- what the interpreter sees


@pytest.mark.slow
def test_out_of_bounds_read_is_reported_and_the_outputs_still_compared():
    result = diff("paged_sum")
    [read] = [f for f in result.findings if f.code == "interpret-out-of-bounds"]
    assert read.severity == "error" and "reads [0, 4] of SMEM buffer" in read.message and "shape (2, 4)" in read.message
    assert "grid point (0,)" in read.message and "the outputs are compared from a run that reads NaN there" in read.message
    [out] = result.outputs  # compared all the same: the extra page is masked out of the sums
    assert out.ok and out.shape == [2, 8, 128]
    assert not result.ok  # the read is still an error


@pytest.mark.slow
def test_zero_length_copy_at_the_end_of_a_buffer_is_no_false_error():
    result = diff("causal_conv1d")
    assert result.ok and all(l.ok for l in result.outputs) and len(result.outputs) == 2
    assert {f.code for f in result.findings} == {"interpret-retried"}
    assert any("zero-byte DMA wait" in f.message for f in result.findings)


def test_a_parallel_grid_sized_at_run_time_runs_in_order():
    """The interpreter cannot shuffle a parallel dimension of traced size: the inspector runs it
    as "arbitrary" and the kernel matches its reference, with no error on the CPU."""
    result = diff("runtime_parallel_grid")
    assert result.ok and [l.ok for l in result.outputs] == [True]
    assert not [f for f in result.findings if f.severity == "error"]


@pytest.mark.slow
def test_dma_hazard_names_the_buffer_the_lines_and_the_grid_step():
    result = diff("gdn_decode")
    [hazard] = [f for f in result.findings if f.code == "dma-hazard"]
    prefetch = line_of("tests/data/diff_kernels.py", "pltpu.make_async_copy(s_hbm.at[b + 1], buf, sems.at[0]).start()")
    assert hazard.severity == "error" and "Confirmed" in hazard.message
    assert "VMEM buffer" in hazard.message and f"diff_kernels.py:{prefetch}" in hazard.message
    assert "grid points core 0 at (1,)" in hazard.message
    assert hazard.data["races"] and any(hazard.data["races"][0]["dmas"])
    assert any(f.code == "mismatch" for f in result.findings) and not result.ok


def test_race_reports_with_wrapped_clocks_and_dma_ids_are_read():
    from inspector.jax_internals.interpret import GRID_MARK, parse_races

    clock = "[" + " ".join(["0"] * 30) + "\n  " + " ".join(["1"] * 30) + "]"
    text = (f"{GRID_MARK} 0 3\nRACE DETECTED\n  write of ('vmem', 104, 0, 0)[(slice(0, 8, 1),)] from 102, 0, k.py:20:12 (kernel)\n"
            f"  clock: {clock}\n  read of ('vmem', 104, 0, 0)[(slice(0, 8, 1),)] from 0, 0, k.py:17:8 (kernel)\n  clock: {clock}\n")
    [report] = parse_races(text)
    assert report.dmas == [True, False] and report.grid_points == {0: [3]} and report.ranges == ["0:8"]


def test_zero_byte_wait_assertion_is_recognised():
    from inspector.jax_internals.interpret import race_detector_zero_wait

    tb = ('Traceback (most recent call last):\n  File "/x/jax/_src/pallas/mosaic/interpret/shared_memory.py", line 194, in wait\n'
          '    assert self.clocks[global_core_id] is not None\nAssertionError\n')
    assert race_detector_zero_wait(RuntimeError("CpuCallback error calling callback: " + tb))
    assert not race_detector_zero_wait(AssertionError("in the user's own kernel"))


def test_only_the_interpreters_own_assertions_are_its_limits():
    from inspector.jax_internals.interpret import interpreter_assertion

    theirs = ('Traceback (most recent call last):\n  File "/x/jax/_src/pallas/mosaic/interpret/shared_memory.py", '
              'line 828, in store_buffer_content\n    assert buff.dtype == value.dtype\nAssertionError\n')
    assert interpreter_assertion(RuntimeError(theirs)) == "shared_memory.py:828 in store_buffer_content"
    mine = 'Traceback (most recent call last):\n  File "/home/me/kernel.py", line 12, in body\n    assert n > 0\nAssertionError\n'
    assert interpreter_assertion(RuntimeError(mine)) is None


# ----------------------------------------------------------------------------- collective kernels


def test_collective_kernel_on_too_few_devices_cannot_be_diffed_here():
    """In this process jax has started with one CPU device: the ring's n - 1 pieces divide by zero,
    which is no finding against the kernel."""
    if len(jax.devices()) >= 4:
        pytest.skip("this process has 4 devices")
    result = diff("ring_shift")
    codes = {f.code: f for f in result.findings}
    assert result.ok and set(codes) == {"mesh-on-one-device", "mesh-unavailable"}
    assert codes["mesh-unavailable"].severity == "info" and "ZeroDivisionError" in codes["mesh-unavailable"].message
    assert "4 CPU devices" in codes["mesh-unavailable"].message
    strict = diff("ring_shift", strict=True)
    assert not strict.ok and [f.severity for f in strict.findings if f.code == "mesh-unavailable"] == ["error"]
    unsized = diff("ring_shift_unsized")  # mesh x=-1: said how to give it a size
    assert unsized.ok and "--mesh x=4" in next(f.message for f in unsized.findings if f.code == "mesh-unavailable")


@pytest.mark.slow
def test_collective_kernel_runs_on_as_many_cpu_devices_as_its_mesh(run_cli):
    out = run_cli("diff", f"{DIFF}:ring_shift", "--runs", "0", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] and "on each of 4 devices" in data["mode"]
    assert [f["code"] for f in data["findings"]] == ["mesh-on-cpu-devices"]
    assert data["outputs"][0]["bad"] == 0 and data["outputs"][0]["tolerance"]["source"] == "dtype"


def test_a_run_that_stops_using_the_cpu_is_stopped_and_one_that_computes_is_not():
    """Several CPU devices that wait on each other for ever (jax 0.10.2's interpreter on JAX's own
    all_gather) must not hang the diff: no CPU time for stall_s is a Stalled error, an info finding."""
    import time

    from inspector.base.chips import get_chip
    from inspector.run.interpreted import Stalled, failure_finding, watched

    with pytest.raises(Stalled) as stalled:
        watched(lambda: time.sleep(30), stall_s=0.6, poll_s=0.2)
    finding = failure_finding(stalled.value, "", "k", get_chip("tpu-v5e"), strict=False)
    assert (finding.severity, finding.code) == ("info", "interpret-unsupported") and "stopped making progress" in finding.message

    def busy():
        end = time.process_time() + 1.5
        while time.process_time() < end:
            pass
        return "done"

    assert watched(busy, stall_s=0.6, poll_s=0.2) == "done"
    with pytest.raises(ValueError, match="inside"):
        watched(lambda: (_ for _ in ()).throw(ValueError("inside")), stall_s=5, poll_s=0.2)
