"""On a TPU VM, as a user types them: --measure against a plain profiler trace, diff's device time,
tune --measure ranking by the chip, and every deviceless verb while another process holds the chip.
Marked ``tpu``: skipped without an attached TPU (CI has none); run on the device tool's v5e."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.tpu, pytest.mark.libtpu]

FLASH = "samples/attention.py:flash"


def _user_env() -> dict:
    """A user's process on the TPU VM: jax opens the chip (the test session's own processes are
    deviceless, as the inspector's are)."""
    from inspector.base import environment

    return {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", environment.DEVICELESS_MARK)}


def _plain_profile_seconds(spec: str) -> float:
    """The program's median device time from jax.profiler with nothing of the inspector's in between."""
    code = f"""
import functools, glob, statistics, tempfile, jax
from inspector.compilation.target import load_target
from inspector.run.inputs import make_inputs
t = load_target({spec!r}); a, k = make_inputs(t, 0)
f = jax.jit(functools.partial(t.fn, **t.params)); jax.block_until_ready(f(*a))
d = tempfile.mkdtemp()
with jax.profiler.trace(d):
    for _ in range(20): o = f(*a)
    jax.block_until_ready(o)
p = jax.profiler.ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])
plane = next(x for x in p.planes if x.name == "/device:TPU:0")
line = next(x for x in plane.lines if x.name == "XLA Modules")
print(statistics.median(e.duration_ns for e in line.events) * 1e-9)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=_user_env())
    return float(out.stdout.split()[-1])


def test_measure_agrees_with_a_plain_profiler_trace(run_cli):
    out = run_cli("show", FLASH, "--measure", "--json")
    assert out.returncode in (0, 1), out.stderr
    measured = json.loads(out.stdout)["measured"]
    assert measured["chip"] == "tpu-v5e" or measured["chip"].startswith("tpu-")
    plain = _plain_profile_seconds(FLASH)
    assert abs(measured["seconds"] / plain - 1) <= 0.05


def test_diff_reports_device_time(run_cli):
    out = run_cli("diff", FLASH)
    assert out.returncode == 0, out.stderr
    assert "device time on the TPU" in out.stdout


def test_tune_measure_ranks_by_the_chip(run_cli):
    out = run_cli("tune", "samples/matmul.py:tiled", "--args", "bf16[2048,2048] bf16[2048,2048]",
                  "--grid", "bm=256,512", "--grid", "bn=256,512", "--grid", "bk=512", "--measure", "--top", "4", "--json")
    assert out.returncode == 0, out.stderr
    rows = [r for s in json.loads(out.stdout)["shapes"] for c in s["chips"] for r in c["rows"] if r["measured_seconds"]]
    assert len(rows) == 4
    assert [r["rank"] for r in sorted(rows, key=lambda r: r["measured_seconds"])] == [1, 2, 3, 4]


def test_deviceless_verbs_work_while_another_process_holds_the_chip(run_cli):
    holder = subprocess.Popen([sys.executable, "-c", "import jax, time; jax.devices(); print('held', flush=True); time.sleep(300)"],
                              stdout=subprocess.PIPE, text=True, env=_user_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for args in (("show", FLASH), ("show", FLASH, "--time"), ("check", FLASH, "--target", "tpu-v5e,tpu-v6e,tpu-7x"),
                     ("compare", FLASH, "--set-a", "block_q=256", "--set-b", "block_q=512")):
            out = run_cli(*args)
            assert out.returncode in (0, 1), (args, out.stderr)
        busy = run_cli("diff", FLASH)
        assert busy.returncode == 4 and len(busy.stderr.strip().splitlines()[-1:]) == 1
        assert "held by another process" in busy.stderr
    finally:
        holder.kill()
        holder.wait()
        time.sleep(5)  # the chip is free again a moment after its holder ends
