"""On a TPU VM: deviceless work stays off the chip, the chip's measurements are read right, and what
was measured on a real v5e (tests/data/chip/v5e_corpus.json) holds against the inspector's figures.
Tests marked ``chip`` run on an attached TPU only (the device tool's v5e); CI has none."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests/data/chip/v5e_corpus.json"

XSPACE = '''
planes { id: 1 name: "/device:TPU:0"
  lines { id: 1 name: "XLA Modules" timestamp_ns: 1000
    events { metadata_id: 1 offset_ps: 0 duration_ps: 100000000 }
    events { metadata_id: 1 offset_ps: 200000000 duration_ps: 110000000 }
    events { metadata_id: 4 offset_ps: 400000000 duration_ps: 1000 } }
  lines { id: 2 name: "XLA Ops" timestamp_ns: 1000
    events { metadata_id: 2 offset_ps: 1000000 duration_ps: 60000000 }
    events { metadata_id: 3 offset_ps: 70000000 duration_ps: 10000000 }
    events { metadata_id: 3 offset_ps: 85000000 duration_ps: 10000000 }
    events { metadata_id: 2 offset_ps: 201000000 duration_ps: 70000000 }
    events { metadata_id: 3 offset_ps: 280000000 duration_ps: 20000000 }
    events { metadata_id: 5 offset_ps: 400000000 duration_ps: 1000 } }
  event_metadata { key: 1 value { id: 1 name: "jit_f(1)" } }
  event_metadata { key: 2 value { id: 2 name: "%fusion.1 = f32[8]{0} fusion(x)" } }
  event_metadata { key: 3 value { id: 3 name: "%copy.2 = f32[8]{0} copy(y)" } }
  event_metadata { key: 4 value { id: 4 name: "jit_transfer(2)" } }
  event_metadata { key: 5 value { id: 5 name: "%other.1 = f32[] add()" } }
}
'''


def test_profile_reader_splits_runs_and_sums_launches():
    import jax

    from inspector.measure.profile import read_profile

    runs, kernels = read_profile(jax.profiler.ProfileData.from_text_proto(XSPACE), 2)
    assert runs == pytest.approx([100e-6, 110e-6])
    by = {k.name: k for k in kernels}
    assert set(by) == {"fusion.1", "copy.2"}  # the other module's op is not ours
    assert by["fusion.1"].seconds == pytest.approx(65e-6) and by["fusion.1"].launches == 1
    assert by["copy.2"].seconds == pytest.approx(20e-6) and by["copy.2"].launches == 1.5
    assert by["copy.2"].min_seconds == pytest.approx(10e-6) and by["copy.2"].max_seconds == pytest.approx(20e-6)


def test_profile_without_device_plane_is_one_line():
    import jax

    from inspector.measure.profile import UnreadableTrace, read_profile

    with pytest.raises(UnreadableTrace, match="no plane /device:TPU:0"):
        read_profile(jax.profiler.ProfileData.from_text_proto('planes { id: 1 name: "/host:CPU" }'), 1)


@pytest.mark.parametrize("text, kind", [
    ("Unable to initialize backend 'tpu': FAILED_PRECONDITION: TPU initialization failed: open(/dev/vfio/3): 16: "
     "Device or resource busy; Couldn't open iommu group /dev/vfio/3", "ChipBusy"),
    ("ABORTED: Internal error when accessing libtpu multi-process lockfile. Run \"$ sudo lsof -w /dev/vfio/0\"", "ChipBusy"),
    ("Unable to initialize backend 'tpu': NOT_FOUND: no TPU", "NoChip"),
    ("something else", None),
])
def test_a_chip_that_cannot_be_opened_is_one_line(text, kind):
    from inspector.base.errors import EXIT_UNAVAILABLE, EXIT_USAGE
    from inspector.base.environment import chip_failure

    found = chip_failure(RuntimeError(text))
    assert (type(found).__name__ if found else None) == kind
    if found is not None:
        assert found.exit_code == (EXIT_UNAVAILABLE if kind == "ChipBusy" else EXIT_USAGE)
        assert "\n" not in str(found)


def _prepare_in(env: dict, own: bool, attached: bool) -> dict:
    """The environment prepare() leaves in a fresh process (tpu_attached() answered as told)."""
    code = ("import glob, json, os\n"  # /dev/vfio as a TPU VM has it, before `import inspector` looks
            "real = glob.glob\n"
            f"glob.glob = lambda p, *a, **k: (['/dev/vfio/1'] if {attached} else []) if p.startswith('/dev/') else real(p, *a, **k)\n"
            "import inspector.base.environment as e\n"
            f"e.prepare(own_process={own})\n"
            "print(json.dumps({k: os.environ.get(k) for k in ('JAX_PLATFORMS', 'ALLOW_MULTIPLE_LIBTPU_LOAD', "
            "'INSPECTOR_DEVICELESS', 'TPU_ACCELERATOR_TYPE')}))\n"
            "print(json.dumps(e.chip_env()))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "TPU_", "ALLOW_MULTIPLE", "INSPECTOR_"))}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True)
    first, second = out.stdout.splitlines()
    return {**json.loads(first), "chip_env": json.loads(second)}


def test_on_a_tpu_vm_the_inspectors_processes_stay_off_the_chip():
    found = _prepare_in({}, own=True, attached=True)
    assert found["JAX_PLATFORMS"] == "cpu" and found["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    assert found["TPU_ACCELERATOR_TYPE"] is None  # the VM's own settings are the chip's: never ours to set
    assert found["chip_env"] == {"JAX_PLATFORMS": None, "INSPECTOR_DEVICELESS": None, "INSPECTOR_ON_CHIP": "1"}


def test_a_users_process_keeps_its_tpu_and_its_own_setting():
    assert _prepare_in({}, own=False, attached=True)["JAX_PLATFORMS"] is None  # `import inspector` in a notebook
    user = _prepare_in({"JAX_PLATFORMS": "tpu"}, own=True, attached=True)
    assert user["JAX_PLATFORMS"] == "tpu" and user["chip_env"] == {"INSPECTOR_ON_CHIP": "1"}
    assert _prepare_in({"INSPECTOR_ON_CHIP": "1"}, own=True, attached=True)["JAX_PLATFORMS"] is None


@pytest.mark.libtpu
def test_deviceless_compiles_while_another_process_holds_libtpus_lock(run_cli, tmp_path):
    """A process that loaded libtpu without ALLOW_MULTIPLE_LIBTPU_LOAD holds /tmp/libtpu_lockfile (as a
    training job on a TPU VM does): the inspector's compiles for a TPU target still run."""
    holder_code = ("from jax.experimental import topologies; topologies.get_topology_desc(platform='tpu', "
                   "topology_name='v5e:2x2'); print('held', flush=True); import time; time.sleep(120)")
    env = {k: v for k, v in os.environ.items() if k != "ALLOW_MULTIPLE_LIBTPU_LOAD"}
    env.update(JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1", TPU_WORKER_HOSTNAMES="localhost",
               TPU_ACCELERATOR_TYPE="v5litepod-4", TF_CPP_MIN_LOG_LEVEL="3")
    holder = subprocess.Popen([sys.executable, "-c", holder_code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        out = run_cli("show", "samples/matmul.py:xla", "--target", "tpu-v5e", "--args", "bf16[256,256] bf16[256,256]")
        assert out.returncode == 0, out.stderr
        assert "tpu-v5e" in out.stdout
    finally:
        holder.kill()
        holder.wait()


def test_measure_without_a_tpu_is_one_line(cli_run):
    out = cli_run("show", "samples/matmul.py:xla", "--measure")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "inspector: --measure runs the program on the TPU or GPU it targets, attached to this machine: cpu is not "
        "measured (give --target with the attached chip; diff times a program on this machine)"]
    out = cli_run("show", "samples/matmul.py:xla", "--measure", "--target", "tpu-v5e")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "inspector: --measure runs the program on a TPU attached to this machine, and this machine has none: "
        "--time gives libtpu's estimate without a TPU"]
    out = cli_run("tune", "samples/matmul.py:tiled", "--measure")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1


def test_a_cost_model_sentinel_is_no_estimate():
    from inspector.hlo.fusions import SENTINEL_CYCLES, _compiler_figures
    from inspector.hlo.module import Instruction

    def cycles(n):
        instr = Instruction.__new__(Instruction)
        instr.backend_config = {"estimated_cycles": str(n)}
        return _compiler_figures(instr)[0]

    assert cycles(12345) == 12345
    instr = Instruction.__new__(Instruction)
    instr.backend_config = {"estimated_cycles": "12345"}
    assert _compiler_figures(instr)[1] is False
    assert cycles(2**63 - 1) is None and cycles(SENTINEL_CYCLES) is None  # samples/transformer.py on the v5e
    instr = Instruction.__new__(Instruction)
    instr.backend_config = {"estimated_cycles": str(2**63 - 1)}
    assert _compiler_figures(instr)[1] is True  # and said so: the estimate warns (xla-cost-unknown)


# ----------------------------------------------------------------------------- the corpus measured on the chip

def _corpus():
    return json.loads(CORPUS.read_text())


def _chip_corpus():
    """tests/bench/chip_corpus.py, which made the corpus and reads it."""
    spec = importlib.util.spec_from_file_location("chip_corpus", ROOT / "tests/bench/chip_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["chip_corpus"] = corpus  # its dataclasses look their module up
    spec.loader.exec_module(corpus)
    return corpus


def _rows(sweep: str):
    return _chip_corpus().sweep_rows(_corpus(), sweep)


def _spearman(a, b):
    return _chip_corpus().spearman(a, b)


def test_corpus_says_where_it_was_measured():
    data = _corpus()
    assert data["device_kind"] == "TPU v5 lite" and data["chip"] == "tpu-v5e"
    assert {"jax", "jaxlib", "libtpu"} <= set(data["versions"])
    assert set(data["entries"]) == {e.label for e in _chip_corpus().ENTRIES}


def test_matmul_sweep_estimate_against_the_chip():
    """The blocked matmul at 4096^3: libtpu's figure within 25% of the chip on every candidate, the
    ranking right (Spearman >= 0.9), the first pick within 5% of the fastest."""
    rows = _rows("sweep.matmul")
    assert len(rows) >= 20
    for label, measured, est, roof in rows:
        assert 0.75 <= est / measured <= 1.25, label
        assert roof <= 1.1 * measured, label
    assert _spearman([r[1] for r in rows], [r[2] for r in rows]) >= 0.9
    pick = min(rows, key=lambda r: r[2])
    assert pick[1] <= 1.05 * min(r[1] for r in rows)


@pytest.mark.parametrize("sweep", ["sweep.flash", "sweep.flash_full"])
def test_flash_sweeps_against_the_chip(sweep):
    """samples/attention.py:flash, causal (its pl.when skips the blocks above the diagonal) and not:
    libtpu's single simulation gave the causal one 0.15-0.5x of the chip's time; with the guarded
    steps weighted, all within 2x and most within 25% (the causal 1024-row blocks are 0.70x), ranked
    right, the pick the fastest."""
    rows = _rows(sweep)
    assert len(rows) == {"sweep.flash": 12, "sweep.flash_full": 8}[sweep]
    for label, measured, est, roof in rows:
        assert 0.5 <= est / measured <= 2, label
        assert roof <= 1.1 * measured, label
    assert sum(0.75 <= r[2] / r[1] <= 1.25 for r in rows) >= 0.8 * len(rows)
    assert _spearman([r[1] for r in rows], [r[2] for r in rows]) >= 0.9
    assert min(rows, key=lambda r: r[2])[1] <= 1.05 * min(r[1] for r in rows)


UNSURE = set(_chip_corpus().UNSURE)


def test_every_kernel_of_the_corpus_respects_physics_and_a_figure_off_by_2x_says_it_is_unsure():
    """Every kernel of 0.1 ms or more on the chip: no sentinel, no estimate below the roofline, the
    roofline no more than 10% above the chip; an estimate outside 2x of the chip comes with a
    finding that says the figure is unsure (libtpu gave none or aborted, the budget cut it, or a
    guard decided at run time), or is itself labelled a floor or a range."""
    rows = _chip_corpus().kernel_rows(_corpus(), 1e-4)
    assert len(rows) >= 90
    unlabelled = set()
    for label, name, measured, est, source, roof, findings, kind in rows:
        assert est < 1.0 and est >= roof * 0.999, (label, name, est, roof)
        assert roof <= 1.1 * measured, (label, name, roof, measured)
        if not 0.5 <= est / measured <= 2 and kind == "estimate" and not UNSURE & set(findings):
            unlabelled.add((label, name))
    assert unlabelled == set(KNOWN_OFF)
    within = sum(1 for r in rows if 0.75 <= r[3] / r[2] <= 1.25)
    assert within >= 0.65 * len(rows)  # 2026-12-06: 144 of 181, of them the fourth held-out round's 32 of 39


def test_the_fourth_held_out_round_meets_issue_53s_bar():
    """Issue 53's done-when on its own held-out round (23 programs from 9 sources, estimated at
    the default budget): 80% of the kernels of 0.1 ms or more within 25% of the chip, and every
    figure more than 2x off labelled a floor or a range."""
    kernels, within, _, off, labelled = _chip_corpus().round_figures(_corpus(), "heldout4")
    assert kernels >= 39 and within >= 0.8 * kernels, (within, kernels)  # 2026-12-06: 32 of 39
    assert labelled == off, (labelled, off)


def test_the_corpus_kernels_are_all_within_2x_of_the_chip_and_most_within_25_percent():
    """Issue 45's bar on the corpus (every sample, JAX's kernels, the sweeps, the XLA programs; the
    held-out kernels and the probes are checks of their own): every kernel of 0.1 ms or more within
    2x of the chip, 80% within 25%. train_step's exponential_reduce_fusion was 0.01x (its roofline:
    XLA's cost model gives up on it and libtpu's simulation of the program stops before it) and
    attention's reference softmax 2.26x (the cost model's) until XLA ops were simulated alone."""
    rows = [r for r in _chip_corpus().kernel_rows(_corpus(), 1e-4) if not r[0].startswith(("heldout", "probe."))]
    assert len(rows) >= 60
    off = {(r[0], r[1]): (round(r[3] / r[2], 2), r[7], UNSURE & set(r[6])) for r in rows if not 0.5 <= r[3] / r[2] <= 2}
    assert set(off) == set(KNOWN_OUTSIDE_2X), off
    assert all(kind == "floor" or unsure for _, kind, unsure in off.values()), off  # each says it is unsure
    assert sum(0.75 <= r[3] / r[2] <= 1.25 for r in rows) >= 0.8 * len(rows)  # 2026-12-06: 54 of 65


# corpus kernels outside 2x of the chip since the estimate became the same on every machine (its
# plan made from the program's bundles), each labelled, and what is known of each
KNOWN_OUTSIDE_2X = {
    ("transformer.train_step", "exponential_reduce_fusion"):
        "0.01x, a floor (xla-cost-unknown): the plan predicts its simulation alone at 8.4M bundles, past what one "
        "compile may, from its 16 MiB f32 result kept in VMEM (budget.VMEM_RESULT_BUNDLES, measured on a pred "
        "mask of the same bytes and 4x the elements); alone it simulates in 16 s and 0.8 GB here (889.9 us, 0.62x)",
    ("jax.splash_mqa", "splash_mqa_fwd_no_residuals.1"):
        "0.49x, extrapolated from cut grids (time-budget, libtpu-below-roofline); simulated whole (before the plan "
        "was made from bundles) it was 1.19x; why the line through the cuts falls short is not known",
}


# estimates outside 2x of the chip that no finding labels unsure, and what is known of each
KNOWN_OFF = {
    ("probe.copy:rows=8,cols=128", "copy.1"):
        "2.003x: libtpu charges a grid step that copies 4 KiB in and 4 KiB out 397 ns, the v5e takes 198 ns; "
        "heldout.gather's steps, as large, libtpu charges 170 ns and the chip 197 ns: cause unknown",
}


@pytest.mark.libtpu
@pytest.mark.parametrize("label", ["transformer.loss_fn", "jax.flash_attention_ref", "heldout2.sglang_fused_mlp",
                                   "heldout3.gpt2_loss"])
def test_the_roofline_stays_below_the_chip(label):
    """Per kernel of 10 us or more (async copy starts aside: the chip times their issue, not the copy),
    the roofline computed now is no more than 10% above the time the v5e measured (a reduce-window counted window x outputs was 15x above it, an XLA cost-model
    sentinel gave 6.1e9 s; sglang's fused MLP, its conditional copies counted at their most, 1.41x; GPT-2's
    embedding lookup, its table counted whole, 10.9x)."""
    from inspector.base.chips import get_chip
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs
    from inspector.compilation.target import load_target

    entry = _corpus()["entries"][label]
    sets = [f"{k}={v}" for k, v in entry["sets"].items()]
    report = make_report(load_target(entry["spec"], args=entry["args"], sets=sets), get_chip("tpu-v5e"),
                         Needs(compile=True, fusions=True, pallas=True))
    measured = {k["name"]: k["seconds"] / k["launches"] for k in entry["measured"]["kernels"]}
    checked = 0
    for k in report.fusions.kernels:
        if measured.get(k.name, 0) >= 1e-5 and not k.opcode.endswith("-start"):
            checked += 1
            assert k.roofline_s <= 1.1 * measured[k.name], (k.name, k.roofline_s, measured[k.name])
        assert k.compiler_cycles is None or k.compiler_cycles < 2**62
    assert checked >= 1


def test_a_measurement_lands_beside_the_estimate_kernel_by_kernel(capsys):
    """--measure's figures in the Report and the fusions table: each kernel's device time matched by
    name, the program's in the totals, and est./meas. where there is an estimate (here the
    roofline: a CPU target has no libtpu)."""
    import dataclasses

    import inspector
    from inspector.measure.model import KernelMeasure, Measurement
    from inspector.results.report import with_measurement

    report = inspector.inspect("samples/matmul.py:tiled", "bf16[256,256] bf16[256,256]", target="cpu", roofline="tpu-v5e")
    kernels = report.fusions.kernels
    kernels[0] = dataclasses.replace(kernels[0], estimated_seconds=kernels[0].roofline_s, estimate_source="roofline")
    first = kernels[0].name
    measured = Measurement(chip="tpu-v5e", device_kind="TPU v5 lite", versions={"jax": "0.10.2"}, runs=5, seconds=4e-6,
                           seconds_min=3.9e-6, seconds_max=4.1e-6, method="test",
                           kernels=[KernelMeasure(name=first, seconds=4e-6, launches=2, min_seconds=2e-6, max_seconds=2e-6),
                                    KernelMeasure(name="not-in-the-report", seconds=1e-7, launches=1, min_seconds=1e-7,
                                                  max_seconds=1e-7)])
    before, kernels_before = report, [dataclasses.replace(k) for k in report.fusions.kernels]
    report = with_measurement(report, measured)
    (kernel,) = [k for k in report.fusions.kernels if k.name == first]
    assert kernel.measured_seconds == pytest.approx(2e-6)  # per launch
    assert report.fusions.totals["measured_seconds"] == 4e-6 and report.measured.unmatched == ["not-in-the-report"]
    # the Report it was given is whole as it was: its kernels, totals and measurement untouched
    assert before.fusions.kernels == kernels_before and "measured_seconds" not in before.fusions.totals
    assert before.measured is None and measured.unmatched == []
    report.show("fusions")
    out = capsys.readouterr().out
    assert "measured" in out and "est./meas." in out and f"{kernel.roofline_s / 2e-6:.2f}x" in out


def test_only_names_a_group_and_refuses_a_word_that_names_nothing():
    corpus = _chip_corpus()
    group = corpus._entries("heldout2")
    assert group and all(e.label.startswith("heldout2.") for e in group)
    with pytest.raises(SystemExit, match="heldout9"):
        corpus._entries("heldout2,heldout9")
