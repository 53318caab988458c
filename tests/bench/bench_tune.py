"""Benchmark: inspector tune against published TPU v5e timings, and what a sweep costs. Run:
.venv/bin/python tests/bench/bench_tune.py [sweep|accuracy|all]   (JSON on stdout)

sweep: the 48 candidates of tests/bench/tune_guide.py:matmul_t (bm 128-1024 x bk 128-1024 x bn
128/512/1024) at 4096^3 bf16 on tpu-v5e, from an empty cache, with the default workers (the
cores), stopped with SIGINT (Ctrl-C) once 8 rows are done and run again to the end: the time of
each part, how long the stop took and what it printed and left, the load average around it, the
rows by status, the pick and where the guide's two configurations rank.

accuracy: JAX's Pallas TPU matmul guide times this kernel (fused right-hand-side transpose) on a
v5e at 1024, 4096 and 8192 cubed with two block configurations (timeit over 100 calls, Python
dispatch included): the tuner's estimate of each (the 4096 ones from the sweep's cache when it ran
first), Spearman's rank correlation of estimate and measurement over the six, the pair at each
size ranked as measured or not, and whether the tuner's pick of the two is within 10% of the
measured best.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python")
SPEC = "tests/bench/tune_guide.py:matmul_t"
GUIDE = "JAX Pallas TPU matmul guide, fused RHS transpose (v5e, timeit of 100 calls)"
# (size, (bm, bk, bn), measured seconds): docs/pallas/tpu/matmul.ipynb's outputs
MEASURED = [
    (1024, (128, 128, 128), 0.0003029372810851783), (1024, (512, 1024, 1024), 0.00012131539988331496),
    (4096, (128, 128, 128), 0.012017967159627005), (4096, (512, 1024, 1024), 0.0008790623804088682),
    (8192, (128, 128, 128), 0.09500920018996112), (8192, (512, 1024, 1024), 0.006107717020204291),
]
CACHE = os.environ.get("BENCH_TUNE_CACHE") or tempfile.mkdtemp(prefix="bench-tune-")
BUDGET = ["--time-budget", os.environ["BENCH_TUNE_BUDGET"]] if os.environ.get("BENCH_TUNE_BUDGET") else []


def _mm(n: int) -> str:
    return f"bf16[{n},{n}] bf16[{n},{n}]"


def _tune(*args: str, cache: str = CACHE, json_out: bool = True) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", INSPECTOR_CACHE_DIR=cache)
    start = time.perf_counter()
    done = subprocess.run([PY, "-m", "inspector", "tune", SPEC, "--target", "tpu-v5e", *BUDGET, *args]
                          + (["--json"] if json_out else []), capture_output=True, text=True, cwd=ROOT, env=env)
    return done, time.perf_counter() - start


def _journal(folder: str) -> int:
    count = 0
    for path in glob.glob(os.path.join(folder, "*.json")):
        try:
            count += json.load(open(path)).get("kind") == "tune-journal"
        except (OSError, ValueError):
            pass
    return count


def sweep(after: int = 8) -> dict:
    """The 48-candidate sweep from an empty cache, stopped by SIGINT once ``after`` rows are
    journaled and run again to the end: both parts timed, what the stop printed and left."""
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", INSPECTOR_CACHE_DIR=CACHE)
    load_before = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "inspector", "tune", SPEC, "--target", "tpu-v5e", *BUDGET], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    while _journal(CACHE) < after and proc.poll() is None:
        time.sleep(0.2)
    folders = set(glob.glob(os.path.join(tempfile.gettempdir(), "inspector-libtpu-*")))
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate()
    stop = {"after_seconds": round(sent - start, 1), "exit_code": proc.returncode,
            "exit_seconds": round(time.perf_counter() - sent, 2), "journaled": _journal(CACHE),
            "printed": [line.strip() for line in out.splitlines() if "interrupted" in line or "ranked" in line][-2:],
            "stderr": err.strip()[-300:]}
    time.sleep(1)
    stop["dump_folders_left"] = sorted(set(glob.glob(os.path.join(tempfile.gettempdir(), "inspector-libtpu-*"))) - folders)
    done, wall = _tune()
    load_after = os.getloadavg()
    if done.returncode != 0:
        return {"stop": stop, "error": done.stderr[-2000:]}
    data = json.loads(done.stdout)
    chip = data["shapes"][0]["chips"][0]
    by_params = {tuple(r["params"][k] for k in ("bm", "bk", "bn")): r for r in chip["rows"]}
    return {"candidates": data["counts"]["total"], "counts": data["counts"], "stop": stop,
            "resume_wall_seconds": round(wall, 1), "total_wall_seconds": round(stop["after_seconds"] + wall, 1),
            "workers": data["workers"], "cores": os.cpu_count(), "load_before": load_before, "load_after": load_after,
            "pick": chip["set_line"], "pick_seconds": chip["rows"][0]["estimated_seconds"],
            "sources": sorted({r["estimate_source"] for r in chip["rows"] if r["estimate_source"]}),
            "guide": {str(cfg): {k: by_params[cfg].get(k) for k in ("rank", "estimated_seconds", "ratio", "status",
                                                                     "estimate_source")}
                      for cfg in ((128, 128, 128), (512, 1024, 1024))},
            "top5": [(r["params"], r["estimated_seconds"], r["estimate_source"]) for r in chip["rows"][:5]]}


def _rank(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = _rank(a), _rank(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var


def accuracy() -> dict:
    rows = []
    for size, (bm, bk, bn), measured in MEASURED:
        done, wall = _tune("--args", _mm(size), "--grid", f"bm={bm}", "--set", f"bk={bk}", "--set", f"bn={bn}")
        if done.returncode != 0:
            rows.append({"size": size, "blocks": [bm, bk, bn], "error": done.stderr[-500:]})
            continue
        row = json.loads(done.stdout)["shapes"][0]["chips"][0]["rows"][0]
        rows.append({"size": size, "blocks": [bm, bk, bn], "measured_s": measured, "estimated_s": row["estimated_seconds"],
                     "source": row["estimate_source"], "ratio": row["estimated_seconds"] / measured,
                     "bound": row["bound"], "cached": row["cached"], "wall_seconds": round(wall, 1)})
    timed = [r for r in rows if "estimated_s" in r]
    result = {"source": GUIDE, "rows": rows}
    if len(timed) >= 2:
        result["spearman_all"] = spearman([r["estimated_s"] for r in timed], [r["measured_s"] for r in timed])
    pairs = []
    for size in sorted({r["size"] for r in timed}):
        two = [r for r in timed if r["size"] == size]
        if len(two) != 2:
            continue
        pick = min(two, key=lambda r: r["estimated_s"])
        best = min(two, key=lambda r: r["measured_s"])
        pairs.append({"size": size, "ranked_as_measured": pick is best,
                      "pick": pick["blocks"], "pick_within_10pct": pick["measured_s"] <= 1.10 * best["measured_s"]})
    result["pairs"] = pairs
    return result


def main(what: str) -> None:
    out = {"cache": CACHE, "budget": BUDGET}
    if what in ("sweep", "all"):
        out["sweep"] = sweep()
    if what in ("accuracy", "all"):
        out["accuracy"] = accuracy()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
