"""Benchmark: `inspector show --view passes` (a compile with XLA's pass-by-pass dumps, the dumps
read into an index and removed) against a plain compile. Run:
.venv/bin/python tests/bench/bench_passes.py [N] [cpu|tpu|all] [FUNC]

Three commands per case, each a fresh process, cache off, N rounds with the three interleaved
(floor, hlo, passes, floor, ...) so that a change in the machine's load falls on all three:
- floor: JAX's own lower + compile + as_text (bench_show's script);
- `show --view hlo`: the inspector's plain compile;
- `show --view passes`: the same compile with the dump options, plus reading the dumps.
Each run is timed by GNU time: wall seconds, CPU seconds (user + system, the process and its
children: the CLI's child does the work) and peak RSS (the largest process of the tree). On a
shared machine the CPU seconds are the steadier measure; the 1-minute load average before each
run is printed with the figures.

Before the table, each case's cost is split in one process: the compile without dumps, with the
pass list's dumps (no metadata) and with a diff's dumps (`--pass`: metadata), and the reading of
each set of dumps.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_show import FLOOR, FLOOR_TPU, INSPECTOR, PY, ROOT

TARGET = "samples/transformer.py"


def _env(tpu: bool) -> dict:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    if tpu:
        env.update(TPU_SKIP_MDS_QUERY="1", TPU_WORKER_HOSTNAMES="localhost", TPU_ACCELERATOR_TYPE="v5litepod-4",
                   ALLOW_MULTIPLE_LIBTPU_LOAD="1", GLOG_minloglevel="3")
    return env


def _load() -> float:
    return os.getloadavg()[0]


def timed(cmd: list[str], env: dict) -> tuple[float, float, int, float]:
    """(wall s, CPU s, peak RSS KiB, load before) of one fresh process, by GNU time."""
    load = _load()
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", *cmd], env=env, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall, user, system, rss = out.read().split()[-4:]
    return float(wall), float(user) + float(system), int(rss), load


def _split(chip: str, func: str, n: int) -> dict:
    """In one process, N rounds: compile seconds (wall, CPU) without dumps, with the pass list's
    dumps (no metadata) and with a diff's dumps (metadata), then reading each set of dumps."""
    sys.path.insert(0, str(ROOT))
    from inspector.base import environment

    environment.prepare()
    from inspector.compilation import stages, xla_compile
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.hlo.passes import read_dumps
    from inspector.compilation.target import load_target

    target, backend = load_target(f"{ROOT / TARGET}:{func}"), Backend(get_chip(chip))

    def lowered():
        with backend.context(), stages._interpret_context(backend):
            return stages._trace(target, backend).lower()

    out = {k: [] for k in ("plain", "list", "diff", "read_list", "read_diff", "mib_list", "mib_diff", "load")}
    for _ in range(n):
        out["load"].append(_load())
        for case in ("plain", "list", "diff"):
            with tempfile.TemporaryDirectory(prefix="bench-passes-") as d:
                low = lowered()
                t0, c0 = time.perf_counter(), time.process_time()
                with backend.context():
                    result, _ = xla_compile.compile_lowered(low, backend, False, dump_to=None if case == "plain" else d,
                                                dump_metadata=case == "diff")
                out[case].append((time.perf_counter() - t0, time.process_time() - c0))
                if case != "plain":
                    c0 = time.process_time()
                    log = read_dumps(d, module=f"jit_{func}", final_hlo=result["hlo"])
                    out[f"read_{case}"].append(time.process_time() - c0)
                    out[f"mib_{case}"].append(log.dump_bytes / 2**20)
    out.update(steps=len(log.steps), files=log.files)
    return out


def _med(values, i=None) -> float:
    return statistics.median(v[i] if i is not None else v for v in values) if values else float("nan")


def main(n: int = 3, which: str = "all", func: str = "train_step") -> None:
    rows = []
    for chip in ("cpu", "tpu-v5e"):
        tpu = chip != "cpu"
        if which not in ("all", "tpu" if tpu else "cpu"):
            continue
        env = _env(tpu)
        script = (FLOOR_TPU.format(file=str(ROOT / TARGET), func=func, topology="v5e:2x2") if tpu
                  else FLOOR.format(file=str(ROOT / TARGET), func=func))
        cmds = {"floor": [PY, "-c", script],
                "hlo": [*INSPECTOR, "show", f"{TARGET}:{func}", "--view", "hlo", "--target", chip],
                "passes": [*INSPECTOR, "show", f"{TARGET}:{func}", "--view", "passes", "--target", chip]}
        runs = {k: [] for k in cmds}
        for _ in range(n):
            for k, cmd in cmds.items():
                runs[k].append(timed(cmd, env))
                print(f"  {chip} {k}: {runs[k][-1]}", file=sys.stderr, flush=True)
        rows.append((f"{func}, {chip}", runs))
        split = _split(chip, func, n)
        print(f"\n{func}, {chip}, in one process (median of {n}; load {min(split['load']):.1f}-{max(split['load']):.1f}), "
              f"seconds wall / CPU: compile {_med(split['plain'], 0):.2f} / {_med(split['plain'], 1):.2f}; "
              f"with the pass list's dumps {_med(split['list'], 0):.2f} / {_med(split['list'], 1):.2f}, "
              f"reading them {_med(split['read_list']):.2f} CPU ({_med(split['mib_list']):.0f} MiB); "
              f"with a diff's dumps (metadata) {_med(split['diff'], 0):.2f} / {_med(split['diff'], 1):.2f}, "
              f"reading them {_med(split['read_diff']):.2f} CPU ({_med(split['mib_diff']):.0f} MiB); "
              f"{split['steps']} steps, {split['files']} dump files", flush=True)
    print(f"\n{'case':22} {'command':8} {'wall s':>7} {'CPU s':>7} {'peak MiB':>9}  {'wall/floor':>10} "
          f"{'CPU/floor':>9} {'wall/hlo':>8} {'CPU/hlo':>8}  load")
    for name, runs in rows:
        med = {k: (_med(v, 0), _med(v, 1), _med(v, 2) / 1024) for k, v in runs.items()}
        for k, (wall, cpu, rss) in med.items():
            loads = [r[3] for r in runs[k]]
            print(f"{name:22} {k:8} {wall:7.2f} {cpu:7.2f} {rss:9.0f}  {wall / med['floor'][0]:10.2f} "
                  f"{cpu / med['floor'][1]:9.2f} {wall / med['hlo'][0]:8.2f} {cpu / med['hlo'][1]:8.2f}  "
                  f"{min(loads):.1f}-{max(loads):.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "all",
         sys.argv[3] if len(sys.argv) > 3 else "train_step")
