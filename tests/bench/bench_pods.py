"""Benchmark: `inspector show --view hlo` of the sharded transformer step on a TPU topology
against JAX's own lower + compile of the same sharded function (the floor), without a TPU.
Run: .venv/bin/python tests/bench/bench_pods.py [TOPOLOGY ...]   (default v5e:4x4)

Each command runs once in a fresh process (these compiles take minutes on 2 cores), the
compile cache off; peak RSS is read per child with /usr/bin/time when it is there. CPU seconds
(user + system of the child) sit beside wall seconds: on a shared machine the wall ratio of two
runs minutes apart measures the neighbours as much as the work.
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SAMPLE, FUNC = "samples/transformer.py", "train_step_sharded"

FLOOR = """
import sys, importlib.util, jax
from jax.experimental import topologies
from jax.sharding import AxisType, NamedSharding
spec = importlib.util.spec_from_file_location("m", {file!r}); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
entry = m.INSPECT[{func!r}]
params, tokens = entry["args"]()
devices = topologies.get_topology_desc(platform="tpu", topology_name={topology!r}).devices
model = entry["mesh"]["model"]
mesh = jax.make_mesh((len(devices) // model, model), ("data", "model"), devices=devices, axis_types=(AxisType.Auto,) * 2)
specs = entry["shardings"](mesh)
put = lambda spec, x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, spec))
args = jax.tree.map(put, specs, (params, tokens), is_leaf=lambda s: isinstance(s, jax.sharding.PartitionSpec))
with jax.set_mesh(mesh):
    text = jax.jit(getattr(m, {func!r})).lower(*args).compile().as_text()
sys.stdout.write(text)
"""


def run(cmd: list[str], env: dict) -> tuple[float, float, float | None]:
    """Wall seconds, CPU seconds (user + system, every thread and child: what the work costs,
    whatever else shares the cores) and peak RSS (MiB) of one fresh process."""
    timer = ["/usr/bin/time", "-f", "%M"] if os.path.exists("/usr/bin/time") else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(timer + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    rss = re.findall(r"^(\d+)$", done.stderr, re.M)
    return wall, cpu, int(rss[-1]) / 1024 if rss else None


def main(topologies: list[str]) -> None:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1")
    from inspector.base import environment  # the same quiet libtpu settings for the floor
    environment.prepare()
    env.update({k: v for k, v in os.environ.items() if k.startswith(("TPU_", "ALLOW_", "JAX_", "TF_", "GLOG_"))})
    print("| case | floor | inspector | ratio | floor CPU | inspector CPU | CPU ratio | floor peak | inspector peak |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for topology in topologies:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(FLOOR.format(file=str(ROOT / SAMPLE), func=FUNC, topology=topology))
        floor, floor_cpu, floor_rss = run([PY, f.name], env)
        os.unlink(f.name)
        chip = "tpu-" + topology
        ours, our_cpu, our_rss = run([PY, "-m", "inspector", "show", f"{SAMPLE}:{FUNC}", "--target", chip, "--view", "hlo"], env)
        mib = lambda x: f"{x:.0f} MiB" if x else "-"
        print(f"| `{FUNC}`, `--target {chip}` | {floor:.1f} s | {ours:.1f} s | {ours / floor:.2f} | {floor_cpu:.1f} s | "
              f"{our_cpu:.1f} s | {our_cpu / floor_cpu:.2f} | {mib(floor_rss)} | {mib(our_rss)} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["v5e:4x4"])
