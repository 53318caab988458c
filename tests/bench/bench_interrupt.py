#!/usr/bin/env python
"""Ctrl-C latency during a TPU compile (BENCHMARKS.md).

Usage: .venv/bin/python tests/bench/bench_interrupt.py DELAY_S SIGINT|SIGTERM .venv/bin/inspector show \
           samples/transformer.py:train_step --target tpu-v5e --no-cache

Ctrl-C latency during a TPU compile: SIGINT to the whole process group (as a terminal does)
after DELAY seconds; time from the signal to the exit."""
import os
import signal
import subprocess
import sys
import time
delay, sig, cmd = float(sys.argv[1]), getattr(signal, sys.argv[2]), sys.argv[3:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
time.sleep(delay)
children = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
t0 = time.perf_counter()
os.killpg(p.pid, sig)
out, err = p.communicate()
dt = time.perf_counter() - t0
time.sleep(0.5)
alive = [c for c in children if os.path.exists(f"/proc/{c}")]
print(f"signal {sys.argv[2]} after {delay:.0f}s: exit {p.returncode} in {dt*1000:.0f} ms; stdout {len(out)} chars; stderr {err!r}; child pids {children} alive after: {alive}")
