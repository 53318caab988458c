"""Benchmark: `inspector show --view hlo` against JAX's own lower+compile+as_text (the floor),
and the start-up time for a tiny function. Run: .venv/bin/python tests/bench/bench_show.py

Each command runs in a fresh process (what a user pays), cache off, median of N runs; peak RSS
is the child's maximum resident set size.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
INSPECTOR = [PY, "-m", "inspector"]

FLOOR = """
import sys, importlib.util, jax
spec = importlib.util.spec_from_file_location("m", {file!r}); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
args = m.INSPECT[{func!r}]["args"]
args = args() if callable(args) else args
text = jax.jit(getattr(m, {func!r})).lower(*args).compile().as_text()
sys.stdout.write(text)
"""

FLOOR_TPU = """
import sys, importlib.util, numpy as np, jax
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
spec = importlib.util.spec_from_file_location("m", {file!r}); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
args = m.INSPECT[{func!r}]["args"]
args = args() if callable(args) else args
topo = topologies.get_topology_desc(platform="tpu", topology_name={topology!r})
mesh = Mesh(np.array(topo.devices[:1]), ("x",))
put = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P()))
with jax.set_mesh(mesh):
    text = jax.jit(getattr(m, {func!r})).lower(*jax.tree.map(put, args)).compile().as_text()
sys.stdout.write(text)
"""

TINY = "import jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x) * 2\n"


def run(cmd: list[str], env: dict) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    # ru_maxrss of children is the max over all waited-for children: run the biggest last or read per run.
    return wall, max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)


def rss_of(cmd: list[str], env: dict) -> int:
    """Peak RSS in KiB via GNU time if present (exact per process), else -1."""
    if not Path("/usr/bin/time").exists():
        return -1
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    return int(out.stderr.strip().splitlines()[-1])


def median_wall(cmd, env, n):
    return statistics.median(run(cmd, env)[0] for _ in range(n))


def main(n: int = 3) -> None:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    rows = []
    for target, func in (("samples/transformer.py", "train_step"), ("samples/transformer.py", "train_step_24")):
        floor = [PY, "-c", FLOOR.format(file=str(ROOT / target), func=func)]
        ours = [*INSPECTOR, "show", f"{target}:{func}", "--view", "hlo"]
        f, o = median_wall(floor, env, n), median_wall(ours, env, n)
        rows.append((f"show --view hlo {func}", f, o, rss_of(floor, env), rss_of(ours, env)))
    quiet = dict(env, TPU_SKIP_MDS_QUERY="1", TPU_WORKER_HOSTNAMES="localhost", TPU_ACCELERATOR_TYPE="v5litepod-4",
                 ALLOW_MULTIPLE_LIBTPU_LOAD="1", GLOG_minloglevel="3")
    for target, func in (("samples/transformer.py", "train_step"),):
        floor = [PY, "-c", FLOOR_TPU.format(file=str(ROOT / target), func=func, topology="v5e:2x2")]
        ours = [*INSPECTOR, "show", f"{target}:{func}", "--view", "hlo", "--target", "tpu-v5e"]
        f, o = median_wall(floor, quiet, n), median_wall(ours, quiet, n)
        rows.append((f"show --view hlo --target tpu-v5e {func}", f, o, rss_of(floor, quiet), rss_of(ours, quiet)))
        with tempfile.TemporaryDirectory() as cache:
            cached = dict(quiet, INSPECTOR_NO_CACHE="0", INSPECTOR_CACHE_DIR=cache)
            run(ours, cached)  # fill the cache
            rows.append(("  same, second run (compile cached)", f, median_wall(ours, cached, n), -1, rss_of(ours, cached)))
    with tempfile.TemporaryDirectory() as tmp:
        tiny = Path(tmp) / "tiny.py"
        tiny.write_text(TINY)
        ours = [*INSPECTOR, "show", f"{tiny}:f", "--args", "f32[8]", "--view", "jaxpr"]
        bare = [PY, "-c", "import jax"]
        rows.append(("start-up: show --view jaxpr, tiny f", median_wall(bare, env, n), median_wall(ours, env, n), rss_of(bare, env), rss_of(ours, env)))
    print(f"{'case':40} {'floor s':>8} {'ours s':>8} {'ratio':>6} {'floor MiB':>10} {'ours MiB':>9}")
    for name, f, o, fr, orr in rows:
        print(f"{name:40} {f:8.2f} {o:8.2f} {o / f:6.2f} {fr / 1024:10.0f} {orr / 1024:9.0f}")
    print("(start-up row: floor is a bare `import jax`)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
