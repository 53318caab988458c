"""Running Graphviz's `dot`: one process over one or more graphs, killed at its timeout, with
the full layout or the fast settings (straight edges, fewer passes of its two network-simplex
solvers and of crossing minimisation)."""
from __future__ import annotations

import shutil
import subprocess
import time

from ..errors import UsageError

FAST_ARGS = ("-Gsplines=line", "-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.3")  # measured: 25 s -> 1 s on a 109-node step
FULL_SHARE = 1 / 3  # of a graph's time, for the full layout before the fast one (its median is a few seconds here)


def dot_available() -> bool:
    return shutil.which("dot") is not None


def run_dot(sources: list[str], args: tuple[str, ...], timeout: float) -> list[bytes] | str:
    """One dot process over `sources`: their SVGs, or why not (a timeout, dot's error)."""
    if timeout <= 0.2:
        return "had no time left"
    run = subprocess.Popen(["dot", "-Tsvg", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = run.communicate("\n".join(sources).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout:.0f} s"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    parts = [b"<?xml" + p for p in stdout.split(b"<?xml")[1:]]
    if run.returncode != 0 or len(parts) != len(sources):
        lines = stderr.decode(errors="replace").strip().splitlines()
        return f"failed: {lines[-1] if lines else run.returncode}"
    return parts


def render_svg(graph, nodes: int = 0, timeout_s: float = 30) -> bytes:
    """`graph` (a graphviz.Digraph) as SVG: Graphviz's full layout, else its fast settings, within
    `timeout_s` in all; UsageError when neither finishes (`graph_render.draw` falls back to a
    layout of its own instead)."""
    if not dot_available():
        raise UsageError("Graphviz's `dot` is not installed, so no SVG: apt-get install graphviz (or brew install graphviz); "
                         "--dot PATH writes the graph source without it")
    started = time.perf_counter()
    out = run_dot([graph.source], (), timeout_s * FULL_SHARE)
    if isinstance(out, str):
        out = run_dot([graph.source], FAST_ARGS, started + timeout_s - time.perf_counter())
    if isinstance(out, str):
        raise UsageError(f"dot {out} ({nodes} nodes): draw fewer nodes (--max-nodes), or use `inspector export`, "
                         "which falls back to a layout of its own")
    return out[0]
