"""Record the VMEM estimate on every row of the truth files (tests/data/vmem_truth*.json) into
tests/data/vmem_estimates.json: per row, the verdict `check --estimate-only` gives and each
kernel's budget in bytes. tests/test_vmem_estimates.py recomputes them and compares, so a change
to the rules that moves a verdict or a byte on a kernel on record shows. Run from the repository
root after a change to the rules that is meant to move them (one CPU trace per kernel and params,
not lowered: the estimate reads the jaxpr alone):

    .venv/bin/python tests/data/make_vmem_estimates.py
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent
OUT = DATA / "vmem_estimates.json"


def truth_files() -> list[str]:
    return sorted(p.name for p in DATA.glob("vmem_truth*.json"))


def budget_figures(b) -> dict:
    """What a budget says, in bytes, and its verdict."""
    return {"kernel": b.kernel, "verdict": b.verdict, "total": b.total_bytes, "limit": b.limit_bytes,
            "body": b.body_bytes, "held": b.held_bytes, "outside": b.outside_bytes, "placed": b.placed_bytes,
            "in_ref_matmul": b.in_ref_matmul_bytes, "spill": b.spill_bytes, "body_unrolled": b.body_unrolled,
            "items": [i.bytes for i in b.items], "room_for": [size for _, size in b.room_for]}


def estimates(name: str, calls: dict) -> list[dict]:
    """Each row of tests/data/<name>: its chip, its estimate's verdict (True, False, None) and its
    kernels' budgets. ``calls``: traced kernels by (target, args, params), shared across files."""
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.pallas.discovery import find_pallas_calls
    from inspector.pallas.budgets import budget
    from inspector.pallas.vmem import estimate_fits
    from inspector.compilation.stages import traced_program
    from inspector.compilation.target import load_target

    rows = []
    for r in json.loads((DATA / name).read_text())["rows"]:
        key = (r["target"], json.dumps(r["args"]), json.dumps(r["params"], sort_keys=True))
        if key not in calls:
            base = load_target(r["target"], args=r["args"])
            target = dataclasses.replace(base, params=dict(base.params, **(r["params"] or {})))
            calls[key] = find_pallas_calls(traced_program(target, Backend(get_chip("cpu")), memo=False))
        budgets = [b for c in calls[key] if (b := budget(c.info, get_chip(r["chip"])))]
        rows.append({"target": r["target"], "args": r["args"], "params": r["params"], "chip": r["chip"],
                     "fits": estimate_fits(budgets) if budgets else True,
                     "budgets": [budget_figures(b) for b in budgets]})
    return rows


def main() -> None:
    sys.path.insert(0, str(ROOT))
    calls: dict = {}
    out = {name: estimates(name, calls) for name in truth_files()}
    lines = ",\n".join(f"{json.dumps(name)}: [\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "\n]"
                        for name, rows in out.items())
    OUT.write_text("{\n" + lines + "\n}\n")
    print(f"{OUT}: {sum(map(len, out.values()))} rows of {len(out)} files")


if __name__ == "__main__":
    main()
