"""The estimate-only shared-memory verdict for GPU targets (pallas/gpu_smem.py) against XLA:GPU's
own, deviceless: tests/data/gpu/smem_truth.json holds the compiler's verdict and figure on Pallas
kernels of several shapes (tests/data/gpu/make_smem_truth.py remakes it). The estimate says
"fits" only under its upper bound and "does not fit" only over its lower bound: never the wrong
one of the two; "undecided" between, and the message says a compile decides."""
from __future__ import annotations

import collections
import importlib.util
import json

import pytest

from conftest import ROOT

TRUTH = ROOT / "tests/data/gpu/smem_truth.json"
REMAKE = "remake it: .venv/bin/python tests/data/gpu/make_smem_truth.py"
MATMUL = "samples/gpu_matmul.py:matmul"


def _script():
    spec = importlib.util.spec_from_file_location("make_smem_truth", ROOT / "tests/data/gpu/make_smem_truth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
ROWS = json.loads(TRUTH.read_text())["rows"]


def test_the_estimate_is_never_the_wrong_verdict_and_its_bounds_hold_the_compilers_figure(record_property):
    wrong = [r for r in ROWS if {r["estimate"], r["compiler"]} == {"fits", "does not fit"}]
    assert not wrong, wrong[:3]
    for r in ROWS:
        if r["compiler_bytes"] is not None:  # the compiler's figure (a Mosaic GPU kernel that fits gives none)
            assert r["estimate_low"] <= r["compiler_bytes"] <= r["estimate_high"], r
    counts = collections.Counter(r["estimate"] for r in ROWS)
    record_property("undecided", counts["undecided"])
    print(f"estimate on {len(ROWS)} compiles: {dict(counts)}")
    # both verdicts are reached, each where the compiler agrees (not an estimate that always abstains)
    assert counts["fits"] and counts["does not fit"] and counts["undecided"] < len(ROWS) / 2


def test_the_truth_file_is_the_scripts_rows_made_with_this_environment():
    assert len(ROWS) >= 200
    assert [{k: r[k] for k in ("kernel", "params", "chip")} for r in ROWS] == SCRIPT.plan(), REMAKE
    for r in ROWS:
        assert r["compiler"] in ("fits", "does not fit") and r["estimate"] in ("fits", "does not fit", "undecided"), r
        assert r["kernel"] in SCRIPT.KERNELS and r["estimate_low"] <= r["estimate_high"], r
    recorded, here = json.loads(TRUTH.read_text())["versions"], SCRIPT.versions()
    assert set(recorded) == set(SCRIPT.VERSIONED)
    # jax and jaxlib always; the CUDA plugin's where it is installed (the estimate needs none of it)
    changed = {k: (recorded[k], here[k]) for k in recorded if here[k] != "not installed" and recorded[k] != here[k]}
    assert not changed, f"the compiler changed {changed}: {REMAKE}"


def test_the_estimate_columns_are_todays_estimate():
    """Every row's estimate as the inspector gives it now (one trace a kernel, no compile): a change
    to the estimate says remake (``--estimates``, seconds)."""
    for r in ROWS:
        if r["kernel"] == "mosaic_add" and importlib.util.find_spec("absl") is None:
            continue  # jax's Mosaic GPU imports absl-py, which the GPU extra brings
        assert SCRIPT.estimate_verdict(r) == {k: r[k] for k in ("estimate", "estimate_low", "estimate_high")}, \
            f"{r}: {REMAKE} --estimates"


def test_estimate_only_check_of_the_sample_matmul(cli):
    """samples/gpu_matmul.py: 128x128x64 in 3 stages fits both chips (XLA:GPU: 96 KiB on H100,
    64 KiB on A100); the upper bound counts its loop's tiles, not its (128, 512) blocks x 3."""
    code, out, err = cli("check", MATMUL, "--target", "h100,a100", "--estimate-only", "--json")
    assert code == 0, err
    rows = {r["chip"]: r for r in json.loads(out)["targets"]}
    assert rows["h100"]["fits"] is True and rows["a100"]["fits"] is True
    assert rows["h100"]["vmem_bytes"] < 232448 and rows["h100"]["compiler_fits"] is None  # nothing compiled


@pytest.mark.parametrize("params, code, said", [
    # 256x256x128 in 4 stages: three copies of its two 64 KiB loop tiles are surely kept (XLA:GPU asks 512 KiB)
    (["--set", "bm=256"], 1, "needs at least 384 KiB"),
    # 4 stages on A100: 96 KiB surely, 192 KiB at most, the limit 163 KiB between (XLA:GPU: 96 KiB)
    (["--set", "stages=4", "--target", "a100"], 3, "without --estimate-only (a deviceless XLA:GPU compile"),
])
def test_estimate_only_says_does_not_fit_or_undecided_by_its_bounds(cli, params, code, said):
    target = [] if "--target" in params else ["--target", "h100"]
    got, out, err = cli("check", MATMUL, "--estimate-only", *target, *params)
    assert got == code, out + err
    assert said in " ".join(out.split())


def _triton_facts(kernel, shapes, out_shape):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    from inspector.pallas.discovery import find_pallas_calls

    def f(*args):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, jnp.float32),
                              compiler_params=plt.CompilerParams(num_warps=4, num_stages=3))(*args)
    (found,) = find_pallas_calls(jax.make_jaxpr(f)(*[jax.ShapeDtypeStruct(s, jnp.float16) for s in shapes]))
    return found.info.triton


def test_a_tile_read_twice_is_kept_once_and_a_store_is_no_read():
    """The lower bound counts what the pipeliner surely keeps: two reads of one tile fold into one
    load (so one set of copies); the upper bound counts every read, a store's swap none."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        def step(i, acc):
            a, b = x_ref[:, pl.ds(i * 32, 32)], x_ref[:, pl.ds(i * 32, 32)]
            y = y_ref[pl.ds(i * 32, 32), :]
            return acc + jnp.dot(a, y, preferred_element_type=jnp.float32) + jnp.dot(b, y[:, ::-1],
                                                                                    preferred_element_type=jnp.float32)
        o_ref[...] = jax.lax.fori_loop(0, 4, step, jnp.zeros((64, 64), jnp.float32))

    facts = _triton_facts(kernel, [(64, 128), (128, 64)], (64, 64))
    x_reads = [load for load in facts.loads if load.ref == "x_ref"]
    assert len(x_reads) == 2 and all(load.in_loop for load in x_reads)  # the upper bound counts both
    assert [load.pipelined for load in x_reads] == [True, False]  # the lower bound one: the same tile
    assert not any(load.pipelined for load in facts.loads if load.ref == "y_ref")  # read by a dot and a reversal
    assert "o_ref" not in {load.ref for load in facts.loads}  # written, never read
