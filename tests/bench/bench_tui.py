"""Benchmark: the terminal UI (Textual's pilot, headless). First paint after the process
starts, key latency while a long compile runs in the worker, and peak memory against
`inspector show` on the same target. Run: .venv/bin/python tests/bench/bench_tui.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = "samples/transformer.py:train_step"  # a long compile on tpu-v5e (~25 s): keys must stay quick meanwhile

CHILD = """
import asyncio, os, resource, statistics, sys, time
def process_age():
    # seconds since this process started (field 22 of /proc/self/stat, in clock ticks since boot)
    start = int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK')
    uptime = float(open('/proc/uptime').read().split()[0])
    return uptime - start
sys.path.insert(0, {root!r})
from inspector import environment; environment.prepare()
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from textual import events
from textual.widgets import TabbedContent

async def key_latency(app, key, tab):
    # from the key event to the tab switch, as the app handles it (pilot.press would add its own settling)
    t0 = time.perf_counter()
    app.post_message(events.Key(key, key))
    while app.query_one(TabbedContent).active != tab:
        await asyncio.sleep(0.0005)
    return time.perf_counter() - t0

def summary(xs):
    xs = sorted(xs)
    return (f"median {{statistics.median(xs) * 1000:.0f}} ms, p90 {{xs[int(0.9 * (len(xs) - 1))] * 1000:.0f}} ms, "
            f"max {{xs[-1] * 1000:.0f}} ms over {{len(xs)}} keys") if xs else "no keys"

async def main():
    app = InspectorApp(Session({target!r}, {chip!r}, use_cache=False))
    async with app.run_test(size=(120, 36)) as pilot:
        first_paint = process_age()
        during, after = [], []
        while app.report is None and len(during) < 200:
            for key, tab in (("2", "jaxpr"), ("1", "overview")):
                (during if app.report is None else after).append(await key_latency(app, key, tab))
            await asyncio.sleep(0.2)
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key, tab in (("2", "jaxpr"), ("3", "stablehlo"), ("4", "hlo"), ("5", "fusions"), ("6", "pallas"), ("1", "overview")) * 3:
            after.append(await key_latency(app, key, tab))
            await pilot.pause()
    # the UI process, and the worker process that compiled (reaped when the app closed)
    ui = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"first paint {{first_paint:.2f}} s after the process started; key to tab switch during the compile: "
          f"{{summary(during)}}; after it: {{summary(after)}}; peak RSS: UI {{ui:.0f}} MiB + worker {{worker:.0f}} MiB")
asyncio.run(main())
"""


def main() -> None:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1")
    for chip in ("tpu-v5e", "cpu"):
        out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), target=TARGET, chip=chip)],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"TUI {TARGET} on {chip}: {(out.stdout or out.stderr).strip().splitlines()[-1]}")
        show = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "inspector", "show", TARGET, "--target", chip,
                               "--view", "overview"], cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"  show --view overview on {chip}: peak RSS {int(show.stderr.strip().splitlines()[-1]) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
