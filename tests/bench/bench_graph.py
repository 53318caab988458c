"""Benchmark: the kernel graph export of the transformer steps, end to end and by part.
Run: .venv/bin/python tests/bench/bench_graph.py

- wall time of `inspector export samples/transformer.py:F --svg` (and --html) from a warm compile
  cache, the way a user reruns it (median of 3);
- in-process: building the graph (groups, folding, edges) and Graphviz's layout, on a captured step.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inspector import environment  # noqa: E402

environment.prepare()

from inspector.backends import Backend  # noqa: E402
from inspector.chips import get_chip  # noqa: E402
from inspector.hlo.fusions import analyse_fusions  # noqa: E402
from inspector.hlo.graph import build_dot, render_svg  # noqa: E402
from inspector.stages import capture  # noqa: E402
from inspector.target import load_target  # noqa: E402


def cli(func: str, *flags: str) -> tuple[float, str]:
    runs, out = [], None
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("TMP", tmp) for a in flags]
        for _ in range(4):  # the first fills the compile cache
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "inspector", "export", f"samples/transformer.py:{func}", *args],
                                 cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            runs.append(time.perf_counter() - t0)
    return statistics.median(runs[1:]), (out.stdout or out.stderr).strip().splitlines()[-1][:120]


def parts(func: str) -> tuple[float, float, int, int]:
    stages = capture(load_target(f"samples/transformer.py:{func}"), Backend(get_chip("cpu"))).stages
    a = analyse_fusions(stages.hlo, get_chip("tpu-v5e"), stages.cost)
    t0 = time.perf_counter()
    g, summary = build_dot(a, func)
    t1 = time.perf_counter()
    render_svg(g, summary.nodes)
    return t1 - t0, time.perf_counter() - t1, summary.nodes, len(summary.graph.edges)


def main() -> None:
    print(f"{'case':40} {'build s':>8} {'dot s':>6} {'nodes':>6} {'edges':>6}")
    for func in ("train_step", "train_step_24"):
        b, d, n, e = parts(func)
        print(f"{func:40} {b:8.2f} {d:6.2f} {n:6d} {e:6d}")
    print()
    for func in ("train_step", "train_step_24"):
        for label, flags in (("--svg", ("--svg", "TMP/g.svg")), ("--html", ("--html", "TMP/g.html"))):
            s, line = cli(func, *flags)
            print(f"export {func} {label:8} {s:6.2f} s  {line}")


if __name__ == "__main__":
    main()
