"""`inspector doctor`: what it finds, and exit 1 only when something asked for cannot work."""
from __future__ import annotations

import json

import pytest

from inspector.commands import doctor
from inspector import jax_internals
from inspector.cli import main


def run(capsys, *argv: str) -> tuple[int, dict | str]:
    code = main(["doctor", *argv], isolate=False)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv and out else out + err)


def checks(found: dict) -> dict[str, dict]:
    return {c["name"]: c for c in found["checks"]}


@pytest.mark.libtpu
@pytest.mark.compat
def test_a_deviceless_compile_per_generation_asked_for(capsys):
    code, found = run(capsys, "--target", "tpu-v5e,tpu-v6e", "--json")
    by_name = checks(found)
    assert code == 0 and found["ok"], found
    assert by_name["compile tpu-v5e"]["state"] == "ok" and "'TPU v5 lite'" in by_name["compile tpu-v5e"]["detail"]
    assert by_name["compile tpu-v6e"]["state"] == "ok" and "compile tpu-v4" not in by_name
    assert by_name["jax"]["state"] == "ok" and by_name["libtpu"]["state"] == "ok"
    assert "entries" in by_name["compile cache"]["detail"]


def test_missing_dot_is_a_warning_unless_svg_is_asked_for(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "_version", lambda dist: None if dist == "libtpu" else "1.0")
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    monkeypatch.setattr(jax_internals, "TESTED_JAX", ("1.0",))
    code, found = run(capsys, "--target", "tpu-v5e", "--json")
    by_name = checks(found)
    assert by_name["dot (Graphviz)"]["state"] == "warn" and by_name["libtpu"]["state"] == "warn"
    # no libtpu: the compile asked for cannot work
    assert code == 1 and [c["name"] for c in found["checks"] if c["state"] == "fail"] == ["compile tpu-v5e"]
    code, text = run(capsys, "--target", "tpu-v5e", "--svg")
    assert code == 1 and "2 checks failed: compile tpu-v5e, dot (Graphviz)" in text


def test_an_untested_jax_is_a_warning_not_a_failure(capsys, monkeypatch):
    monkeypatch.setattr(jax_internals, "TESTED_JAX", ("0.0.1",))
    monkeypatch.setattr(doctor, "_compile", lambda chip: doctor.Check(f"compile {chip.name}", doctor.OK, "stub"))
    code, found = run(capsys, "--target", "tpu-v5e", "--json")
    assert code == 0 and checks(found)["jax"]["state"] == "warn" and "untested" in checks(found)["jax"]["detail"]


def test_doctor_takes_tpu_targets_only(capsys):
    code, text = run(capsys, "--target", "cpu")
    assert code == 2 and "takes TPU targets" in text and len(text.strip().splitlines()) == 1


def test_jaxs_hugepages_warning_is_silenced_here_and_in_children():
    """On a v5e VM without transparent hugepages jax warns in two lines at every command: the
    inspector's environment (set before jax is imported) silences it, in its child processes too."""
    import subprocess
    import sys

    fake = ("import warnings; warnings.warn('Transparent hugepages are not enabled. TPU runtime startup and "
            "shutdown time should be significantly improved on TPU v5e and newer.')")
    code = ("import inspector.base.environment as e, subprocess, sys; e.prepare(); " + fake + "; "
            "subprocess.run([sys.executable, '-c', " + repr(fake + "; import warnings; warnings.warn('other')") + "])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "hugepages" not in out.stderr and "UserWarning: other" in out.stderr  # only that warning, not all


def test_doctor_says_the_hugepages_fix_once(monkeypatch, tmp_path):
    import inspector.base.environment as environment
    import inspector.commands.doctor as doctor
    from inspector.base.chips import get_chip
    from inspector.compilation import backends

    monkeypatch.setattr(environment, "tpu_attached", lambda: True)
    monkeypatch.setattr(backends, "attached_chip", lambda: get_chip("tpu-v5e"))
    sysfs = tmp_path / "enabled"
    monkeypatch.setattr(doctor, "HUGEPAGES", str(sysfs))
    sysfs.write_text("always madvise [never]\n")
    check = doctor._hugepages()
    assert check.state == "warn" and "echo always > /sys/kernel/mm/transparent_hugepage/enabled" in check.detail
    sysfs.write_text("[always] madvise never\n")
    assert doctor._hugepages().state == "ok"
    monkeypatch.setattr(backends, "attached_chip", lambda: get_chip("tpu-v4"))
    assert doctor._hugepages() is None


def test_each_gpu_target_with_a_target_config_is_a_compile_doctor_checks(capsys):
    """XLA:GPU and a Pallas-Triton kernel, deviceless (Pallas's own GPU default, Mosaic GPU, is
    Hopper's only: the probe names Triton, which every row compiles)."""
    from inspector.jax_internals.cuda_topology import plugin_missing

    if plugin_missing() is not None:
        pytest.skip("the GPU extra is not installed")
    code, found = run(capsys, "--target", "h100,a100", "--json")
    by_name = checks(found)
    assert code == 0 and found["ok"], found
    assert by_name["compile h100"]["state"] == "ok" and "Pallas-Triton" in by_name["compile h100"]["detail"]
    assert "'NVIDIA A100-SXM4-80GB'" in by_name["compile a100"]["detail"]
