"""Where the test suite's time goes, as Markdown tables for BENCHMARKS.md (issue 63).

    .venv/bin/python -m pytest -q --junitxml=/tmp/suite.xml [-p compile_log]   # the run to read
    .venv/bin/python tests/bench/suite_profile.py /tmp/suite.xml [--compiles compiles.jsonl] [--top 30]

From pytest's JUnit XML (every test's seconds, set-up and tear-down included): the total, the
slowest tests, the time per file, and per kind (the markers each test carries, read by collecting
the suite once per marker). With ``--compiles``, a JSON-lines log of compile-cache look-ups
(one object a line: test, op, key, hit), the keys compiled more than once in a run: work a
shared cache or a session fixture would do once.
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("slow", "libtpu", "process")  # markers, in the order a test is counted under (the first it has)


def test_times(junit: Path) -> dict[str, float]:
    """nodeid -> seconds, from pytest's JUnit XML."""
    times = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = case.get("name", "").split("@")[0]  # pytest-xdist's loadgroup adds @GROUP
        times[f"{module}.py::{name}"] = float(case.get("time") or 0)
    return times


def marked(marker: str) -> set[str]:
    """The node ids of the tests carrying ``marker`` (one collection of the suite)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker, "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True)
    return {line.strip() for line in done.stdout.splitlines() if "::" in line}


def kind_of(nodeid: str, kinds: dict[str, set[str]]) -> str:
    if Path(nodeid.split("::")[0]).name.startswith("test_tui"):
        return "tui (Textual pilot)"
    for name in KINDS:
        if nodeid in kinds[name]:
            return name
    return "other (unit, cpu)"


def fmt(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.1f} s"


def tables(times: dict[str, float], kinds: dict[str, set[str]] | None, top: int) -> str:
    total = sum(times.values())
    out = [f"{len(times)} tests, {fmt(total)} of test time (set-up and tear-down included).", "",
           f"Slowest {top}:", "", "| s | test |", "| ---: | --- |"]
    out += [f"| {s:.1f} | `{t}` |" for t, s in sorted(times.items(), key=lambda kv: -kv[1])[:top]]
    per_file: dict[str, list[float]] = collections.defaultdict(list)
    for t, s in times.items():
        per_file[t.split("::")[0]].append(s)
    out += ["", "Per file (the 25 longest):", "", "| file | tests | time | share |", "| --- | ---: | ---: | ---: |"]
    for f, ss in sorted(per_file.items(), key=lambda kv: -sum(kv[1]))[:25]:
        out.append(f"| `{f}` | {len(ss)} | {fmt(sum(ss))} | {100 * sum(ss) / total:.0f}% |")
    if kinds is not None:
        per_kind: dict[str, list[float]] = collections.defaultdict(list)
        for t, s in times.items():
            per_kind[kind_of(t, kinds)].append(s)
        out += ["", "Per kind (a test counted under the first of: tui, slow, libtpu, process, other):", "",
                "| kind | tests | time | share |", "| --- | ---: | ---: | ---: |"]
        for k, ss in sorted(per_kind.items(), key=lambda kv: -sum(kv[1])):
            out.append(f"| {k} | {len(ss)} | {fmt(sum(ss))} | {100 * sum(ss) / total:.0f}% |")
    return "\n".join(out)


def repeated_compiles(log: Path) -> str:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    misses: dict[str, list[str]] = collections.defaultdict(list)
    for r in rows:
        if r["op"] in ("load", "load_entry") and r["hit"] is False:
            misses[r["key"]].append(r["test"] or "(outside a test)")
    again = {k: v for k, v in misses.items() if len(v) > 1}
    ops = collections.Counter((r["op"], r["hit"]) for r in rows)
    out = ["", f"Compile-cache look-ups in the test process: {len(rows)} ({ops[('load', True)]} hits, "
           f"{ops[('load', False)]} misses, {ops[('store', None)]} stores); keys missed more than once: {len(again)}, "
           f"{sum(len(v) - 1 for v in again.values())} compiles that a cache kept for the run would not repeat.", ""]
    if again:
        out += ["| key | misses | files |", "| --- | ---: | --- |"]
        for k, v in sorted(again.items(), key=lambda kv: -len(kv[1]))[:20]:
            out.append(f"| {k[:12]} | {len(v)} | {', '.join(sorted({t.split('::')[0] for t in v}))} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--compiles", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-kinds", action="store_true", help="skip the per-kind table (it collects the suite 3 times)")
    opts = parser.parse_args()
    kinds = None if opts.no_kinds else {k: marked(k) for k in KINDS}
    print(tables(test_times(opts.junit), kinds, opts.top))
    if opts.compiles:
        print(repeated_compiles(opts.compiles))


if __name__ == "__main__":
    main()
