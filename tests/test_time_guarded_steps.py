"""libtpu's time for a Pallas kernel whose body is guarded (pl.when / lax.cond): which grid steps
run the guarded code, counted from the program ids (and the scalar prefetch values the inputs
give); the kernel timed twice more, with it taken at
every step and at none; the two weighted by those steps. On the v5e the causal flash sample
measured 377 us; libtpu's single simulation said 130 us, the weighted one 369 us."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax._src.pallas import core as pallas_core
from jax.experimental import pallas as pl

from conftest import ROOT
from inspector.jax_internals.branches import forced, guard
from inspector.libtpu.guards import weighted


def _kernel_jaxpr(predicate, grid):
    """A kernel body's jaxpr: a lax.cond on ``predicate(i, j, ni)`` of the program ids."""
    def body(x):
        i, j, ni = pl.program_id(0), pl.program_id(1), pl.num_programs(0)
        return lax.cond(predicate(i, j, ni), lambda x: jnp.sin(x) * 2 + 1, lambda x: x, x)

    with pallas_core.tracing_grid_env(grid, ()):
        return jax.make_jaxpr(body)(1.0).jaxpr


PREDICATES = {
    "causal": lambda i, j, ni: i * 4 + 3 >= j * 2,
    "floor division in a jitted helper": lambda i, j, ni: i * 4 + 3 >= jnp.floor_divide(j * 5, 2),
    "remainder and the grid's size": lambda i, j, ni: (j % 3 == 0) | (i == ni - 1),
    "first step only": lambda i, j, ni: (i == 0) & (j == 0),
}


@pytest.mark.parametrize("name", PREDICATES)
def test_the_steps_that_run_the_guarded_code_are_counted_from_the_program_ids(name):
    grid = (4, 8)
    found = guard(_kernel_jaxpr(PREDICATES[name], grid), grid)
    expected = sum(bool(PREDICATES[name](i, j, grid[0])) for i in range(grid[0]) for j in range(grid[1]))
    assert found is not None and found.heavy == 1 and found.steps == 32
    assert found.heavy_steps == expected
    assert found.source and found.source.startswith("test_time_guarded_steps.py:")


def test_a_guard_on_a_value_known_at_run_time_has_no_count():
    def body(x):
        return lax.cond(x > pl.program_id(0), lambda x: jnp.sin(x) * 2, lambda x: x, x)

    with pallas_core.tracing_grid_env((4,), ()):
        jaxpr = jax.make_jaxpr(body)(1.0).jaxpr
    found = guard(jaxpr, (4,))
    assert found is not None and found.heavy_steps is None and found.steps == 4


def test_a_body_without_a_guard_has_none_and_forcing_takes_the_heavy_branch():
    with pallas_core.tracing_grid_env((2,), ()):
        plain = jax.make_jaxpr(lambda x: x * pl.program_id(0))(1.0).jaxpr
    assert guard(plain, (2,)) is None
    jaxpr = _kernel_jaxpr(PREDICATES["causal"], (4, 8))
    found = guard(jaxpr, (4, 8))
    taken = forced(jaxpr, found.eqn, found.heavy)
    assert taken.eqns[found.eqn].invars[0].val == 1 and jaxpr.eqns[found.eqn].invars[0] is not taken.eqns[found.eqn].invars[0]


def _guard(heavy_steps):
    jaxpr = _kernel_jaxpr(PREDICATES["causal"], (4, 8))
    found = guard(jaxpr, (4, 8))
    import dataclasses

    return dataclasses.replace(found, heavy_steps=heavy_steps)


def test_the_kernel_is_its_fixed_part_plus_each_kind_of_step_at_its_forced_cost():
    # at a cut grid of 8 steps: 100 fixed cycles; a step that runs the guarded code 3,000 cycles, one that skips it 500
    heavy, light = (8, 100 + 8 * 3000), (8, 100 + 8 * 500)
    cycles, finding = weighted("k.1", 9999.0, _guard(18), 100.0, heavy, light, "tpu-v5e")
    assert cycles == pytest.approx(100 + 18 * 3000 + 14 * 500)
    assert finding.code == "libtpu-guarded-steps" and "18 of the 32 grid steps" in finding.message
    assert finding.data["libtpu_cycles"] == 9999.0 and finding.data["cycles_per_step_taken"] == pytest.approx(3000)


def test_a_guard_known_only_at_run_time_leaves_libtpus_figure_and_gives_the_range():
    heavy, light = (8, 8 * 3000), (8, 8 * 500)
    cycles, finding = weighted("k.1", 40000.0, _guard(None), 0.0, heavy, light, "tpu-v5e")
    assert cycles == 40000.0 and finding.code == "libtpu-guard-unknown" and finding.severity == "warning"
    assert finding.data["low_cycles"] == pytest.approx(32 * 500) and finding.data["high_cycles"] == pytest.approx(32 * 3000)
    assert "between 0.40x" in finding.message and "2.40x" in finding.message


def test_a_guard_whose_code_costs_nothing_changes_nothing():
    cycles, finding = weighted("k.1", 9999.0, _guard(18), 0.0, (8, 8000), (8, 8000), "tpu-v5e")
    assert cycles == 9999.0 and finding is None


CORPUS = ROOT / "tests/data/chip/v5e_corpus.json"


def _estimate(label):
    from inspector.base.chips import get_chip
    from inspector.libtpu import estimate_times
    from inspector.compilation.target import load_target

    entry = json.loads(CORPUS.read_text())["entries"][label]
    target = load_target(entry["spec"], args=entry["args"], sets=[f"{k}={v}" for k, v in entry["sets"].items()])
    estimate = estimate_times(target, get_chip("tpu-v5e"), use_cache=False)
    (kernel,) = [k for k in estimate.kernels if k.kind == "custom-call:pallas"]
    (finding,) = [f for f in estimate.findings if f.code.startswith("libtpu-guard") and f.kernel == kernel.name]
    return kernel, finding, entry["measured"]["kernels"][0]["seconds"]


@pytest.mark.libtpu
@pytest.mark.parametrize("label", ["attention.flash", "jax.flash_attention"])
def test_causal_flash_kernels_are_timed_within_a_quarter_of_the_chip(label):
    """The sample's simulation skipped the body at every step (0.35x), JAX's ran it at most (1.12x)."""
    kernel, finding, measured = _estimate(label)
    assert finding.code == "libtpu-guarded-steps"
    assert kernel.estimated_seconds == pytest.approx(measured, rel=0.25)


@pytest.mark.libtpu
def test_a_block_sparse_mask_from_scalar_prefetch_is_counted_on_the_mask():
    """The sample's mask comes from its inputs: the steps it keeps are counted on it (they were
    unknown, a range of 161-387 us, before; the chip measured 360 us)."""
    kernel, finding, measured = _estimate("attention.block_sparse")
    assert finding.code == "libtpu-guarded-steps" and finding.data["heavy_steps"] < finding.data["steps"]
    assert kernel.estimated_seconds == pytest.approx(measured, rel=0.25)


def test_a_grid_too_large_to_walk_is_counted_on_a_sample(monkeypatch):
    import inspector.jax_internals.branches as branches

    jaxpr = _kernel_jaxpr(PREDICATES["causal"], (64, 128))
    exact = guard(jaxpr, (64, 128)).heavy_steps
    monkeypatch.setattr(branches, "MAX_STEPS", 2000)
    sampled = guard(jaxpr, (64, 128)).heavy_steps
    assert exact == sum(i * 4 + 3 >= j * 2 for i in range(64) for j in range(128))
    assert abs(sampled - exact) <= 0.05 * 64 * 128


def _prefetch_kernel_jaxpr(grid: int):
    """A kernel body whose pl.when reads its scalar prefetch operand at the step's program id."""
    from jax.experimental.pallas import tpu as pltpu

    def body(ids_ref, x_ref, o_ref):
        @pl.when(ids_ref[pl.program_id(0)] > 2)
        def _():
            o_ref[...] = x_ref[...] * 2

    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(grid,),
                                        in_specs=[pl.BlockSpec((8, 128), lambda i, ids: (0, 0))],
                                        out_specs=pl.BlockSpec((8, 128), lambda i, ids: (0, 0)))
    call = pl.pallas_call(body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32), interpret=True)
    closed = jax.make_jaxpr(call)(jnp.zeros(grid, jnp.int32), jnp.zeros((8, 128), jnp.float32))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqn.params["jaxpr"]


def test_a_guard_on_scalar_prefetch_values_is_counted_from_the_values_the_inputs_give():
    """A block mask or a MoE's group offsets, read at the step's program id: counted when the
    example inputs decide them, unknown when not, and unknown again for an index past the ref."""
    import numpy as np

    jaxpr = _prefetch_kernel_jaxpr(8)
    ids = np.array([0, 5, 1, 9, 3, 2, 7, 0], np.int32)
    counted = guard(jaxpr, (8,), [ids])
    assert counted.heavy_steps == int((ids > 2).sum()) == 4 and counted.read_values
    assert guard(jaxpr, (8,), [None]).heavy_steps is None and guard(jaxpr, (8,)).heavy_steps is None
    assert guard(jaxpr, (8,), [ids[:4]]).heavy_steps is None  # steps 4-7 would read past it

