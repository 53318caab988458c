"""Benchmark: the BlockSpec grid walk on a 1024 x 1024 x 8 grid (8.4M steps), and
`inspector check --estimate-only` end to end on the samples (no TPU compile).
Run: .venv/bin/python tests/bench/bench_pallas.py
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inspector.base import environment  # noqa: E402

environment.prepare()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

from inspector.pallas.grid_walk import walk_grid  # noqa: E402
from inspector.pallas.discovery import find_pallas_calls  # noqa: E402


def big_grid(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1024, 1024, 8),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j, k: (i * 8 + k, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (i * 8 + k, j)),
    )(x)


def main() -> None:
    x = jax.ShapeDtypeStruct((1024 * 8 * 8, 1024 * 128), jnp.float32)
    [call] = find_pallas_calls(jax.jit(big_grid).trace(x).jaxpr)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    walk = walk_grid(call)
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"grid walk 1024x1024x8 = {walk.steps:,} steps: {dt:.2f} s, peak RSS {rss / 1024:.0f} MiB "
          f"(+{(rss - rss0) / 1024:.0f} MiB), findings: {[f.code for f in walk.findings]}")
    env = dict(os.environ, INSPECTOR_NO_CACHE="1")
    for spec in ("samples/attention.py:flash", "samples/bugs.py:dropped_tail"):
        cmd = [sys.executable, "-m", "inspector", "check", spec, "--target", "tpu-v5e,tpu-v6e,tpu-7x", "--estimate-only"]
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True)
            runs.append(time.perf_counter() - t0)
        print(f"check --estimate-only {spec} (3 TPU targets): median {sorted(runs)[1]:.2f} s end to end")


if __name__ == "__main__":
    main()
