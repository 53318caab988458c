"""Benchmark: the kernel graph export, end to end and by part.
Run: .venv/bin/python tests/bench/bench_graph.py [CASE ...]   (cases: see CASES; default all)

- wall time of `inspector export TARGET --svg` (and --html) from a warm compile cache, the way a
  user reruns it (median of 3 after the run that fills the cache), beside JAX's own trace, lower
  and compile of the same step on the cold run (the Report's stage timings);
- in-process: building the graph (groups, folding, edges), the layout of the whole drawing and of
  the HTML page's groups, and which layout each got (dot, dot-fast, ranked).

The machine is shared: the load average is printed with each case (a load of 2 on 2 cores already
doubles the wall times).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inspector.base import environment  # noqa: E402

environment.prepare()

from inspector.compilation.backends import Backend  # noqa: E402
from inspector.base.chips import get_chip  # noqa: E402
from inspector.hlo.fusions import analyse_fusions  # noqa: E402
from inspector.hlo.graph import build_dot  # noqa: E402
from inspector.hlo.graph_model import group_graphs  # noqa: E402
from inspector.hlo.graph_render import layout, layout_cost, layout_many  # noqa: E402
from inspector.compilation.stages import capture  # noqa: E402
from inspector.compilation.target import load_target  # noqa: E402

# (label, target, --target)
CASES = {
    "scoped-12": ("samples/transformer.py:train_step", "cpu"),
    "scoped-24": ("samples/transformer.py:train_step_24", "cpu"),
    "plain-24-cpu": ("tests/data/gpt2_plain.py:train_step", "cpu"),
    "plain-24-tpu": ("tests/data/gpt2_plain.py:train_step", "tpu-v5e"),
}


CACHE = tempfile.mkdtemp(prefix="bench-graph-cache-")  # the cold run compiles for real; the warm runs read it
os.environ["INSPECTOR_CACHE_DIR"] = CACHE  # (the in-process parts too)
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def cli(spec: str, chip: str, *flags: str, runs: int = 3) -> tuple[float, float, str]:
    """(median wall s, median CPU s of the child, last line said) over `runs` warm runs."""
    walls, cpus, out = [], [], None
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("TMP", tmp) for a in flags]
        for _ in range(runs):
            before = os.times()
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "inspector", "export", spec, "--target", chip, *args],
                                 cwd=ROOT, capture_output=True, text=True, env=ENV)
            walls.append(time.perf_counter() - t0)
            after = os.times()
            cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    said = (out.stdout + out.stderr).strip().splitlines() if out else [""]
    return statistics.median(walls), statistics.median(cpus), said[-1][:150]


def cold(spec: str, chip: str) -> dict:
    """The run that fills the compile cache: JAX's own trace, lower and compile, from the Report."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "inspector", "export", spec, "--target", chip, "--json", f"{tmp}/r.json"],
                       cwd=ROOT, capture_output=True, text=True, check=True, env=ENV)
        wall = time.perf_counter() - t0
        timings = json.loads(Path(f"{tmp}/r.json").read_text())["stages"]["timings"]
    return {"wall_s": wall, **timings}


def parts(spec: str, chip: str) -> str:
    stages = capture(load_target(spec), Backend(get_chip(chip))).stages
    t0 = time.perf_counter()
    a = analyse_fusions(stages.hlo, get_chip("tpu-v5e"), stages.cost)
    t1 = time.perf_counter()
    g, summary = build_dot(a, spec)
    kg = summary.graph
    t2 = time.perf_counter()
    main = layout(kg, g.source)
    t3 = time.perf_counter()
    subs = group_graphs(a, kg)
    done, _ = layout_many(subs, 30)
    t4 = time.perf_counter()
    engines = sorted({lay.engine for lay in done.values()})
    edges = len(kg.edges) + (len(kg.outputs) if kg.output_node else 0)
    return (f"{len(a.kernels)} kernels, {len(a.groups)} groups; analyse {t1 - t0:.1f} s, build {t2 - t1:.2f} s "
            f"({summary.nodes} nodes, {edges} edges, cost {layout_cost(kg)}), layout {t3 - t2:.1f} s ({main.engine}), "
            f"{len(subs)} group drawings {t4 - t3:.1f} s ({', '.join(engines)})")


def main() -> None:
    chosen = sys.argv[1:] or list(CASES)
    for label in chosen:
        spec, chip = CASES[label]
        print(f"== {label}: {spec} --target {chip}  (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", flush=True)
        c = cold(spec, chip)
        print(f"cold run {c['wall_s']:.1f} s: JAX trace {c.get('trace_s', 0):.1f} s, lower {c.get('lower_s', 0):.1f} s, "
              f"compile {c.get('compile_s', 0):.1f} s", flush=True)
        print("parts:", parts(spec, chip), flush=True)
        for flag in ("--svg", "--html"):
            wall, cpu, line = cli(spec, chip, flag, f"TMP/g.{flag[2:]}")
            print(f"export {flag:6} {wall:6.1f} s wall, {cpu:5.1f} s CPU (load {os.getloadavg()[0]:.1f})  {line}", flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)
