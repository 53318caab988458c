"""Regenerate tests/data/vmem_truth.json: libtpu's verdict (fits or not, and its VMEM figure) for
every pallas_call target of the corpus, each combination of its INSPECT params, on every TPU
generation, beside the inspector's static estimate. tests/test_corpus.py checks the estimate
against it. Run from the repository root (takes a while: one real compile per row):

    .venv/bin/python tests/data/make_vmem_truth.py [TARGET ...]

``--styles`` writes tests/data/vmem_truth_styles.json instead, from the kernels written in the
styles of third-party ones (tests/data/third_party_styles.py; tests/test_third_party_styles.py).
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
STYLES_OUT = Path(__file__).with_name("vmem_truth_styles.json")
STYLES = "tests/data/third_party_styles.py"
CORPUS = ["samples/jax_kernels.py", "samples/attention.py", "samples/matmul.py", "samples/moe.py", "samples/bugs.py"]
MAX_COMBINATIONS = 8  # per target: the first combinations INSPECT offers (the defaults first)
# Shapes and blocks that straddle the VMEM limits (the corpus's own shapes fit everywhere):
# (target, example inputs, every combination of these params).
STRESS = [
    ("samples/jax_kernels.py:flash_attention", "f32[1,1,4096,128] f32[1,1,4096,128] f32[1,1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_k_major": [1024, 4096], "block_k": [512, 1024]}),
    ("samples/jax_kernels.py:matmul", "f32[4096,4096] f32[4096,4096]",
     {"bm": [512, 1024, 2048], "bn": [512, 1024, 2048], "bk": [512, 1024, 2048]}),
    ("samples/jax_kernels.py:splash_mha_causal", "bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_kv": [1024, 2048, 4096], "block_kv_compute": [1024]}),
    ("samples/jax_kernels.py:gmm", None, {"tm": [256, 512], "tk": [128, 256], "tn": [128, 256]}),
    ("samples/attention.py:flash", "bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
     {"block_q": [1024, 2048, 4096], "block_k": [512, 1024, 2048]}),
    ("samples/matmul.py:tiled", "bf16[4096,4096] bf16[4096,4096]",
     {"bm": [1024, 2048], "bn": [1024, 2048], "bk": [1024, 2048]}),
]


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


def rows_for(spec: str, args: str | None = None, grid: dict | None = None) -> list[dict]:
    from inspector.chips import CHIPS
    from inspector.errors import InspectorError
    from inspector.pallas.check import run_check
    from inspector.target import load_target

    chips = [c for c in CHIPS if c.is_tpu]
    try:
        base = load_target(spec, args=args)
    except InspectorError as err:
        print(f"skip {spec}: {err}", file=sys.stderr)
        return []
    rows = []
    combos = ([dict(zip(grid, values)) for values in itertools.product(*grid.values())] if grid
              else combinations(base) or [{}])
    for params in combos:
        target = dataclasses.replace(base, params=dict(base.params, **params))
        try:
            result = run_check(target, chips, use_cache=False)
        except InspectorError as err:
            print(f"skip {spec} {params}: {err}", file=sys.stderr)
            continue
        if not result.kernels:
            continue
        for row in result.targets:
            rows.append({"target": spec, "args": args, "params": params, "chip": row.chip, "estimate_bytes": row.vmem_bytes,
                         "estimate_fits": row.fits, "compiler_fits": row.compiler_fits,
                         "compiler_bytes": row.compiler_vmem_bytes, "compiler_message": row.compiler_message})
    return rows


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from inspector import environment
    environment.prepare()
    global OUT
    if argv[:1] == ["--styles"]:
        OUT, argv = STYLES_OUT, targets([STYLES])
    jobs = [(spec, None, None) for spec in argv or targets(CORPUS)] + ([] if argv else STRESS)
    table = {"jax": metadata.version("jax"), "libtpu": metadata.version("libtpu"), "rows": []}
    t0 = time.time()
    for spec, args, grid in jobs:
        rows = rows_for(spec, args, grid)
        table["rows"] += rows
        OUT.write_text(json.dumps(table, indent=1) + "\n")  # as it goes: a long run keeps what it has
        print(f"{spec}: {len(rows)} rows ({time.time() - t0:.0f} s)", file=sys.stderr)
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(table['rows'])} rows", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
