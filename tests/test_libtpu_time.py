"""libtpu's time estimate and bundles on real deviceless compiles (small shapes; each compile once
per module). Figures are checked against what libtpu itself writes elsewhere (the optimized
HLO's bundle_analysis_data), against the utilization columns, and against each other (a
figure extrapolated from cut grids against the whole simulation)."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT, line_of
from inspector.base.chips import get_chip
from inspector.libtpu import EXTRAPOLATED, LIBTPU, ROOFLINE, Budget, estimate_times
from inspector.libtpu.runner import PREFIX
from inspector.compilation.target import load_target

V5E = get_chip("tpu-v5e")


@pytest.fixture(scope="module")
def no_folder_left():
    """Every estimate in this module leaves no dump folder behind (checked at the end). Each
    session's folder is noted as it is made: other processes on the machine make their own."""
    from inspector.libtpu.runner import DumpSession, fresh_sessions, kept_sessions

    made = []
    enter = DumpSession.__enter__

    def noting(self):
        session = enter(self)
        made.append(session.folder)
        return session

    # the module's children kept between its estimates, and ended with it (the test process's kept ones aside)
    with pytest.MonkeyPatch.context() as patch, fresh_sessions(), kept_sessions(limit=3):
        patch.setattr(DumpSession, "__enter__", noting)
        yield made
    assert all(folder.startswith(os.path.join(tempfile.gettempdir(), PREFIX)) for folder in made)
    assert not [folder for folder in made if os.path.exists(folder)]


def _estimate(spec, args=None, sets=(), chip=V5E, **budget):
    target = load_target(spec, args=args, sets=list(sets))
    return target, estimate_times(target, chip, budget=Budget(**budget) if budget else None)


@pytest.fixture(scope="module")
def tiled(no_folder_left):
    return _estimate("samples/matmul.py:tiled", probe_steps=1024)  # its 504 steps simulated whole


@pytest.mark.libtpu
def test_pallas_kernel_gets_libtpus_time(tiled):
    target, estimate = tiled
    (m, k), (_, n) = target.args[0].shape, target.args[1].shape
    p = target.params
    steps = (m // p["bm"]) * (n // p["bn"]) * (k // p["bk"])
    kernel = estimate.kernel("matmul.1")
    assert kernel.estimate_source == LIBTPU and estimate.method == LIBTPU
    assert kernel.steps == steps and kernel.grid == [m // p["bm"], n // p["bn"], k // p["bk"]]
    assert kernel.estimated_seconds == pytest.approx(kernel.estimated_cycles / V5E.clock_hz)
    assert kernel.cycles_per_step == pytest.approx(kernel.estimated_cycles / steps)
    # at least the MXU's own time: 2 m k n flops at the chip's peak
    assert kernel.estimated_seconds >= 2 * m * k * n / V5E.bf16_flops
    assert estimate.totals["estimated_seconds"] == pytest.approx(sum(t.estimated_seconds * t.repeat for t in estimate.kernels))
    # its bundles first (what each simulation would cost), then the program whole, and again with its
    # pl.when init and store taken and skipped (at the same grid: 504 steps is within probe_steps here)
    assert [j.label for j in estimate.jobs] == ["bundles", "whole", "guards-heavy", "guards-light"]
    assert all(j.status == "ok" for j in estimate.jobs)


@pytest.mark.libtpu
def test_bundles_name_the_kernels_lines(tiled):
    _, estimate = tiled
    (kb,) = [b for b in estimate.bundles if b.kernel == "matmul.1"]
    assert kb.bundles_per_step and kb.bundles_per_step < kb.bundles
    assert kb.cycles_per_step == estimate.kernel("matmul.1").cycles_per_step
    dot = f"kernels/matmul.py:{line_of('kernels/matmul.py', 'jnp.dot(a_ref')}"
    top = kb.lines[0]
    assert top.source == dot and top.mxu_ops > 0  # the dot: most of the step, every MXU instruction
    assert all(line.mxu_ops == 0 for line in kb.lines[1:])
    assert kb.units["MXU"].used > 0 and kb.units["MXU"].capacity == 4
    assert kb.spill_stores == kb.spill_fills == 0 and not any(f.code == "register-spills" for f in estimate.findings)
    assert len(kb.listing) == kb.bundles and any(dot in row.sources for row in kb.listing)


@pytest.mark.libtpu
def test_asking_again_is_instant(tiled):
    target, first = tiled
    start = time.perf_counter()
    again = estimate_times(target, V5E, budget=Budget(probe_steps=1024))
    assert again.cached and time.perf_counter() - start < 5
    assert again.kernel("matmul.1").estimated_cycles == first.kernel("matmul.1").estimated_cycles


@pytest.mark.libtpu
def test_dump_compile_is_the_ordinary_compile(no_folder_left):
    """The child compiles the same program (the op names of the plain compile), and its profile
    says what the optimized HLO's bundle_analysis_data says."""
    from inspector.compilation.backends import Backend
    from inspector.jax_internals.aot import compile_request
    from inspector.libtpu.runner import DumpSession
    from inspector.compilation.stages import capture, lowered_program

    target = load_target("samples/matmul.py:tiled", args="bf16[512,512] bf16[512,512]")
    plain = capture(target, Backend(V5E), jaxpr_text=False).stages.hlo
    _, lowered, _ = lowered_program(target, Backend(V5E), memo=False)
    with DumpSession(V5E.topology, profile=True, bundles=False) as session:
        outcome = session.run(compile_request(lowered, V5E.topology), seconds=120, memory_bytes=4 * 2**30)
    assert outcome.status == "ok"
    names = re.compile(r"^\s*(?:ROOT )?%?([\w.-]+) = ", re.M)
    assert names.findall(outcome.hlo) == names.findall(plain)
    in_hlo = re.search(r'"bundle_analysis_data":\{"estimated_cycles":"(\d+)"', outcome.hlo)
    assert in_hlo and outcome.cycles == {"matmul.1": int(in_hlo[1])}


@pytest.fixture(scope="module")
def spilling(no_folder_left):
    return _estimate("tests/data/spill_kernels.py:chained_sin", "f32[64,512]", ["rows=16", "chains=8"])


@pytest.fixture(scope="module")
def not_spilling(no_folder_left):
    return _estimate("tests/data/spill_kernels.py:chained_sin", "f32[64,512]", ["rows=8", "chains=1"])


@pytest.mark.libtpu
def test_a_kernel_that_spills_names_its_lines(spilling):
    _, estimate = spilling
    (kb,) = estimate.bundles
    chains = f"tests/data/spill_kernels.py:{line_of('tests/data/spill_kernels.py', 'jnp.sin(x * (i + 1))')}"
    assert kb.spill_stores > 50 and kb.spill_fills > 50
    assert kb.spilled_lines[0] == chains
    assert next(line for line in kb.lines if line.source == chains).spills > 0
    # the listing's spill instructions are the utilization file's spill slots
    assert sum(row.spill_stores for row in kb.listing if row.depth >= 1) == kb.spill_stores
    (finding,) = [f for f in estimate.findings if f.code == "register-spills"]
    assert finding.severity == "warning" and finding.kernel == kb.kernel and chains in finding.message
    assert finding.data["stores"] == kb.spill_stores and "block_kv_compute" in finding.message


@pytest.mark.libtpu
def test_a_kernel_that_does_not_spill_names_none(not_spilling):
    _, estimate = not_spilling
    (kb,) = estimate.bundles
    assert kb.spill_stores == kb.spill_fills == 0 and kb.spilled_lines == []
    assert all(line.spills == 0 for line in kb.lines)
    assert not any(f.code == "register-spills" for f in estimate.findings)


@pytest.fixture(scope="module")
def matmul_1024(no_folder_left):
    spec, args, sets = "samples/matmul.py:tiled", "bf16[1024,1024] bf16[1024,1024]", ["bm=128", "bk=128", "bn=128"]
    whole = _estimate(spec, args, sets, probe_steps=512)[1]
    cut = _estimate(spec, args, sets, whole=False, probe_steps=16)[1]
    return whole, cut


@pytest.mark.libtpu
def test_extrapolated_from_cut_grids_agrees_with_the_whole(matmul_1024):
    whole, cut = matmul_1024
    exact, extrapolated = whole.kernel("matmul.1"), cut.kernel("matmul.1")
    assert exact.estimate_source == LIBTPU and exact.steps == 512
    assert extrapolated.estimate_source == EXTRAPOLATED and cut.method == EXTRAPOLATED
    assert extrapolated.estimated_cycles == pytest.approx(exact.estimated_cycles, rel=0.02)
    assert [p[0] for p in extrapolated.fit.points] == [16, 64]
    assert extrapolated.fit.grids == [[1, 2, 8], [1, 8, 8]]  # the inner (reduction) axis kept whole
    assert [j.label for j in cut.jobs] == ["bundles", "probe-1", "probe-2", "guards-heavy", "guards-light"]
    (finding,) = [f for f in cut.findings if f.code == "time-extrapolated"]
    assert finding.kernel == "matmul.1" and finding.data["steps"] == 512


@pytest.mark.libtpu
@pytest.mark.slow
def test_8192_cubed_finishes_within_the_budget(no_folder_left):
    start = time.perf_counter()
    _, estimate = _estimate("samples/matmul.py:tiled", "bf16[8192,8192] bf16[8192,8192]", ["bm=128", "bk=128", "bn=128"])
    took = time.perf_counter() - start
    kernel = estimate.kernel("matmul.1")
    assert kernel.estimate_source == EXTRAPOLATED and kernel.steps == 64**3
    assert sum(j.wall_seconds for j in estimate.jobs) <= estimate.budget["seconds"]
    assert took < estimate.budget["seconds"] + 30  # the budget plus the lowerings in this process
    assert 700 < kernel.cycles_per_step < 800  # libtpu: ~745 cycles a step at 1024^3 and 4096^3 (libtpu 0.0.42.1)
    assert any(f.code == "time-budget" for f in estimate.findings)


@pytest.mark.libtpu
def test_a_chip_libtpu_cannot_simulate_is_a_finding(no_folder_left):
    """v4: libtpu refuses to simulate the chip ("Dma latency model ... only supported on VF/VL/GF/GL").
    Nothing is simulated, one warning says so, and the bundles are still read."""
    _, estimate = _estimate("samples/matmul.py:tiled", "bf16[512,512] bf16[512,512]", chip=get_chip("tpu-v4"))
    kernel = estimate.kernel("matmul.1")
    assert kernel.estimate_kind == "floor" and kernel.estimated_seconds >= kernel.roofline_seconds
    (finding,) = [f for f in estimate.findings if f.code == "libtpu-refused"]
    assert finding.severity == "warning" and "tpu-v4" in finding.message and "--time-budget" in finding.message
    assert [j.label for j in estimate.jobs] == ["bundles"]
    assert [b.kernel for b in estimate.bundles] == ["matmul.1"]


def test_off_tpu_the_roofline(no_folder_left):
    _, estimate = _estimate("samples/matmul.py:tiled", "bf16[256,256] bf16[256,256]", chip=get_chip("cpu"))
    assert estimate.method == ROOFLINE and estimate.jobs == []
    assert all(k.estimate_source in (ROOFLINE, None) for k in estimate.kernels)
    assert [f.code for f in estimate.findings] == ["time-roofline-only"]


# ----------------------------------------------------------------------------- the dump folder


def _request():
    from inspector.compilation.backends import Backend
    from inspector.jax_internals.aot import compile_request
    from inspector.compilation.stages import lowered_program

    target = load_target("samples/matmul.py:tiled", args="bf16[512,512] bf16[512,512]")
    return compile_request(lowered_program(target, Backend(V5E), memo=False)[1], V5E.topology)


@pytest.mark.libtpu
def test_a_compile_past_its_limit_is_stopped_and_its_folder_removed():
    from inspector.libtpu.runner import DumpSession

    with DumpSession(V5E.topology, profile=True, bundles=True) as session:
        folder = session.folder
        outcome = session.run(_request(), seconds=0.05, memory_bytes=4 * 2**30)
        assert outcome.status == "time-limit" and not session.alive and os.path.isdir(folder)
    assert not os.path.exists(folder)


_KILLED = """
import sys, time
sys.path[:0] = {paths!r}
from inspector.base import environment; environment.prepare()
from inspector.libtpu.runner import DumpSession
session = DumpSession("v5e:2x2", profile=True, bundles=True).__enter__()
print(session.folder, session._proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.libtpu
def test_folder_removed_when_this_process_is_killed():
    """The CLI kills its worker with SIGKILL on Ctrl-C: no finally runs there, the janitor cleans."""
    code = _KILLED.format(paths=[str(ROOT)])
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        folder, child = proc.stdout.readline().split()
        assert os.path.isdir(folder)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and (os.path.exists(folder) or _alive(int(child))):
        time.sleep(0.1)
    assert not os.path.exists(folder) and not _alive(int(child))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.libtpu
def test_an_op_the_cost_model_gave_up_on_keeps_its_roofline_and_says_so(no_folder_left, monkeypatch):
    """XLA:TPU's cost model writes ~2^63 cycles for an op it cannot estimate (samples/transformer.py's
    exponential_reduce_fusion on the v5e, 1.44 ms measured against its 20 us roofline). Unsimulated,
    such an op keeps its floor, and a warning says so. Here figures of 10k cycles or more count as
    the sentinel, and the budget allows no simulation (as when it ends before them; simulating such
    ops alone: test_time_replay.py)."""
    from inspector.hlo import fusions

    target = load_target("samples/transformer.py:loss_fn")
    budget = Budget(seconds=1.0)  # no simulation fits: every op keeps what it had

    def estimate():  # not cached: the cache's key does not know the sentinel
        return estimate_times(target, V5E, budget=budget, use_cache=False)

    monkeypatch.setattr(fusions, "SENTINEL_CYCLES", 10_000)
    warned = estimate()
    flagged = {f.kernel: f for f in warned.findings if f.code == "xla-cost-unknown"}
    assert flagged and all(f.severity == "warning" and "lower bound" in f.message for f in flagged.values())
    for name in flagged:
        kernel = warned.kernel(name)
        assert kernel.estimate_kind == "floor" and kernel.estimated_seconds >= kernel.roofline_seconds
    monkeypatch.setattr(fusions, "SENTINEL_CYCLES", 2**62)
    assert not [f for f in estimate().findings if f.code == "xla-cost-unknown"]
