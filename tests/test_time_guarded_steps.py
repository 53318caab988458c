"""libtpu's time for a Pallas kernel whose body is guarded (pl.when / lax.cond): which grid steps
run the guarded code, counted from the program ids; the kernel timed once more with it taken; the
two weighted by those steps. On the v5e the causal flash sample measured 377 us; libtpu's single
simulation said 130 us, the weighted one about 400 us."""
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


def test_weighting_adds_what_taking_the_guard_costs_on_the_steps_that_take_it():
    # 8 cut steps at 800 cycles skipped, 3,000 taken: 2,200 more per step taking it
    cycles, finding = weighted("k.1", 32 * 800.0, _guard(18), (8, 8 * 800), (8, 8 * 3000), "tpu-v5e")
    assert cycles == pytest.approx(32 * 800 + 18 * 2200)
    assert finding.code == "libtpu-guarded-steps" and "18 of the 32 grid steps" in finding.message
    unknown, finding = weighted("k.1", 32 * 800.0, _guard(None), (8, 8 * 800), (8, 8 * 3000), "tpu-v5e")
    assert unknown == 32 * 800 and finding.code == "libtpu-guard-unknown" and finding.severity == "warning"
    assert finding.data["high_cycles"] == pytest.approx(32 * 3000)
    same, finding = weighted("k.1", 32 * 800.0, _guard(18), (8, 8 * 800), (8, 8 * 790), "tpu-v5e")
    assert same == 32 * 800 and finding is None  # the simulation took the heavy side already


CORPUS = ROOT / "tests/data/chip/v5e_corpus.json"


@pytest.mark.libtpu
@pytest.mark.parametrize("label", ["attention.flash", "sweep.flash:block_q=128,block_k=512"])
def test_the_causal_flash_sample_is_timed_within_a_quarter_of_the_chip(label):
    from inspector.chips import get_chip
    from inspector.libtpu import estimate_times
    from inspector.target import load_target

    entry = json.loads(CORPUS.read_text())["entries"][label]
    target = load_target(entry["spec"], args=entry["args"], sets=[f"{k}={v}" for k, v in entry["sets"].items()])
    estimate = estimate_times(target, get_chip("tpu-v5e"), use_cache=False)
    (kernel,) = [k for k in estimate.kernels if k.kind == "custom-call:pallas"]
    measured = entry["measured"]["kernels"][0]["seconds"]
    assert kernel.estimated_seconds == pytest.approx(measured, rel=0.25)
    assert any(f.code == "libtpu-guarded-steps" and f.kernel == kernel.name for f in estimate.findings)
