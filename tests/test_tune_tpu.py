"""inspector tune on real deviceless compiles (small matmuls; each candidate compiled once per
session: later tests read the cache the first sweep filled). tests/data/tune_kernels.py:mm has
candidates that rank, that Mosaic refuses (bn=64), and that the VMEM estimate prunes (pad_mib=40)."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from inspector.base.chips import get_chip
from inspector.libtpu.runner import PREFIX

SPEC = "tests/data/tune_kernels.py:mm"
SMALL = "bf16[256,512] bf16[512,256]"
V5E = get_chip("tpu-v5e")
pytestmark = pytest.mark.libtpu


def _cli(*args, env=None, timeout=900):
    full = dict(os.environ, NO_COLOR="1", COLUMNS="160", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inspector", "tune", *args], capture_output=True, text=True,
                          cwd=ROOT, env=full, timeout=timeout)


def _rows(done) -> list[dict]:
    data = json.loads(done.stdout)
    return [row for shape in data["shapes"] for chip in shape["chips"] for row in chip["rows"]]


@pytest.fixture(scope="module")
def sweep():
    """INSPECT's 8 candidates x its 2 shapes on v5e."""
    done = _cli(SPEC, "--target", "tpu-v5e", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar in a pipe, and the workers' output goes to their log
    return json.loads(done.stdout)


def test_every_candidate_ends_as_it_should(sweep):
    assert [s["shape"] for s in sweep["shapes"]] == ["bf16[512,512] bf16[512,512]", SMALL]
    assert sweep["counts"]["total"] == 16 and sweep["swept"] == ["bm", "bn", "bk", "pad_mib"]
    for shape in sweep["shapes"]:
        (chip,) = shape["chips"]
        rows = chip["rows"]
        m, k = (int(d) for d in shape["shape"].split()[0][5:-1].split(","))
        n = int(shape["shape"].split()[1][5:-1].split(",")[1])
        for row in rows:
            p = row["params"]
            if p["bn"] == 64:  # Mosaic's layout rule: the last block dim a multiple of 128
                assert row["status"] == "refused" and row["code"] == "mosaic-layout" and "tune_kernels.py:" in row["reason"]
            elif p["pad_mib"] == 40:  # 40 MiB of scratch over v5e's 16 MiB: never compiled
                assert row["status"] == "pruned" and row["code"] == "vmem-over-limit"
                assert row["estimated_seconds"] is None and row["vmem_estimate_bytes"] > row["vmem_limit_bytes"] == 16 * 2**20
            else:
                assert row["status"] == "ranked", row
                assert row["estimated_seconds"] == pytest.approx(row["estimated_cycles"] / V5E.clock_hz)
                assert row["estimated_seconds"] >= 2 * m * k * n / V5E.bf16_flops  # the MXU's own time at peak
                assert 0 < row["vmem_bytes"] <= row["vmem_limit_bytes"] and row["hbm_bytes"] >= 2 * (m * k + k * n + m * n)
                assert row["bound"] and row["spills"] is not None
        ranked = [r for r in rows if r["status"] == "ranked"]
        assert len(ranked) == 2 and rows[:2] == ranked  # ranked first, fastest first
        assert [r["rank"] for r in ranked] == [1, 2] and ranked[0]["ratio"] == 1.0
        assert ranked[0]["estimated_seconds"] <= ranked[1]["estimated_seconds"]
        assert ranked[1]["ratio"] == pytest.approx(ranked[1]["estimated_seconds"] / ranked[0]["estimated_seconds"])
        best = ranked[0]["params"]
        assert chip["set_line"] == " ".join(f"--set {k}={v}" for k, v in best.items())
        (default,) = [r for r in rows if r["default"]]
        assert default["params"] == {"bm": 256, "bn": 256, "bk": 512, "pad_mib": 0}
        assert chip["default_ratio"] == default["ratio"]


def test_second_run_is_instant_and_the_same(sweep):
    start = time.perf_counter()
    again = _cli(SPEC, "--target", "tpu-v5e", "--json")
    took = time.perf_counter() - start
    data = json.loads(again.stdout)
    assert again.returncode == 0 and data["counts"]["cached"] == data["counts"]["total"] == 16
    assert took < 20, took  # no worker started: the journal answered (python and rich start-up only)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("cached", "wall_seconds")} for r in rows]
    first = [r for s in sweep["shapes"] for c in s["chips"] for r in c["rows"]]
    assert strip(_rows(again)) == strip(first)


def test_table_grows_by_a_shape(sweep, tmp_path):
    from inspector.tuning.table import lookup

    path = tmp_path / "mm_tuning.json"
    grid = ["--grid", "bm=256,128", "--set", "bn=256", "--set", "bk=512", "--set", "pad_mib=0"]
    one = _cli(SPEC, "--args", "bf16[512,512] bf16[512,512]", "--table", str(path), *grid)
    assert one.returncode == 0 and f"wrote {path}" in one.stdout, one.stderr
    two = _cli(SPEC, "--args", SMALL, "--table", str(path), *grid)
    assert two.returncode == 0, two.stderr
    table = json.loads(path.read_text())
    assert set(table["entries"]) == {"bf16[512,512] bf16[512,512]", SMALL}
    entry = table["entries"][SMALL]["tpu-v5e"]
    assert entry["versions"]["libtpu"] and entry["versions"]["jax"] and entry["candidates"] == 2
    small = next(s for s in sweep["shapes"] if s["shape"] == SMALL)["chips"][0]
    best = next(r for r in small["rows"] if r["rank"] == 1)
    assert entry["params"] == {"bn": 256, "bk": 512, "pad_mib": 0, "bm": best["params"]["bm"]}
    assert entry["estimated_seconds"] == best["estimated_seconds"]
    assert lookup(str(path), SMALL, "TPU v5 lite") == entry["params"]


def _journal(folder: str) -> int:
    count = 0
    for path in glob.glob(os.path.join(folder, "*.json")):
        try:
            count += json.load(open(path)).get("kind") == "tune-journal"
        except (OSError, ValueError):
            pass
    return count


def test_ctrl_c_prints_what_is_done_and_a_rerun_resumes(tmp_path):
    cache = str(tmp_path / "cache")
    # a temp folder of its own: the other xdist worker's compiles make libtpu dump folders in the shared one meanwhile
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, NO_COLOR="1", COLUMNS="160", INSPECTOR_CACHE_DIR=cache, TMPDIR=str(temp))
    args = [SPEC, "--args", SMALL, "--grid", "bm=128,256", "--grid", "bn=128,256", "--set", "bk=512",
            "--set", "pad_mib=0", "--workers", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "inspector", "tune", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    deadline = time.monotonic() + 600
    while _journal(cache) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 10  # at once: the worker is killed, not waited for
    assert proc.returncode == 130, err
    assert "not-run" in out and "interrupted:" not in out  # the tables on stdout, the interruption on stderr
    assert "inspector: interrupted:" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    time.sleep(1)  # the dump folders' janitors run when their worker is gone
    assert glob.glob(os.path.join(temp, PREFIX + "*")) == []
    done_before = _journal(cache)
    resumed = subprocess.run([sys.executable, "-m", "inspector", "tune", *args, "--json"], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=900)
    data = json.loads(resumed.stdout)
    assert resumed.returncode == 0, resumed.stderr
    assert data["counts"]["cached"] == done_before >= 1 and data["counts"]["ranked"] == 4


def test_api_sweeps_a_spec_and_a_function(sweep):
    import jax
    import jax.numpy as jnp

    from inspector.compilation.user_files import load_module
    from inspector.tuning import tune

    mm = load_module(str(ROOT / "tests/data/tune_kernels.py")).mm

    by_spec = tune(SPEC, SMALL, targets="tpu-v5e", grid={"bm": [256, 128]},
                   params={"bn": 256, "bk": 512, "pad_mib": 0})
    assert all(r.cached for r in by_spec.rows)  # the CLI's sweeps computed both: nothing is compiled again
    small = next(s for s in sweep["shapes"] if s["shape"] == SMALL)["chips"][0]
    assert by_spec.best("tpu-v5e").params["bm"] == next(r for r in small["rows"] if r["rank"] == 1)["params"]["bm"]
    page = by_spec._repr_html_()
    assert page.count("height: 10px") == 2 and by_spec.best("tpu-v5e").set_line() in page

    a = jax.ShapeDtypeStruct((256, 256), jnp.bfloat16)
    by_fn = tune(mm, a, a, targets=["tpu-v5e"], grid={"bm": [128, 256]}, params={"bn": 256, "bk": 256})
    assert by_fn.runner == "in-process" and [s.shape for s in by_fn.shapes] == ["bf16[256,256] bf16[256,256]"]
    ranking = by_fn.ranking("tpu-v5e")
    assert ranking.count("ranked") == 2 and ranking.best.estimated_seconds == min(r.estimated_seconds for r in ranking.rows)
    assert ranking.default.params == {"bm": 256}


_RAY_HEAD = """
import sys, ray
ray.init(include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1", logging_level="ERROR",
         configure_logging=True, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the test closes our stdin
ray.shutdown()
"""


@pytest.fixture
def ray_cluster(tmp_path):
    """A local Ray cluster on 127.0.0.1, started by this test and shut down after it."""
    pytest.importorskip("ray")
    # token auth off: a cluster of one test, on this machine only (Ray 2.5x turns it on for new clusters)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    head = subprocess.Popen([sys.executable, "-c", _RAY_HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=env)
    try:
        address = head.stdout.readline().strip()
        if not address:
            pytest.skip("a local Ray cluster did not start here")
        local = "127.0.0.1:" + address.rpartition(":")[2]
        from inspector.tuning.ray_backend import _unreachable

        yield local if _unreachable(local) is None else address
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


def test_ray_gives_the_same_table_as_local(sweep, ray_cluster):
    grid = [SPEC, "--args", SMALL, "--grid", "bm=256,128", "--set", "bn=256", "--set", "bk=512", "--set", "pad_mib=0",
            "--json"]
    local = _cli(*grid)
    remote = _cli(*grid, "--ray", ray_cluster, "--no-cache", env={"RAY_AUTH_MODE": "disabled"})  # all on the cluster
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    data = json.loads(remote.stdout)
    assert data["runner"] == f"ray {ray_cluster}" and data["counts"]["cached"] == 0 and data["counts"]["ranked"] == 2
    keep = ("params", "status", "rank", "estimated_cycles", "estimated_seconds", "estimate_source", "vmem_bytes",
            "vmem_limit_bytes", "hbm_bytes", "bound", "spills", "default")
    same = lambda rows: [{k: r[k] for k in keep} for r in rows]
    assert same(_rows(remote)) == same(_rows(local))
    assert json.loads(local.stdout)["shapes"][0]["chips"][0]["set_line"] == data["shapes"][0]["chips"][0]["set_line"]


def test_a_time_a_busy_machine_cut_short_is_not_kept(monkeypatch, tmp_path):
    """libtpu's simulation passed its time limit (a loaded machine): the row says so, and the next
    run computes it again instead of reading "untimed" from the cache."""
    import dataclasses

    import inspector.tuning.evaluate as evaluate
    from inspector.libtpu import estimate_times
    from inspector.compilation.target import load_target
    from inspector.families import FAMILIES

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    calls = []

    def stopped(*args, **kwargs):
        calls.append(1)
        times = estimate_times(*args, **kwargs)
        return dataclasses.replace(times, jobs=[dataclasses.replace(j, status="time-limit") for j in times.jobs])

    monkeypatch.setattr(FAMILIES["tpu"], "estimate_time", stopped)  # the sweep asks the chip's family for its time
    target = load_target("samples/matmul.py:tiled", args="bf16[256,256] bf16[256,256]", sets=["bm=128", "bk=128", "bn=128"])
    base = {"shape": "bf16[256,256] bf16[256,256]", "chip": "tpu-v5e", "params": {"bm": 128, "bk": 128, "bn": 128}}
    for _ in range(2):
        row = evaluate.evaluate_target(target, get_chip("tpu-v5e"), base, budget={"seconds": 60.0}, cache=True)
        assert not row.cached
    assert len(calls) == 2


@pytest.mark.libtpu
def test_a_candidate_libtpu_puts_below_its_roofline_is_ranked_at_it(tmp_path, monkeypatch):
    """The README's sweep on tpu-v6e: libtpu simulates bm=512 bk=1792 bn=512 at 27.9 us, below its
    28.1 us roofline. Left untimed, the sweep called a candidate 5.7x slower the best; ranked at the
    roofline (no kinder than libtpu's own figure) it is the best, with a note saying why."""
    from inspector.tuning.evaluate import evaluate_task

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path / "cache"))
    shape = "bf16[1024,1792] bf16[1792,4608]"
    row = evaluate_task({"spec": "samples/matmul.py:tiled", "args": shape, "params": {"bm": 512, "bk": 1792, "bn": 512},
                         "swept": {"bm": 512}, "shape": shape, "chip": "tpu-v6e", "default": False,
                         "budget": {"seconds": 60}, "cache": False})
    assert row["status"] == "ranked" and row["estimate_source"] == "roofline", row
    assert any(n.startswith("libtpu-below-roofline") for n in row["notes"]), row["notes"]
