"""libtpu's dump readers on stored excerpts of real dumps, and the parts of the time estimate that
need no compile: the reduced grids and the fit, the cache's round trip, unreadable dumps."""
import dataclasses
import math
import types

import pytest

from conftest import DATA
from inspector.base.chips import get_chip
from inspector.libtpu import budget as budget_mod
from inspector.libtpu import dumps, store
from inspector.libtpu.bundles import NO_SOURCE, kernel_bundles
from inspector.libtpu.answer import Collected, answer
from inspector.libtpu.model import EXTRAPOLATED, LIBTPU, ROOFLINE, KernelTime, StepFit, TimeEstimate

EXCERPTS = DATA / "libtpu"
BUNDLES = (EXCERPTS / "matmul_v5e-final_bundles.txt").read_text()
UTILIZATION = (EXCERPTS / "matmul_v5e-final_hlo-static-per-bundle-utilization.txt").read_text()


def test_profile_gives_cycles_per_op():
    text = (EXCERPTS / "matmul_v5e_static_llo_profile.textproto").read_text()
    assert dumps.read_profile(text) == {"matmul.1": 9207}


@pytest.mark.parametrize("text", ["", "hlo_op_estimate { hlo_op_name: \"x\" }", "estimated_cycles: 5",
                                  "hlo_op_estimate { hlo_op_name: \"x\" estimated_cycles: 1.5e3 }"])
def test_profile_in_another_format_is_refused(text):
    with pytest.raises(dumps.UnreadableDump):
        dumps.read_profile(text, "x_static_llo_profile.textproto")


def test_read_profiles_keeps_going_past_a_bad_file(tmp_path):
    (tmp_path / "a_static_llo_profile.textproto").write_text('hlo_op_estimate {\n hlo_op_name: "a"\n estimated_cycles: 7\n}\n')
    (tmp_path / "b_static_llo_profile.textproto").write_text("op_estimate_v2 { name: b cycles: 9 }")
    cycles, problems = dumps.read_profiles(str(tmp_path))
    assert cycles == {"a": 7}
    assert len(problems) == 1 and problems[0].startswith("b_static_llo_profile.textproto: ")


def test_bundles_align_with_utilization_rows():
    bundles = dumps.read_bundles(BUNDLES)
    use = dumps.read_utilization(UTILIZATION)
    assert len(bundles) == len(use.rows) > 100
    assert use.units[:3] == ["MXU", "XLU", "VALU"] and "VSTORE:SPILL" in use.units
    assert dict(zip(use.units, use.capacity))["MXU"] == 4  # v5e: the capacity row of the utilization dump (libtpu 0.0.42.1)
    assert [b.index for b in bundles] == list(range(len(bundles)))
    mxu = use.units.index("MXU")
    first = next(b.index for b in bundles if any(i.opcode.startswith("vmatmul") for i in b.instructions))
    assert not any(row[mxu] for row in use.rows[:first])  # the MXU column is its occupancy: none before
    assert sum(row[mxu] for row in use.rows[first:]) > 0  # the first matmul, some after it
    loop = [b for b in bundles if b.depth >= 1]
    assert loop and loop[0].marker == "LB"  # the grid loop starts with a loop-body marker


def test_source_lines_of_the_kernel_body():
    bundles = dumps.read_bundles(BUNDLES, relative=lambda path: path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
    matmuls = [i for b in bundles for i in b.instructions if i.opcode.startswith("vmatmul")]
    assert matmuls and all(i.source and i.source.startswith("kernels/matmul.py:") for i in matmuls)
    assert len({i.source for i in matmuls}) == 1  # one line of the kernel does the dot
    entry = bundles[0].instructions
    assert entry and entry[0].opcode.startswith("inlined_call_operand")
    assert not any(i.spill for b in bundles for i in b.instructions)


def test_bundle_answers_on_the_excerpt():
    kb = kernel_bundles("matmul.1", "custom-call:pallas", dumps.read_bundles(BUNDLES), dumps.read_utilization(UTILIZATION),
                        pallas=True, steps=8, cycles_per_step=1000.0)
    assert kb.bundles_per_step == sum(1 for b in dumps.read_bundles(BUNDLES) if b.depth >= 1)
    assert kb.units["MXU"].capacity == 4 and 0 < kb.units["MXU"].share <= 1
    assert kb.spill_stores == kb.spill_fills == 0 and kb.spilled_lines == []
    assert sum(line.share for line in kb.lines) == pytest.approx(1.0)
    dot = max(kb.lines, key=lambda line: line.mxu_ops)
    assert dot.mxu_ops > 0 and dot.source != NO_SOURCE
    assert kb.bound == "DMA waits"  # 1000 cycles a step over far fewer bundles: waiting


# A bundle file written by hand: a value computed on line 12 is spilled, filled back, spilled
# again from the fill and filled: every spill names line 12.
SPILLING = """= control target key start
LH: loop header
= control target key end

     0   :  { %s1_s0 = inlined_call_operand.hbm [shape: f32[8,128]] }
   0x1 LB: > { %v10_v1 = vsin.f32 %v9_v0 /* loc("/src/k.py":12:8 to :20) */  ;;  %s2_s1 = smov 0 }
   0x2   : > { %20 = vst [vmem:[#allocation3_spill] sm:$0xff] /*vst_source=*/%v10_v1 }
   0x3   : > { %v21_v1 = vld [vmem:[#allocation3_spill] sm:$0xff] }
   0x4   : > { %22 = vst [vmem:[#allocation4_spill] sm:$0xff] /*vst_source=*/%v21_v1  ;;  %v23_v2 = vadd.f32 %v21_v1, %v21_v1 /* loc("/src/k.py":13:4 to :9) */ }
   0x5   : > { %v24_v3 = vld [vmem:[#allocation4_spill] sm:$0xff] }
   0x6   :  { %25 = vsyncpa [#allocation5], 1 }
"""
SPILLING_USE = ("== CAPACTIY:\nMXU, XLU, VALU, VPOP, EUP, VLOAD, VLOAD:FILL, VSTORE, VSTORE:SPILL, SALU\n"
                "    4     3     4     2     1     3     3     1     1     2\n== UTILIZATION:\n"
                "0 0 0 0 0 0 0 0 0 0\n0 0 1 0 0 0 0 0 0 1\n0 0 0 0 0 0 0 1 1 0\n0 0 0 0 0 1 1 0 0 0\n"
                "0 0 1 0 0 0 0 1 1 0\n0 0 0 0 0 1 1 0 0 0\n0 0 0 0 0 0 0 0 0 0\n")


def test_spills_name_the_line_whose_value_spills():
    bundles = dumps.read_bundles(SPILLING, relative=lambda p: p.lstrip("/"))
    kinds = [(i.spill, i.slot, i.stored) for b in bundles for i in b.instructions if i.spill]
    assert kinds == [("store", "#allocation3_spill", "%v10_v1"), ("fill", "#allocation3_spill", None),
                     ("store", "#allocation4_spill", "%v21_v1"), ("fill", "#allocation4_spill", None)]
    kb = kernel_bundles("k.1", "custom-call:pallas", bundles, dumps.read_utilization(SPILLING_USE), pallas=True,
                        steps=4, cycles_per_step=None)
    assert (kb.spill_stores, kb.spill_fills, kb.bundles_per_step) == (2, 2, 5)
    assert kb.spilled_lines == ["src/k.py:12"]
    line12 = next(line for line in kb.lines if line.source == "src/k.py:12")
    assert line12.spills == 4 and line12.bundles == 1
    assert kb.bound == "stores"  # 2 stores in 5 bundles of 1 slot: 40%, above VALU's 2 of 4 x 5


@pytest.mark.parametrize("text", ["nothing here", "= control target key start\nno bundles\n"])
def test_bundles_in_another_format_are_refused(text):
    with pytest.raises(dumps.UnreadableDump):
        dumps.read_bundles(text)


def test_utilization_rows_of_another_width_are_refused():
    with pytest.raises(dumps.UnreadableDump):
        dumps.read_utilization("== CAPACTIY:\nMXU, XLU\n 4 3\n== UTILIZATION:\n1 2 3\n")
    with pytest.raises(dumps.UnreadableDump):
        dumps.read_utilization("== UNITS:\nMXU\n")


def test_abort_reason_is_libtpus_line():
    log = ("noise\nF1201 15:14:44.752693   21907 llo_dumper.cc:1585] Static LLO profiling of matmul.1 failed: "
           "INVALID_ARGUMENT: Dma latency model is currently only supported on VF/VL/GF/GL.\n*** Check failure stack trace: ***\n")
    assert dumps.abort_reason(log) == ("Static LLO profiling of matmul.1 failed: INVALID_ARGUMENT: Dma latency model is "
                                       "currently only supported on VF/VL/GF/GL.")
    assert dumps.abort_reason("all fine") is None


def test_llo_files_name_kernels_not_libtpus_own_parts(tmp_path):
    for name in ("17-matmul.1-02-final_bundles.txt", "17-matmul.1-00-final_hlo-static-per-bundle-utilization.txt",
                 "17-TLP-02-final_bundles.txt", "17-<late-finalization>-02-final_bundles.txt",
                 "18-fusion.3-07-post-ra.txt", "18-convolution-fusion.2-02-final_bundles.txt"):
        (tmp_path / name).write_text("")
    files = dumps.llo_files(str(tmp_path))
    assert set(files) == {"matmul.1", "convolution-fusion.2"}
    assert set(files["matmul.1"]) == {dumps.BUNDLES_LABEL, dumps.UTILIZATION_LABEL}


# ----------------------------------------------------------------------------- the budget


@pytest.mark.parametrize("grid, steps, cores, expected", [
    ((4, 18, 7), 64, 1, (1, 9, 7)),  # the inner axis whole, the next cut
    ((4, 18, 7), 256, 1, (2, 18, 7)),
    ((64, 64, 64), 64, 1, (1, 1, 64)),
    ((64, 64, 64), 256, 1, (1, 4, 64)),
    ((3, 5), 64, 1, (3, 5)),  # small enough already
    ((1, 100000), 64, 1, (1, 64)),
    ((64, 64, 64), 64, 2, (2, 1, 64)),  # two TensorCores share the first parallel axis: keep 2
    ((64, 64, 64), 8, 1, (1, 1, 64)),  # the innermost axis whole (up to 64 steps) whatever the cap
    ((16, 8, 8), 8, 1, (1, 1, 8)),
    ((2, 1000), 8, 1, (1, 64)),
])
def test_reduced_grid(grid, steps, cores, expected):
    assert budget_mod.reduced_grid(grid, ("parallel", "parallel", "arbitrary")[-len(grid):], steps, cores) == expected


def test_fit_and_extrapolation():
    fit = budget_mod.fit_steps([(128, 1000 + 745 * 128), (64, 1000 + 745 * 64)], [[1, 1, 64], [1, 2, 64]])
    assert fit.per_step == pytest.approx(745) and fit.intercept == pytest.approx(1000)
    assert budget_mod.extrapolate(fit, 262144) == pytest.approx(1000 + 745 * 262144)
    assert budget_mod.fit_steps([(64, 10), (64, 12)], []) is None
    assert budget_mod.fit_steps([(64, 10), (128, 5)], []) is None


def test_a_plane_through_three_cuts_counts_each_run_of_the_innermost_axis():
    """A kernel whose innermost axis was cut too: each run of it costs its first and last steps
    beside its steps (a reduction's init and write-back), which a line through steps alone misses."""
    def cycles(grid):  # 900 fixed, 5,000 a run of the innermost axis, 700 a step
        return 900 + 5000 * budget_mod.rows_of(grid) + 700 * math.prod(grid)
    points = [(math.prod(g), cycles(g), list(g)) for g in ((1, 1, 2), (1, 1, 4), (1, 2, 2))]
    full, fit = budget_mod.full_grid_cycles(points, (4, 8, 64))
    assert full == pytest.approx(cycles((4, 8, 64))) and fit.per_row == pytest.approx(5000)
    line = [(math.prod(g), cycles(g), list(g)) for g in ((1, 1, 64), (1, 4, 64))]  # the innermost axis whole
    assert budget_mod.full_grid_cycles(line, (4, 8, 64))[0] == pytest.approx(cycles((4, 8, 64)))


# ----------------------------------------------------------------------------- the answer


def _kernel(name, kind, roofline=1e-6, compiler_cycles=None):
    return types.SimpleNamespace(name=name, kind=kind, roofline_s=roofline, compiler_cycles=compiler_cycles,
                                 compiler_gave_up=False, repeat=1)


def _answer(kernels, chip="tpu-v5e", **got):
    """What the estimate answers from what its compiles gave (``got``: Collected's fields)."""
    return answer(get_chip(chip), kernels, Collected(**got), budget_mod.Budget(), [], [])


def test_sources_per_kernel():
    estimate = _answer([_kernel("mm.1", "custom-call:pallas"), _kernel("fusion", "fusion:loop", compiler_cycles=3000),
                        _kernel("fusion.2", "fusion:loop", roofline=1e-7), _kernel("copy.1", "copy", compiler_cycles=None, roofline=2e-6)],
                       grids={"mm.1": (4, 64)}, points={"mm.1": [(64, 64 * 700 + 500, [1, 64]), (128, 128 * 700 + 500, [2, 64])]},
                       cycles={"fusion.2": 1200})
    by = {k.name: k for k in estimate.kernels}
    assert by["mm.1"].estimate_source == EXTRAPOLATED and by["mm.1"].estimated_cycles == pytest.approx(256 * 700 + 500)
    assert by["mm.1"].cycles_per_step == pytest.approx(700) and by["mm.1"].steps == 256
    # not simulated: its floor, though the compiler's cost model gave it cycles (no bound either way)
    assert by["fusion"].estimate_source == ROOFLINE and by["fusion"].estimated_seconds == pytest.approx(1e-6)
    assert by["fusion.2"].estimate_source == LIBTPU and by["fusion.2"].estimated_seconds == pytest.approx(1200 / 1.5e9)
    assert by["copy.1"].estimate_source == ROOFLINE and by["copy.1"].estimated_seconds == pytest.approx(2e-6)
    assert [by[k].estimate_kind for k in ("mm.1", "fusion", "fusion.2", "copy.1")] == ["estimate", "floor", "estimate", "floor"]
    assert estimate.totals["estimate_kind"] == "floor"  # a floor among the kernels: the total is one too
    assert estimate.totals["floor_share"] == pytest.approx(3e-6 / estimate.totals["estimated_seconds"])
    assert estimate.method == EXTRAPOLATED
    assert estimate.totals["estimated_seconds"] == pytest.approx(sum(k.estimated_seconds for k in estimate.kernels))
    assert [f.code for f in estimate.findings] == ["time-extrapolated"]


def test_a_simulated_time_below_the_roofline_gives_way_to_the_roofline_with_a_warning():
    estimate = _answer([_kernel("fusion.2", "fusion:loop", roofline=2e-6), _kernel("fusion.3", "fusion:loop", roofline=1e-7)],
                       cycles={"fusion.2": 1500, "fusion.3": 1500})  # 1 us on a 1.5 GHz v5e: below the first's roofline only
    by = {k.name: k for k in estimate.kernels}
    assert by["fusion.2"].estimate_source == ROOFLINE and by["fusion.2"].estimated_seconds == pytest.approx(2e-6)
    assert by["fusion.2"].estimate_kind == "estimate"  # libtpu simulated it: at its bound, or under (a warning says it)
    assert by["fusion.3"].estimate_source == LIBTPU and by["fusion.3"].estimated_seconds == pytest.approx(1e-6)
    (finding,) = [f for f in estimate.findings if f.code == "libtpu-below-roofline"]
    assert finding.kernel == "fusion.2" and finding.data["libtpu_seconds"] == pytest.approx(1e-6)


def test_unreadable_dump_is_an_info_finding_and_no_figure():
    estimate = _answer([_kernel("mm.1", "custom-call:pallas")], grids={"mm.1": (8,)}, points={"mm.1": [(8, 9000, [8])]},
                       llo={"mm.1": {dumps.BUNDLES_LABEL: "a format of libtpu 9.9\n", dumps.UTILIZATION_LABEL: UTILIZATION}})
    assert estimate.bundles == []  # no bundles rather than wrong ones
    (finding,) = [f for f in estimate.findings if f.code == "libtpu-dump-unreadable"]
    assert finding.severity == "info" and "control target legend" in finding.message
    assert estimate.kernel("mm.1").estimated_cycles == 9000  # the profile still counts


def test_estimate_round_trips_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    estimate = _answer([_kernel("mm.1", "custom-call:pallas")], grids={"mm.1": (8,)}, points={"mm.1": [(8, 9000, [8])]},
                       llo={"mm.1": {dumps.BUNDLES_LABEL: BUNDLES, dumps.UTILIZATION_LABEL: UTILIZATION}})
    estimate.kernels.append(KernelTime(name="x", kind="fusion:loop", estimated_cycles=5.0, estimated_seconds=1e-9,
                                       estimate_source=EXTRAPOLATED,
                                       fit=StepFit(intercept=1.0, per_step=2.0, points=[(1, 3)], grids=[[1]])))
    assert estimate.bundles and estimate.bundles[0].listing
    assert store.store("k" * 64, estimate)
    back = store.load("k" * 64)
    assert isinstance(back, TimeEstimate) and dataclasses.asdict(back) == dataclasses.asdict(estimate)
    assert back.kernels[-1].fit.points == [(1, 3)]
    (tmp_path / ("k" * 64 + ".json")).write_text('{"schema": 1, "key": "' + "k" * 64 + '", "kind": "libtpu-time", "result": {"chip": 3}}')
    assert store.load("k" * 64) is None  # not what this version writes: a miss
