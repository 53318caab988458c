"""--measure with a GPU target goes through the GPU family (``Family.attached``, ``Family.measure``):
without a GPU, one line that says which GPU it needs; with one (faked here: CI has none), each
kernel's measured time beside its floor estimate, in the fusions view and the JSON; tune --measure
ranks candidates by it, and diff times the kernel and its reference by it. The fake GPU
is the deviceless compile for the H100, each launch given a made-up time: only the GPU's run is
not real, the launches named back to their HLO ops and everything after are."""
from __future__ import annotations

import json

import pytest

from inspector.base.chips import get_chip
from inspector.families.gpu import measure as gpu_measure

MATMUL = "samples/gpu_matmul.py:matmul"
SMALL = ("--args", "bf16[32,32] bf16[32,32]", "--set", "bm=16")


def test_measure_without_the_gpu_says_which_gpu_it_needs(cli, monkeypatch):
    monkeypatch.setattr(gpu_measure, "attached_gpu", lambda: None)
    code, out, err = cli("show", MATMUL, *SMALL, "--target", "h100", "--measure")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["inspector: --measure runs the program on an H100 attached to this machine, and this "
                                        "machine has none: --time gives each kernel's floor estimate without a GPU"]


def test_measure_on_another_gpu_than_the_one_attached_is_refused(cli, monkeypatch):
    monkeypatch.setattr(gpu_measure, "attached_gpu", lambda: get_chip("a100"))
    code, _, err = cli("show", MATMUL, *SMALL, "--target", "h100", "--measure")
    assert code == 2 and "measuring runs on the attached a100: target it (--target a100" in err


def _fake_gpu(fn, args, kwargs, runs):
    """What on_gpu gives on an H100, from the deviceless compile for it: each launch 10 us, 20 us, ..."""
    import jax

    from inspector.families.gpu.compile.deviceless import compile_deviceless
    from inspector.families.gpu.jax.target_configs import spec_text
    from inspector.families.gpu.kernels.thunks import kernels

    # the function under the jit, jitted once again: a jit of a jit would number the HLO's ops otherwise
    done = compile_deviceless(fn.__wrapped__, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args],
                              spec_text(get_chip("h100").target_config))
    names = [k.name for k in kernels(done.thunk_sequence)]
    return done.device_kind, done.hlo, "fake", [[(name, 0.01 * (i + 1)) for i, name in enumerate(names)] for _ in range(runs)]


@pytest.fixture
def attached_h100(monkeypatch):
    """An H100 attached, measured in this process (the child's run_isolated starts: its environment
    is prepared as the in-process CLI's already is)."""
    from inspector.families import measuring
    from inspector.tuning import measured

    monkeypatch.setattr(gpu_measure, "attached_gpu", lambda: get_chip("h100"))
    monkeypatch.setattr(gpu_measure, "on_gpu", _fake_gpu)
    monkeypatch.setattr(measuring, "run_isolated", lambda fn, *args, env=None: fn(*args))
    monkeypatch.setattr(measured, "run_isolated", lambda fn, *args, env=None: fn(*args))


def test_measured_times_sit_beside_the_floor_in_the_json(cli, attached_h100):
    code, out, err = cli("show", MATMUL, *SMALL, "--target", "h100", "--measure", "--time", "--json")
    assert code in (0, 1), err
    report = json.loads(out)
    measured = report["measured"]
    assert measured["chip"] == "h100" and measured["device_kind"] == "NVIDIA H100 80GB HBM3"
    assert measured["method"].startswith("fake, 20 runs") and measured["unmatched"] == []
    kernels = report["kernels"]
    timed = [k for k in kernels if k.get("measured_seconds") is not None]
    assert timed and len(timed) == len(measured["kernels"])  # every launch named back to its HLO op
    assert all(k["estimated_seconds"] for k in timed)  # the floor beside it
    assert sorted(k["measured_seconds"] for k in timed) == pytest.approx([1e-5 * (i + 1) for i in range(len(timed))])
    assert report["totals"]["measured_seconds"] == pytest.approx(sum(k["measured_seconds"] for k in timed))


def test_measured_times_in_the_fusions_view(cli, attached_h100):
    code, out, err = cli("show", MATMUL, *SMALL, "--target", "h100", "--measure", "--time", "--view", "fusions")
    assert code in (0, 1), err
    assert "measured" in out and "10 us" in out  # the first launch's made-up time, in its kernel's row


def test_launches_are_named_by_their_hlo_ops_and_a_wall_clock_run_has_no_kernel():
    hlo = ('%fusion.2 = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop, calls=%fused\n'
           '%pallas_call.1 = f32[8]{0} custom-call(f32[8]{0} %fusion.2), custom_call_target="__gpu$xla.gpu.triton", '
           'backend_config={name = "kernel"}\n')
    runs = [[("fusion_2", 1.0), ("kernel", 2.0), ("kernel", 2.0)]] * 3  # ms; the Pallas kernel launched twice a run
    m = gpu_measure.measurement("h100", "NVIDIA H100 80GB HBM3", "CUPTI", hlo, runs, {})
    assert [(k.name, k.launches) for k in m.kernels] == [("pallas_call.1", 2), ("fusion.2", 1)]
    assert [k.seconds for k in m.kernels] == pytest.approx([4e-3, 1e-3]) and m.seconds == pytest.approx(5e-3)
    wall = gpu_measure.measurement("h100", "NVIDIA H100 80GB HBM3", "wall clock", hlo, [[(gpu_measure.WALL, 3.0)]] * 2, {})
    assert wall.kernels == [] and wall.seconds == pytest.approx(3e-3)


# bm=16 and bm=32 (and the default's 128) on the smallest shapes, compiled deviceless
TUNE = ("tune", MATMUL, "--target", "h100", "--grid", "bm=16,32", "--set", "stages=3", "--args", "bf16[32,32] bf16[32,32]", "--workers", "1")


def test_tune_measure_without_the_gpu_says_which_gpu_it_needs(cli, monkeypatch):
    monkeypatch.setattr(gpu_measure, "attached_gpu", lambda: None)
    code, out, err = cli(*TUNE, "--measure")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["inspector: --measure runs the program on an H100 attached to this machine, and this "
                                        "machine has none: without --measure, tune ranks by each kernel's floor estimate "
                                        "without a GPU"]


def _slower_first(monkeypatch):
    """The fake GPU, the first candidate measured (the floor's best) twice as slow as the next."""
    calls = []

    def fake(fn, args, kwargs, runs):
        calls.append(None)
        kind, hlo, method, timed = _fake_gpu(fn, args, kwargs, runs)
        scale = 2.0 if len(calls) == 1 else 1.0
        return kind, hlo, method, [[(name, ms * scale) for name, ms in run] for run in timed]

    monkeypatch.setattr(gpu_measure, "on_gpu", fake)


def test_tune_measure_ranks_gpu_candidates_by_the_gpus_time(cli, attached_h100, monkeypatch):
    _slower_first(monkeypatch)
    code, out, err = cli(*TUNE, "--measure", "--json")
    assert code == 0, err
    result = json.loads(out)
    (ranking,) = result["shapes"][0]["chips"]
    assert result["measured_on"] == "h100"
    rows = [r for r in ranking["rows"] if r["status"] == "ranked"]  # bm=16, 32 and the default's 128
    assert len(rows) > 1 and all(r["measured_seconds"] for r in rows)
    # the floor's best was measured first and twice as slow: the GPU's time ranks, not the floor
    floor_best = min(rows, key=lambda r: r["estimated_seconds"])
    assert floor_best["rank"] == len(rows)
    assert sorted(rows, key=lambda r: r["rank"]) == sorted(rows, key=lambda r: r["measured_seconds"])

    _slower_first(monkeypatch)
    code, out, err = cli(*TUNE, "--measure")
    assert code == 0, err
    assert "time (floor)" in out and "measured" in out
    assert "ranked by measured device time on the attached h100 where measured (x best from it), then by the time floor" in out
    assert "h100 best: " in out and "measured)" in out  # ranked by the GPU, not "best by the time floor"


def test_diff_on_an_attached_gpu_times_both_by_the_gpu_family(cli, attached_h100, monkeypatch):
    """With the H100 attached, the diff runs on it (no interpret mode) and the family's measure
    times the kernel and the reference; jax here runs on the CPU, so the kernel is a plain one."""
    import inspector.run.run as run_module

    monkeypatch.setattr(run_module, "_accelerator", lambda: "gpu")
    code, out, err = cli("diff", "samples/gpu_matmul.py:reference", "--ref", "reference", "--target", "h100",
                         "--args", "bf16[32,32] bf16[32,32]", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["mode"] == "accelerator (gpu)" and result["chip"] is None
    timing = result["timing"]
    assert timing["note"] == "device time on the NVIDIA H100 80GB HBM3 (fake), median of 3 runs"
    assert timing["kernel_s"] == pytest.approx(1e-5) and timing["reference_s"] == pytest.approx(1e-5)  # one launch each
