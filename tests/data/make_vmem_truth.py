"""Regenerate tests/data/vmem_truth.json: libtpu's verdict (fits or not, and its VMEM figure) for
every pallas_call target of the corpus, each combination of its INSPECT params, on every TPU
generation, beside the inspector's static estimate. tests/test_corpus.py checks the estimate
against it. Run from the repository root (takes a while: one real compile per row):

    .venv/bin/python tests/data/make_vmem_truth.py [TARGET ...]
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("vmem_truth.json")
CORPUS = ["samples/jax_kernels.py", "samples/attention.py", "samples/matmul.py", "samples/moe.py", "samples/bugs.py"]
MAX_COMBINATIONS = 12  # per target: the first combinations INSPECT offers (the defaults first)


def targets(files: list[str]) -> list[str]:
    from inspector.target import load_module

    found = []
    for file in files:
        table = getattr(load_module(file), "INSPECT", {}) or {}
        found += [f"{file}:{name}" for name in table]
    return found


def combinations(target) -> list[dict]:
    names = list(target.param_choices)
    combos = itertools.product(*(target.param_choices[n] for n in names))
    return [dict(zip(names, values)) for values in itertools.islice(combos, MAX_COMBINATIONS)]


def rows_for(spec: str) -> list[dict]:
    from inspector.chips import CHIPS
    from inspector.errors import InspectorError
    from inspector.pallas.check import run_check
    from inspector.target import load_target

    chips = [c for c in CHIPS if c.is_tpu]
    try:
        base = load_target(spec)
    except InspectorError as err:
        print(f"skip {spec}: {err}", file=sys.stderr)
        return []
    rows = []
    for params in combinations(base) or [{}]:
        target = dataclasses.replace(base, params=dict(base.params, **params))
        try:
            result = run_check(target, chips, use_cache=False)
        except InspectorError as err:
            print(f"skip {spec} {params}: {err}", file=sys.stderr)
            continue
        if not result.kernels:
            continue
        for row in result.targets:
            rows.append({"target": spec, "params": params, "chip": row.chip, "estimate_bytes": row.vmem_bytes,
                         "estimate_fits": row.fits, "compiler_fits": row.compiler_fits,
                         "compiler_bytes": row.compiler_vmem_bytes, "compiler_message": row.compiler_message})
    return rows


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from inspector import environment
    environment.prepare()
    specs = argv or targets(CORPUS)
    table = {"jax": metadata.version("jax"), "libtpu": metadata.version("libtpu"), "rows": []}
    t0 = time.time()
    for spec in specs:
        rows = rows_for(spec)
        table["rows"] += rows
        print(f"{spec}: {len(rows)} rows ({time.time() - t0:.0f} s)", file=sys.stderr)
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(table['rows'])} rows", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
