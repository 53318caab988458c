"""Benchmark: the fusion analysis against the compile it reads, and the graph export.
Run: .venv/bin/python tests/bench/bench_fusions.py

- analysis time (parse HLO, kernels, intermediates) as a share of the compile time, in-process;
- peak RSS of `show --view fusions` against JAX's own lower+compile+as_text script (bench_show's floor);
- wall time of `export --svg` for the collapsed graph, and what the fully expanded one does.
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
sys.path.insert(0, str(Path(__file__).parent))

from bench_show import FLOOR, FLOOR_TPU, rss_of  # noqa: E402

from inspector.base import environment  # noqa: E402

environment.prepare()

from inspector.compilation.backends import Backend  # noqa: E402
from inspector.base.chips import get_chip  # noqa: E402
from inspector.hlo.fusions import analyse_fusions  # noqa: E402
from inspector.compilation.stages import capture  # noqa: E402
from inspector.compilation.target import load_target  # noqa: E402


def analysis_share(func: str, chip: str) -> tuple[float, float, int]:
    target = load_target(f"samples/transformer.py:{func}")
    stages = capture(target, Backend(get_chip(chip)), use_cache=False).stages
    runs = []
    for _ in range(5):  # median of 5: single runs of 0.1 s swing by 30% on this machine
        t0 = time.perf_counter()
        a = analyse_fusions(stages.hlo, get_chip("tpu-v5e" if chip == "cpu" else chip), stages.cost)
        runs.append(time.perf_counter() - t0)
    return stages.timings["compile_s"], statistics.median(runs), len(a.kernels)


def main() -> None:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", TF_CPP_MIN_LOG_LEVEL="3")
    print(f"{'case':44} {'compile s':>9} {'analysis s':>10} {'share':>6} {'kernels':>7}")
    for func, chip in (("train_step", "cpu"), ("train_step_24", "cpu"), ("train_step", "tpu-v5e")):
        c, a, n = analysis_share(func, chip)
        print(f"{func + ' on ' + chip:44} {c:9.2f} {a:10.2f} {a / c:6.1%} {n:7d}")
    print()
    print(f"{'peak RSS':44} {'floor MiB':>9} {'ours MiB':>10} {'ratio':>6}")
    for func, chip in (("train_step", "cpu"), ("train_step_24", "cpu"), ("train_step", "tpu-v5e")):
        script = (FLOOR if chip == "cpu" else FLOOR_TPU).format(file=str(ROOT / "samples/transformer.py"), func=func,
                                                                topology="v5e:2x2")
        floor = rss_of([sys.executable, "-c", script], dict(env, **_quiet()))
        ours = rss_of([sys.executable, "-m", "inspector", "show", f"samples/transformer.py:{func}", "--view", "fusions",
                       "--target", chip], env)
        print(f"{'show --view fusions ' + func + ' ' + chip:44} {floor / 1024:9.0f} {ours / 1024:10.0f} {ours / floor:6.2f}")
    print()
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("export --svg, collapsed (default)", []), ("export --svg, expanded (--max-nodes 100000)", ["--max-nodes", "100000"])):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "inspector", "export", "samples/transformer.py:train_step",
                                  "--svg", f"{tmp}/g.svg", *extra], env=env, cwd=ROOT, capture_output=True, text=True)
            print(f"{label:44} {time.perf_counter() - t0:6.1f} s  {(out.stdout or out.stderr).strip()[:150]}")


def _quiet() -> dict:
    return {"TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_ACCELERATOR_TYPE": "v5litepod-4",
            "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "GLOG_minloglevel": "3", "JAX_PLATFORMS": "cpu"}


if __name__ == "__main__":
    main()
