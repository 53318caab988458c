"""Benchmark: the terminal UI (Textual's pilot, headless) against the goals of issue 16.

- first paint: seconds from launching `inspector TARGET` in a pseudo-terminal to its first screen
  (goal: 0.5 s), and under the pilot from the process's start to the app's first screen;
- keys while a long compile runs in the worker: from the key event (sent as the terminal driver
  sends it) to the tab switch, median and p90 (goal: 100 ms);
- search in the optimized HLO of the 12-layer transformer step on tpu-v5e (~13k lines): from
  Enter in the search box to the match selected and counted (goal: 0.2 s), cold (the first
  search of a needle scans the text) and repeated (`n`);
- page down in that HLO: from the key to the view scrolled and its lines rendered (goal: 50 ms);
- the stages' times as the status line gives them, and peak memory against `inspector show`.

Run: .venv/bin/python tests/bench/bench_tui.py [runs]   (compile cache off; prints `uptime` first)
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
from inspector.base import environment; environment.prepare()
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from inspector.views.tui.stage_text import StageText
from textual import events
from textual.widgets import Static, TabbedContent

def key(app, name, char=None):
    # as the terminal driver hands a key press to the app
    event = events.Key(name, char if char is not None else (name if len(name) == 1 else None))
    event.set_sender(app)
    app._driver.send_message(event)

async def until(condition, what="", limit=30.0):
    give_up = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > give_up:
            raise TimeoutError(f"waited {{limit}} s for {{what}}; status: {{status(app_)}}")
        await asyncio.sleep(0.0005)

async def key_latency(app, name, tab):
    t0 = time.perf_counter()
    key(app, name)
    await until(lambda: app.query_one(TabbedContent).active == tab, f"tab {{tab}}")
    return time.perf_counter() - t0

def summary(xs):
    xs = sorted(xs)
    return (f"median {{statistics.median(xs) * 1000:.0f}} ms, p90 {{xs[int(0.9 * (len(xs) - 1))] * 1000:.0f}} ms, "
            f"max {{xs[-1] * 1000:.0f}} ms over {{len(xs)}}") if xs else "none"

def status(app):
    return str(app.query_one('#status', Static).content)

async def search(app, pilot, needle, repeat=10):
    # / then the needle typed (not timed), then Enter: timed to the match selected and counted
    app.action_search()
    box = app.query_one('#search')
    box.value = needle
    await pilot.pause()
    t0 = time.perf_counter()
    key(app, 'enter', '\\r')
    await until(lambda: status(app).startswith('/' + needle + ':'), 'the search')
    cold = time.perf_counter() - t0
    await pilot.pause()
    again = []
    for _ in range(repeat):
        before = status(app)
        t0 = time.perf_counter()
        key(app, 'n')
        await until(lambda: status(app) != before, 'n')
        again.append(time.perf_counter() - t0)
        await pilot.pause()
    return cold, again, status(app)

async def page_down(app, pilot, text, times):
    out = []
    for _ in range(times):
        y = text.scroll_y
        t0 = time.perf_counter()
        key(app, 'pagedown')
        await until(lambda: text.scroll_y != y, 'page down')
        for row in range(text.size.height):  # the lines the next frame draws
            text.render_line(row)
        out.append(time.perf_counter() - t0)
        await pilot.pause()
    return out

async def main():
    global app_
    app = app_ = InspectorApp(Session({target!r}, {chip!r}, use_cache=False))
    async with app.run_test(size=(120, 36)) as pilot:
        first_paint = process_age()
        during, lowered_at = [], None
        t_start = time.perf_counter()
        while app.report is None and len(during) < 400:
            if app.lowered is not None and lowered_at is None:
                lowered_at = time.perf_counter() - t_start
            for name, tab in (("2", "jaxpr"), ("1", "overview")):
                if app.report is None:
                    during.append(await key_latency(app, name, tab))
            await asyncio.sleep(0.2)
        await app.workers.wait_for_complete()
        await pilot.pause()
        stages = status(app)
        after = []
        for name, tab in (("2", "jaxpr"), ("3", "stablehlo"), ("4", "hlo"), ("5", "fusions"), ("6", "pallas"), ("1", "overview")) * 3:
            after.append(await key_latency(app, name, tab))
            await pilot.pause()
        app.action_tab('hlo')
        await pilot.pause()
        hlo = app.query_one('#text-hlo', StageText)
        lines = hlo.document.line_count
        cold, again, said = await search(app, pilot, 'fusion(')
        missing, _, missing_said = await search(app, pilot, 'no-such-op', repeat=0)
        hlo.focus()
        hlo.move_cursor((0, 0))
        await pilot.pause()
        pages = await page_down(app, pilot, hlo, 30)
    ui = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"first paint {{first_paint:.2f}} s after the process started")
    print(f"  status at the end: {{stages}}")
    print(f"  keys during the compile: {{summary(during)}}")
    print(f"  keys after it: {{summary(after)}}")
    print(f"  search in the HLO ({{lines:,}} lines): 'fusion(' {{cold * 1000:.0f}} ms, then n: {{summary(again)}} [{{said}}]; "
          f"'no-such-op' {{missing * 1000:.0f}} ms [{{missing_said}}]")
    print(f"  page down in the HLO: {{summary(pages)}}")
    print(f"  peak RSS: UI {{ui:.0f}} MiB + worker {{worker:.0f}} MiB")
asyncio.run(main())
"""


def first_paint_in_a_terminal(argv: list[str], cols: int = 120, rows: int = 36, marker: bytes = b"Overview") -> float | None:
    """Seconds from starting ``argv`` in a pseudo-terminal to its first screen (the tab bar
    written), as a person launching `inspector TARGET` sees it; then q quits it."""
    import fcntl
    import select
    import struct
    import termios
    import time

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, start_new_session=True)
    os.close(slave)
    seen, when = b"", None
    while time.perf_counter() < t0 + 60 and proc.poll() is None:
        if select.select([master], [], [], 0.05)[0]:
            try:
                seen += os.read(master, 1 << 16)
            except OSError:
                break
            if when is None and marker in seen:
                when = time.perf_counter() - t0
                os.write(master, b"q")
    proc.wait(timeout=30)
    os.close(master)
    return when


def main() -> None:
    import statistics

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    paints = sorted(first_paint_in_a_terminal([sys.executable, "-m", "inspector", TARGET, "--target", "cpu"]) or float("nan")
                    for _ in range(10))
    print(f"first paint in a terminal (`python -m inspector {TARGET}`, a pty, 10 launches): median "
          f"{statistics.median(paints):.2f} s, min {paints[0]:.2f} s, max {paints[-1]:.2f} s")
    env = dict(os.environ, INSPECTOR_NO_CACHE="1")
    for chip in ("tpu-v5e", "cpu"):
        for run in range(runs):
            out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), target=TARGET, chip=chip)],
                                 cwd=ROOT, env=env, capture_output=True, text=True)
            lines = [line for line in out.stdout.splitlines() if line.strip()] or out.stderr.strip().splitlines()[-5:]
            print(f"TUI {TARGET} on {chip}, run {run + 1}: " + "\n".join(lines))
        show = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "inspector", "show", TARGET, "--target", chip,
                               "--view", "overview"], cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"  show --view overview on {chip}: peak RSS {int(show.stderr.strip().splitlines()[-1]) / 1024:.0f} MiB")
        print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
