"""Benchmark: `inspector show --view passes` (a compile with XLA's pass-by-pass dumps, the dumps
read into an index and removed) against a plain compile. Run:
.venv/bin/python tests/bench/bench_passes.py [N] [cpu|tpu|all]

Three commands per case, each in fresh processes, cache off, median of N runs:
- floor: JAX's own lower + compile + as_text (bench_show's script);
- `show --view hlo`: the inspector's plain compile;
- `show --view passes`: the same compile with the dump options, plus reading the dumps.
Peak RSS is GNU time's maximum resident set size of the whole process tree's largest process
(the CLI's child does the work). The second table times the reading alone, in-process, on the
dump folder of one compile.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from bench_show import FLOOR, FLOOR_TPU, INSPECTOR, PY, ROOT, median_wall, rss_of

TARGET, FUNC = "samples/transformer.py", "train_step"


def _env(tpu: bool) -> dict:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    if tpu:
        env.update(TPU_SKIP_MDS_QUERY="1", TPU_WORKER_HOSTNAMES="localhost", TPU_ACCELERATOR_TYPE="v5litepod-4",
                   ALLOW_MULTIPLE_LIBTPU_LOAD="1", GLOG_minloglevel="3")
    return env


def _reading(chip: str) -> tuple[float, int, int, int]:
    """(seconds to index the dumps, files, MiB dumped, steps) for one compile with dumps, in-process."""
    sys.path.insert(0, str(ROOT))
    from inspector import environment

    environment.prepare()
    from inspector.backends import Backend
    from inspector.chips import get_chip
    from inspector.hlo.passes import read_dumps
    from inspector.stages import capture
    from inspector.target import load_target

    target = load_target(f"{TARGET}:{FUNC}")
    with tempfile.TemporaryDirectory(prefix="bench-passes-") as d:
        captured = capture(target, Backend(get_chip(chip)), jaxpr_text=False, use_cache=False, dump_to=d)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            log = read_dumps(d, module=f"jit_{FUNC}", final_hlo=captured.stages.hlo)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), log.files, log.dump_bytes >> 20, len(log.steps)


def main(n: int = 3, which: str = "all") -> None:
    rows = []
    for chip in ("cpu", "tpu-v5e"):
        tpu = chip != "cpu"
        if which not in ("all", "tpu" if tpu else "cpu"):
            continue
        env = _env(tpu)
        script = (FLOOR_TPU.format(file=str(ROOT / TARGET), func=FUNC, topology="v5e:2x2") if tpu
                  else FLOOR.format(file=str(ROOT / TARGET), func=FUNC))
        floor = [PY, "-c", script]
        hlo = [*INSPECTOR, "show", f"{TARGET}:{FUNC}", "--view", "hlo", "--target", chip]
        passes = [*INSPECTOR, "show", f"{TARGET}:{FUNC}", "--view", "passes", "--target", chip]
        f, h, p = median_wall(floor, env, n), median_wall(hlo, env, n), median_wall(passes, env, n)
        rows.append((f"{FUNC}, {chip}", f, h, p, rss_of(floor, env), rss_of(hlo, env), rss_of(passes, env)))
        print(f"reading the dumps ({chip}): {_reading(chip)}  (s, files, MiB, steps)", flush=True)
    print(f"{'case':24} {'floor s':>8} {'hlo s':>7} {'passes s':>9} {'/floor':>7} {'/hlo':>6} "
          f"{'floor MiB':>10} {'hlo MiB':>8} {'passes MiB':>11}")
    for name, f, h, p, fr, hr, pr in rows:
        print(f"{name:24} {f:8.2f} {h:7.2f} {p:9.2f} {p / f:7.2f} {p / h:6.2f} {fr / 1024:10.0f} {hr / 1024:8.0f} {pr / 1024:11.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "all")
