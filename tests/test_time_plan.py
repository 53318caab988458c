"""The estimate's plan (inspector/libtpu/plan.py): which simulations to make, decided from what
each will cost (the bundles the program issues) before any runs, so that the same program gives
the same figures on any machine. No libtpu needed: the bundles are given."""
from __future__ import annotations

import math
import types

import pytest

from inspector.libtpu.budget import Budget
from inspector.libtpu.bundle_walk import Walk
from inspector.libtpu.plan import PallasGrid, make_plan


def _walk(per_step: int, steps: int, extra: int = 2, outside: int = 100) -> Walk:
    trips = steps + extra  # the grid loop, plus the pipeline's two stages
    return Walk(bundles=per_step + outside, loops=[], least=outside + trips * per_step // 2, most=outside + trips * per_step,
                outer_trips=trips, outer_least=per_step // 2, outer_most=per_step, unknown_trips=0)


def _xla(name, bundles, cycles=None, gave_up=False):
    kernel = types.SimpleNamespace(name=name, kind="fusion:loop", compiler_cycles=cycles, compiler_gave_up=gave_up, repeat=1)
    return kernel, Walk(bundles=bundles, loops=[], least=bundles, most=bundles, outer_trips=None, outer_least=0,
                        outer_most=0, unknown_trips=0)


def _pallas(op, grid, guarded=False):
    kernel = types.SimpleNamespace(name=op, kind="custom-call:pallas", compiler_cycles=None, compiler_gave_up=False, repeat=1)
    return kernel, PallasGrid(op=op, index=0, grid=grid, semantics=("parallel",) * (len(grid) - 1) + ("arbitrary",),
                              guarded=guarded)


def test_a_program_that_fits_is_simulated_whole():
    kernel, grid = _pallas("mm.1", (4, 4, 4))
    plan = make_plan([kernel], {"mm.1": _walk(500, 64)}, [grid], Budget(), cores=1)
    assert [j.label for j in plan.jobs] == ["whole"] and plan.jobs[0].grids == {"mm.1": (4, 4, 4)}


def test_a_guarded_kernel_is_also_simulated_cut_with_its_guard_taken_and_skipped():
    kernel, grid = _pallas("flash.1", (4, 8, 8), guarded=True)
    plan = make_plan([kernel], {"flash.1": _walk(2800, 256)}, [grid], Budget(), cores=1)
    assert [j.label for j in plan.jobs] == ["whole", "probe-1", "guards-heavy", "guards-light"]
    assert plan.jobs[1].grids == {"flash.1": (1, 1, 8)} and [j.force for j in plan.jobs[2:]] == ["heavy", "light"]


def test_a_grid_too_costly_whole_is_cut_twice():
    kernel, grid = _pallas("mm.1", (64, 64, 64))
    plan = make_plan([kernel], {"mm.1": _walk(188, 64**3)}, [grid], Budget(), cores=1)
    assert [j.label for j in plan.jobs] == ["probe-1", "probe-2"]
    assert [j.grids["mm.1"] for j in plan.jobs] == [(1, 1, 64), (1, 4, 64)]  # the reduction axis kept whole
    assert plan.notes and "past what one compile may" in plan.notes[0]


def test_costly_steps_cut_the_innermost_axis_too():
    """64 steps of 60k bundles on the innermost axis: keeping it whole would pass a compile's
    budget, so it is cut to 2 and 4 steps, and the rows varied (a plane through three grids)."""
    kernel, grid = _pallas("k.1", (16, 64))
    plan = make_plan([kernel], {"k.1": _walk(60_000, 16 * 64)}, [grid], Budget(), cores=1)
    assert [j.grids["k.1"] for j in plan.jobs] == [(1, 2), (1, 4), (2, 2)]


def test_a_kernel_no_cut_fits_keeps_its_floor():
    kernel, grid = _pallas("k.1", (2, 2))
    plan = make_plan([kernel], {"k.1": _walk(5_000_000, 4)}, [grid], Budget(), cores=1)
    assert plan.floors == ["k.1"] and plan.jobs == []


def test_costly_xla_ops_are_simulated_alone_beside_the_pallas_kernels_alone():
    """The program's XLA ops would pass what one compile may: they are simulated one at a time
    (the one the cost model gave up on first), the Pallas kernels in a program of their own."""
    big, big_walk = _xla("fusion.1", 1_800_000, cycles=1_200_000)
    small, small_walk = _xla("fusion.2", 30_000, cycles=20_000)
    lost, lost_walk = _xla("fusion.3", 10_000, cycles=2**63, gave_up=True)
    kernel, grid = _pallas("mm.1", (8, 8, 8))
    walks = {"fusion.1": big_walk, "fusion.2": small_walk, "fusion.3": lost_walk, "mm.1": _walk(500, 512)}
    plan = make_plan([big, small, lost, kernel], walks, [grid], Budget(), cores=1)
    labels = [j.label for j in plan.jobs]
    assert labels[:2] == ["alone-probe-1", "alone-probe-2"] and plan.alone == ["mm.1"]
    assert labels[2:] == ["replay-fusion.3", "replay-fusion.1", "replay-fusion.2"]


def test_the_plan_reads_no_clock(monkeypatch):
    """The same program and budget give the same plan however long anything took: the plan is a
    function of the bundles alone."""
    import time

    monkeypatch.setattr(time, "monotonic", lambda: pytest.fail("read the clock"))
    monkeypatch.setattr(time, "perf_counter", lambda: pytest.fail("read the clock"))
    kernel, grid = _pallas("mm.1", (64, 64, 64), guarded=True)
    first = make_plan([kernel], {"mm.1": _walk(188, 64**3)}, [grid], Budget(), cores=1)
    assert first == make_plan([kernel], {"mm.1": _walk(188, 64**3)}, [grid], Budget(), cores=1)


def test_a_budget_is_a_number_of_bundles():
    budget = Budget(seconds=60, memory_bytes=4 * 2**30)
    assert budget.total_bundles == math.floor(60 / budget.seconds_per_bundle)
    assert budget.job_bundles <= 0.9 * budget.memory_bytes / budget.bytes_per_bundle
    assert Budget(seconds=600).total_bundles == 10 * budget.total_bundles


def test_a_kernel_xla_names_after_the_name_stack_is_paired_by_its_results_shapes():
    """Under jax.grad XLA names a custom_vjp's backward kernels "transpose_jvp___.2", not after
    their pallas_call; the forward kernel, unused, is gone from the program. Each record pairs
    with the op whose results have its shapes, so the backward kernels' grids are cut like any
    (the axlearn Mamba backward: a 0.07x floor before, 1.00x of the v5e after)."""
    from inspector.jax_internals.aot import GridRecord
    from inspector.libtpu.programs import name_pallas

    def op(name, *shapes):
        return types.SimpleNamespace(name=name, outputs=[types.SimpleNamespace(shape=s) for s in shapes])

    record = lambda name, *outputs: GridRecord(name, (4, 4, 16), (4, 4, 16), ("parallel",) * 3, outputs=outputs)
    records = [record("_forward_kernel", (4, 2048, 1024)), record("_boundary", (4, 16, 256), (4, 17, 16, 1024)),
               record("_backward_kernel", (4, 2048, 1024), (4, 16, 1024))]
    kernels = [op("transpose_jvp___.2", "f32[4,16,256]", "f32[4,17,16,1024]"),
               op("transpose_jvp___.3", "f32[4,2048,1024]", "f32[4,16,1024]")]
    assert name_pallas(records, kernels) == ({1: "transpose_jvp___.2", 2: "transpose_jvp___.3"}, [])
    # two ops of the same shapes: no sure pairing by shapes (and none by position: counts differ)
    twin = [op("a.1", "f32[4,2048,1024]", "f32[4,16,1024]"), op("a.2", "f32[4,2048,1024]", "f32[4,16,1024]")]
    assert name_pallas(records, twin) == ({}, [])
    # the name, where it matches, comes first
    named = [op("_backward_kernel.7", "f32[4,2048,1024]", "f32[4,16,1024]")] + kernels[:1]
    assert name_pallas(records, named)[0] == {1: "transpose_jvp___.2", 2: "_backward_kernel.7"}
