"""Benchmark: libtpu's time estimate (inspector.libtpu.estimate_times) against published TPU v5e
timings, and what the estimate costs. Run:
.venv/bin/python tests/bench/bench_time.py [accuracy|costs|all]

accuracy: each row of JAX's Pallas TPU matmul guide (docs/pallas/tpu/matmul.ipynb: a blocked bf16
matmul at three sizes and two block shapes, and XLA's own dot; timeit over 100 calls on a v5e,
Python dispatch included) and of its sparse guide (docs/pallas/tpu/sparse.md: block-sparse @ dense
at 16384^3, and the dense product it is compared with), estimated on tpu-v5e with the default
budget (no cache): the estimate, its source, the ratio to the measured time, and whether each pair
of configurations at one size ranks as measured.

costs: in fresh processes, JAX's plain lower + compile against the estimate (every compile it
makes, the lowerings of the cut grids included), and, in one process, the dump compile split into
profile only, bundles only and both: wall seconds and peak RSS (GNU time; the process tree).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python")
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

MATMUL = "samples/matmul.py:tiled"
XLA = "tests/bench/time_kernels.py:dense"
GUIDE = "JAX Pallas TPU matmul guide (v5e, timeit)"
SPARSE = "JAX Pallas TPU sparse guide (v5e, timeit)"


def _mm(n: int) -> str:
    return f"bf16[{n},{n}] bf16[{n},{n}]"


def _blocks(bm, bk, bn):
    return [f"bm={bm}", f"bk={bk}", f"bn={bn}"]


# (size group, label, spec, args, --set, measured seconds, source)
ROWS = [
    ("1024", "Pallas 128/128/128", MATMUL, _mm(1024), _blocks(128, 128, 128), 0.29767e-3, GUIDE),
    ("1024", "Pallas 512/1024/1024", MATMUL, _mm(1024), _blocks(512, 1024, 1024), 0.12709e-3, GUIDE),
    ("1024", "XLA dot", XLA, _mm(1024), [], 0.11943e-3, GUIDE),
    ("4096", "Pallas 128/128/128", MATMUL, _mm(4096), _blocks(128, 128, 128), 11.7715e-3, GUIDE),
    ("4096", "Pallas 512/1024/1024", MATMUL, _mm(4096), _blocks(512, 1024, 1024), 0.88909e-3, GUIDE),
    ("4096", "XLA dot", XLA, _mm(4096), [], 0.82729e-3, GUIDE),
    ("8192", "Pallas 128/128/128", MATMUL, _mm(8192), _blocks(128, 128, 128), 91.836e-3, GUIDE),
    ("8192", "Pallas 512/1024/1024", MATMUL, _mm(8192), _blocks(512, 1024, 1024), 6.0994e-3, GUIDE),
    ("8192", "XLA dot", XLA, _mm(8192), [], 6.0471e-3, GUIDE),
]


VARIANT = "tests/bench/time_kernels.py:matmul_variant"
for _n, _small, _large in ((1024, 0.30294e-3, 0.12132e-3), (4096, 12.018e-3, 0.87906e-3), (8192, 95.009e-3, 6.1077e-3)):
    ROWS += [(f"{_n}", "Pallas 128/128/128, RHS transposed", VARIANT, _mm(_n), _blocks(128, 128, 128) + ["transposed=True"],
              _small, GUIDE), (f"{_n}", "Pallas 512/1024/1024, RHS transposed", VARIANT, _mm(_n),
                               _blocks(512, 1024, 1024) + ["transposed=True"], _large, GUIDE)]
for _n, _small, _large in ((1024, 0.30104e-3, 0.12623e-3), (4096, 11.807e-3, 0.89663e-3), (8192, 91.819e-3, 6.1306e-3)):
    ROWS += [(f"{_n}", "Pallas 128/128/128, fused relu", VARIANT, _mm(_n), _blocks(128, 128, 128) + ["relu=True"],
              _small, GUIDE), (f"{_n}", "Pallas 512/1024/1024, fused relu", VARIANT, _mm(_n),
                               _blocks(512, 1024, 1024) + ["relu=True"], _large, GUIDE)]
ROWS.sort(key=lambda row: int(row[0]))


def _sparse_rows() -> list:
    from time_kernels import sparse_guide_blocks

    present = sparse_guide_blocks()
    args = f"i32[{present}] i32[{present}] bf16[{present},512,512] bf16[16384,16384] bf16[16384,16384]"
    return [("16384", f"Pallas block-sparse @ dense ({present} of 1024 blocks)", "tests/bench/time_kernels.py:dsd",
             args, [], 8.136e-3, SPARSE),
            ("16384", "XLA dense dot", XLA, _mm(16384), [], 46.953e-3, SPARSE)]


def accuracy() -> list[dict]:
    from inspector.base import environment

    environment.prepare()
    from inspector.base.chips import get_chip
    from inspector.libtpu import estimate_times
    from inspector.compilation.target import load_target

    chip = get_chip("tpu-v5e")
    results = []
    for group, label, spec, args, sets, measured, source in ROWS + _sparse_rows():
        target = load_target(spec, args=args, sets=sets)
        start = time.perf_counter()
        estimate = estimate_times(target, chip, use_cache=False)
        took = time.perf_counter() - start
        seconds = estimate.totals["estimated_seconds"]
        sources = sorted({k.estimate_source for k in estimate.kernels if k.estimate_source})
        results.append({"group": group, "label": label, "measured_s": measured, "estimate_s": seconds,
                        "ratio": seconds / measured if seconds else None, "sources": sources, "source": source,
                        "took_s": round(took, 1), "jobs": [(j.label, j.status, j.wall_seconds) for j in estimate.jobs],
                        "cycles_per_step": [k.cycles_per_step for k in estimate.kernels if k.cycles_per_step]})
        print(f"{group:>6} {label:<44} measured {measured * 1e3:8.3f} ms  estimate {seconds * 1e3:8.3f} ms  "
              f"ratio {seconds / measured:5.2f}  {'/'.join(sources):<22} ({took:.0f} s)", flush=True)
    _ranks(results)
    return results


def _ranks(results: list[dict]) -> None:
    for group in dict.fromkeys(r["group"] for r in results):
        rows = [r for r in results if r["group"] == group]
        for a, b in combinations(rows, 2):
            if max(a["measured_s"], b["measured_s"]) < 1.1 * min(a["measured_s"], b["measured_s"]):
                continue  # within 10% of each other: the measurement does not rank them
            same = (a["measured_s"] < b["measured_s"]) == (a["estimate_s"] < b["estimate_s"])
            print(f"  {group}: {a['label']} vs {b['label']}: {'ranks as measured' if same else 'RANKS OTHERWISE'}")


# ----------------------------------------------------------------------------- costs

_PLAIN = """
import sys; sys.path[:0] = {paths!r}
from inspector.base import environment; environment.prepare()
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target
capture(load_target({spec!r}, args={args!r}, sets={sets!r}), Backend(get_chip("tpu-v5e")), use_cache=False, jaxpr_text=False)
"""
_ESTIMATE = """
import json, sys; sys.path[:0] = {paths!r}
from inspector.base import environment; environment.prepare()
from inspector.base.chips import get_chip
from inspector.libtpu import estimate_times
from inspector.compilation.target import load_target
e = estimate_times(load_target({spec!r}, args={args!r}, sets={sets!r}), get_chip("tpu-v5e"), use_cache=False)
print(json.dumps([[j.label, j.status, j.wall_seconds, j.peak_rss_bytes] for j in e.jobs]))
"""
_SPLIT = """
import json, sys; sys.path[:0] = {paths!r}
from inspector.base import environment; environment.prepare()
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.jax_internals.aot import compile_request
from inspector.libtpu.runner import DumpSession
from inspector.compilation.stages import lowered_program
from inspector.compilation.target import load_target
chip = get_chip("tpu-v5e")
lowered = lowered_program(load_target({spec!r}, args={args!r}, sets={sets!r}), Backend(chip), memo=False)[1]
request = compile_request(lowered, chip.topology)
out = {{}}
for name, profile, bundles in (("none", False, False), ("profile", True, False), ("bundles", False, True), ("both", True, True)):
    with DumpSession(chip.topology, profile=profile, bundles=bundles) as session:
        o = session.run(request, seconds=300, memory_bytes=12 * 2**30)
        out[name] = [o.status, round(o.wall_seconds, 2), o.peak_rss_bytes]
print(json.dumps(out))
"""


def _timed(code: str) -> tuple[float, int, str]:
    env = dict(os.environ, INSPECTOR_CACHE_DIR=tempfile.mkdtemp(prefix="bench-time-cache-"))
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %M", PY, "-c", code], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        wall, rss = out.read().split()[-2:]
    return float(wall), int(rss) * 1024, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


COST_CASES = [
    ("Pallas 4096^3, 512/1024/1024", MATMUL, _mm(4096), _blocks(512, 1024, 1024)),
    ("Pallas 1024^3, 128/128/128", MATMUL, _mm(1024), _blocks(128, 128, 128)),
    ("Pallas 4096^3, 128/128/128", MATMUL, _mm(4096), _blocks(128, 128, 128)),
    ("Pallas 8192^3, 128/128/128", MATMUL, _mm(8192), _blocks(128, 128, 128)),
    ("XLA dot 4096^3", XLA, _mm(4096), []),
]


def costs(split: bool = True) -> list[dict]:
    paths = [str(ROOT), str(Path(__file__).resolve().parent)]
    results = []
    for label, spec, args, sets in COST_CASES:
        fill = dict(paths=paths, spec=spec, args=args, sets=sets)
        load = os.getloadavg()[0]
        plain = _timed(_PLAIN.format(**fill))
        estimate = _timed(_ESTIMATE.format(**fill))
        row = {"label": label, "load": round(load, 1), "plain_s": plain[0], "plain_rss": plain[1],
               "estimate_s": estimate[0], "estimate_rss": estimate[1], "jobs": json.loads(estimate[2])}
        if split and "8192" not in label:  # the whole simulation of 8192^3 does not fit in memory here
            row["split"] = json.loads(_timed(_SPLIT.format(**fill))[2])
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    report = {}
    if what in ("accuracy", "all"):
        report["accuracy"] = accuracy()
    if what in ("costs", "all"):
        report["costs"] = costs()
    Path(tempfile.gettempdir(), "bench_time.json").write_text(json.dumps(report, indent=1))
