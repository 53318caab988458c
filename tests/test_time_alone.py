"""A Pallas kernel libtpu's simulation left untimed because it stopped at another op first (on the
v5e: "Unsupported DMA direction" in an XLA gather or scatter before a grouped matmul), simulated in
a program of its own; a grid sized at run time gets its size from the example inputs there."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT

pytestmark = pytest.mark.libtpu

CORPUS = ROOT / "tests/data/chip/v5e_corpus.json"


def _estimate(spec: str, args: str | None = None, sets: list[str] | None = None):
    from inspector.base.chips import get_chip
    from inspector.compilation.target import load_target
    from inspector.libtpu import estimate_times

    estimate = estimate_times(load_target(spec, args=args, sets=sets or []), get_chip("tpu-v5e"), use_cache=False)
    (kernel,) = [k for k in estimate.kernels if k.kind == "custom-call:pallas"]
    return kernel, {f.code: f for f in estimate.findings if f.kernel in (kernel.name, None)}


def test_a_kernel_left_untimed_by_an_aborted_simulation_is_simulated_alone():
    """samples/moe.py:experts: libtpu stops at an XLA gather before the ragged dot and gave it
    nothing (its roofline: 0.25x of the chip); alone, with the steps its guard runs counted on the
    group sizes, it is simulated within 2x of the chip (libtpu's per-step DMA cost is high there)."""
    kernel, findings = _estimate("samples/moe.py:experts")
    measured = json.loads(CORPUS.read_text())["entries"]["moe.experts"]["measured"]["kernels"][0]["seconds"]
    assert kernel.estimate_source in ("libtpu", "libtpu-extrapolated") and {"libtpu-aborted", "libtpu-alone"} <= set(findings)
    guarded = findings["libtpu-guarded-steps"]
    assert guarded.data["heavy_steps"] == 704 and "scalar prefetch values" in guarded.message
    assert 0.5 <= kernel.estimated_seconds / measured <= 2


def test_a_grid_sized_at_run_time_is_simulated_alone_at_the_size_the_inputs_give():
    """JAX's megablox gmm: its grid counts the active tiles of the groups (a traced value), so the
    program's simulation can neither cut nor pair it, and libtpu stops at a scatter before it."""
    kernel, findings = _estimate("samples/jax_kernels.py:gmm")
    assert kernel.estimate_source == "libtpu" and "libtpu-alone" in findings
    assert kernel.steps == 24 and kernel.estimated_seconds >= kernel.roofline_seconds


def test_the_isolated_grid_needs_every_dynamic_size():
    import jax

    from inspector.jax_internals.isolate import pallas_equations, with_grid
    from inspector.compilation.target import load_target

    target = load_target("samples/jax_kernels.py:gmm")
    closed = jax.make_jaxpr(lambda *a: target.call(*a))(*target.args)
    (eqn,) = pallas_equations(closed)
    assert with_grid(eqn, None) is None and with_grid(eqn, [None]) is None
    static = with_grid(eqn, [7])
    assert 7 in static.params["grid_mapping"].grid and len(static.invars) == len(eqn.invars) - 1
