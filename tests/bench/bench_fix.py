"""The cost of `inspector fix` on the samples (deviceless, this machine), and on a TPU VM the
fixes' measured times against their estimates (--measure). One JSON out.

    .venv/bin/python tests/bench/bench_fix.py cost OUT.json      # here: wall time per target
    python tests/bench/bench_fix.py measure OUT.json             # on a TPU VM (v5e): --measure
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = [
    ("samples/attention.py:flash", ["--set", "block_q=4096", "--target", "tpu-v5e"]),
    ("samples/matmul.py:tiled", ["--target", "tpu-v5e"]),
    ("tests/data/heldout10/keras_matmul_relu.py:keras_matmul_relu", ["--target", "tpu-v5p"]),
]


def _run(spec: str, extra: list[str]) -> dict:
    env = dict(os.environ, INSPECTOR_NO_CACHE="1", NO_COLOR="1")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "inspector", "fix", spec, *extra, "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t0
    row = {"target": spec, "options": extra, "exit": done.returncode, "seconds": round(seconds, 1)}
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        row["stderr"] = done.stderr[-2000:]
        return row
    row["fixes"] = [{"change": f["change"], "numerics": f["numerics"], "gains": f["gains"], "recommended": f["recommended"],
                     "trials": f["trials"]} for f in result["fixes"]]
    row["before"], row["refused"] = result["before"], len(result["refused"])
    return row


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("cost", "measure"):
        print(__doc__, file=sys.stderr)
        return 2
    extra = ["--measure", "--no-numerics"] if argv[0] == "measure" else []
    rows = []
    for spec, options in CASES:
        if argv[0] == "measure" and "tpu-v5e" not in options:
            continue  # measured on the attached chip only (the lent TPU is a v5e)
        rows.append(_run(spec, options + extra))
        print(json.dumps({k: rows[-1][k] for k in ("target", "exit", "seconds")}), file=sys.stderr)
        with open(argv[1] + ".tmp", "w") as f:  # after each target: a run stopped early keeps what it finished
            json.dump({"mode": argv[0], "rows": rows}, f, indent=1)
        os.replace(argv[1] + ".tmp", argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
