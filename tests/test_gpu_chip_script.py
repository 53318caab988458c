"""tests/bench/gpu_chip.py, the one call a session lent an NVIDIA GPU runs, tried here without one:
its plumbing end to end with a fake device (the deviceless compile stands in for the attached GPU's,
made-up launch times), the JSON file's schema, and every entry loadable, so that the lent machine's
one call does not fail on a typo. What only a real GPU exercises: CUPTI's per-kernel times
(AttachedGpu.measure), the attached compile's dumps (AttachedGpu.compile_dumps) and the verbs,
which the fake does not run."""
from __future__ import annotations

import functools
import importlib.util
import json

import pytest

from conftest import ROOT, SESSION_CACHE
from inspector.jax_internals.cuda_topology import plugin_missing


@functools.cache
def script():
    spec = importlib.util.spec_from_file_location("gpu_chip", ROOT / "tests/bench/gpu_chip.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entries_are_enough_and_each_loads(monkeypatch):
    from inspector.compilation.target import load_target

    monkeypatch.chdir(ROOT)
    s = script()
    labels = [e[0] for e in s.ENTRIES]
    assert len(labels) >= 20 and len(set(labels)) == len(labels) and set(s.COMPILED) <= set(labels)
    assert sum(1 for e in s.ENTRIES if e[1].startswith(s.OPS)) >= 10  # jax's own GPU kernels
    for label, spec, args, sets in s.ENTRIES:
        target = load_target(spec, args, sets=list(sets))  # no trace: the file, the function, its inputs and params
        assert target.args, label


def test_kernels_are_matched_by_launch_name_a_second_launch_apart():
    s = script()
    est = {"kernels": [{"name": "k", "estimated_seconds": 1e-6, "roofline_s": 5e-7},
                       {"name": "k", "estimated_seconds": None, "roofline_s": 2e-6}]}
    meas = {"kernels": [{"name": "k", "seconds": 2e-6}, {"name": "k#2", "seconds": 4e-6}, {"name": "other", "seconds": 1e-6}]}
    assert [(m["name"], m["estimated_s"], m["ratio"]) for m in s.matched(est, meas)] == [
        ("k", 1e-6, 2.0), ("k#2", 2e-6, 2.0), ("other", None, None)]


def test_an_unknown_entry_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        script().main(["--fake", "--out", str(tmp_path), "--only", "nope"])
    assert stop.value.code == 2 and "no entry nope" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra is not installed")
def test_the_fake_run_writes_the_whole_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("INSPECTOR_CACHE_DIR", SESSION_CACHE)
    s = script()
    assert s.main(["--fake", "--out", str(tmp_path), "--only", "gpu_matmul.small,jax.layer_norm", "--iterations", "2"]) == 0
    result = json.loads((tmp_path / "gpu_chip.json").read_text())
    assert tuple(result) == s.SCHEMA and result["schema"] == s.VERSION and result["fake"] is True
    assert result["device"]["chip"] == "h200" and result["device"]["compute_capability"] == "9.0a"
    assert [v["name"] for v in result["verbs"]] == [name for name, _, _ in s.verb_steps("h200")]
    assert {v["argv"][1] for v in result["verbs"]} == {"doctor", "show", "check", "diff"}
    assert any("--measure" in v["argv"] for v in result["verbs"]) and all(v["rc"] == 0 for v in result["verbs"])
    matmul, norm = result["kernels"]
    for entry in (matmul, norm):
        assert entry["estimate"]["error"] is None and entry["measured"]["error"] is None, entry["label"]
        assert entry["estimate"]["paired"] and entry["measured"]["iterations"] == 2
        assert entry["matched"] and all(m["ratio"] > 0 for m in entry["matched"])  # each launch has its estimate
        assert entry["measured_over_estimate"] > 0
    launched = matmul["estimate"]["kernels"][0]
    assert (launched["name"], launched["hlo_name"], launched["shared_memory_bytes"]) == ("kernel", "pallas_call.1", 98304)
    (compiled,) = result["compiles"]  # the compiled entries asked for: the layer norm
    assert compiled["label"] == "jax.layer_norm" and compiled["error"] is None
    assert compiled["deviceless"]["ptx_targets"] == ["sm_90a"] and all(compiled["same"].values())
    summary = result["summary"]
    assert summary["entries"] == summary["measured_entries"] == summary["estimated_entries"] == 2
    assert summary["matched_kernels"] == summary["measured_kernels"] == 2 and summary["compiles_same"] == {"jax.layer_norm": True}


@pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra is not installed")
def test_what_the_limit_leaves_no_time_for_is_recorded_skipped(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    s = script()
    assert s.main(["--fake", "--out", str(tmp_path), "--only", "gpu_matmul.small,jax.layer_norm", "--limit", "0"]) == 0
    result = json.loads((tmp_path / "gpu_chip.json").read_text())
    assert tuple(result) == s.SCHEMA and len(result["verbs"]) == len(s.verb_steps("h200"))
    assert all(v["stderr_tail"] == s.SKIPPED and v["rc"] is None for v in result["verbs"])
    assert [e["measured"]["error"] for e in result["kernels"]] == [s.SKIPPED] * 2
    assert [c["error"] for c in result["compiles"]] == [s.SKIPPED]
    assert result["summary"]["measured_entries"] == 0 and result["summary"]["compiles_same"] == {"jax.layer_norm": None}
