"""Wall and CPU time of `inspector show FILE:FUNC --view hlo --no-cache` against JAX's own
lower + compile + as_text of the same function (the floor), in fresh processes, interleaved.

Run: .venv/bin/python tests/bench/bench_wall.py N [FILE:FUNC] [--timeline] [--before=DIR]
(default tests/bench/gpt2_medium.py:train_step, a 24-layer GPT-2-medium step in plain jax.numpy).
CPU seconds are the user + system time of the whole process tree (the inspector's parent and its
analysis child); "cores" is CPU seconds per wall second. With --timeline, the process tree's CPU
rate per 2-second bin is printed too: where the work runs on one core and where on more.
With --before=DIR, a third command runs the inspector of another checkout (``git worktree add
DIR COMMIT``; run with this interpreter, DIR first on PYTHONPATH) in the same rounds.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

FLOOR = """
import sys, importlib.util, jax
spec = importlib.util.spec_from_file_location("m", {file!r}); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
args = m.INSPECT[{func!r}]["args"]
args = args() if callable(args) else args
text = jax.jit(getattr(m, {func!r})).lower(*args).compile().as_text()
sys.stdout.write(text)
"""


def _tree_cpu(pid: int) -> float:
    """CPU seconds so far of ``pid`` and its live children (clock ticks from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        pids += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def run(cmd: list[str], env: dict, timeline: bool) -> tuple[float, float, list[float]]:
    """Wall seconds, CPU seconds of the process tree, and the CPU rate per 2-s bin.

    CPU is read from /proc every 0.1 s (a process's utime + stime there include its threads that
    have ended) and the largest total kept: getrusage(RUSAGE_CHILDREN) on the reference machine
    (a Firecracker VM) loses the time of threads that end before their process, which undercounts
    a multi-threaded compile by half or more."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    rates, last_t, last_c, cpu = [], t0, 0.0, 0.0
    while proc.poll() is None:
        time.sleep(0.1)
        now = time.perf_counter()
        cpu = max(cpu, _tree_cpu(proc.pid))
        if timeline and now - last_t >= 2.0:
            rates.append((cpu - last_c) / (now - last_t))
            last_t, last_c = now, cpu
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}): {err[-2000:]}")
    return wall, cpu, rates


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    timeline = "--timeline" in sys.argv
    n = int(args[0]) if args else 3
    target = args[1] if len(args) > 1 else "tests/bench/gpt2_medium.py:train_step"
    file, func = target.rsplit(":", 1)
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("INSPECTOR_CACHE_DIR", None)
    commands = {"floor": [PY, "-c", FLOOR.format(file=str(ROOT / file), func=func)],
                "inspector": [PY, "-m", "inspector", "show", target, "--view", "hlo", "--no-cache"]}
    before = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--before=")), None)
    envs = {name: env for name in commands}
    if before:  # -P: the working folder (this checkout) must not come before the other one on sys.path
        commands["before"] = [PY, "-P", *commands["inspector"][1:]]
        envs["before"] = dict(env, PYTHONPATH=str(Path(before).resolve()))
    got: dict[str, list] = {k: [] for k in commands}
    import random

    for i in range(n):
        order = list(commands.items())
        random.Random(i).shuffle(order)  # no command always runs after the same one
        for name, cmd in order:
            load = os.getloadavg()[0]
            wall, cpu, rates = run(cmd, envs[name], timeline)
            got[name].append((wall, cpu))
            print(f"round {i + 1} {name:9s} wall {wall:6.1f} s  cpu {cpu:6.1f} s  cores {cpu / wall:.2f}  load {load:.1f}",
                  flush=True)
            if timeline:
                print("   cores per 2 s: " + " ".join(f"{r:.1f}" for r in rates), flush=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in got.items()}
    fw, fc = med["floor"]
    for name in [k for k in commands if k != "floor"]:
        w, c = med[name]
        print(f"median of {n}: floor {fw:.1f} s ({fc:.1f} CPU s), {name} {w:.1f} s ({c:.1f} CPU s): "
              f"wall {w / fw:.2f}x, CPU {c / fc:.2f}x")


if __name__ == "__main__":
    main()
