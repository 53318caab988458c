"""Benchmark: `inspector diff` of flash attention at B=1, H=4, S=2048, D=128 in bf16, interpret
mode on the CPU, end to end (a fresh process), with its peak memory against the inputs plus the
reference's own (a process that only builds the inputs and runs the reference).
Run: .venv/bin/python tests/bench/bench_diff.py
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = "bf16[4,2048,128] bf16[4,2048,128] bf16[4,2048,128]"

REFERENCE_ONLY = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from inspector.base import environment; environment.prepare()
from inspector.compilation.target import load_target
from inspector.run import make_inputs
import jax
t = load_target("samples/attention.py:flash", args={ARGS!r})
args, kwargs = make_inputs(t, 0)
jax.block_until_ready(jax.jit(t.reference)(*args))
"""


def peak_rss(cmd: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - t0, int(out.stderr.strip().splitlines()[-1])


def main() -> None:
    for runs in ("1", "3"):
        wall, rss = peak_rss([sys.executable, "-m", "inspector", "diff", "samples/attention.py:flash", "--args", ARGS,
                              "--runs", runs])
        print(f"diff flash B=1 H=4 S=2048 D=128 bf16, --runs {runs}: {wall:.1f} s end to end, peak RSS {rss / 1024:.0f} MiB")
    wall, rss = peak_rss([sys.executable, "-c", REFERENCE_ONLY])
    print(f"inputs + reference only: {wall:.1f} s, peak RSS {rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
