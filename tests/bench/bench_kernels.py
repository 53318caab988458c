"""Benchmark: each library kernel at its default blocks on tpu-v5e and tpu-v6e (deviceless
compiles): the compiler's VMEM figure, the HBM traffic from the BlockSpec walk, and the same
computation written in plain jnp (what XLA fuses on its own).
Run: .venv/bin/python tests/bench/bench_kernels.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inspector.base import environment  # noqa: E402

environment.prepare()

from inspector.compilation.backends import Backend  # noqa: E402
from inspector.base.chips import get_chip  # noqa: E402
from inspector.results.report import build_report# noqa: E402
from inspector.compilation.stages import capture  # noqa: E402
from inspector.compilation.target import load_target  # noqa: E402
from inspector.base.units import fmt_bytes, fmt_time  # noqa: E402

# (kernel target, --set for the chip's defaults, its plain-jnp counterpart)
CASES = [
    ("samples/attention.py:flash", {"tpu-v5e": ["block_q=512", "block_k=512"], "tpu-v6e": ["block_q=1024", "block_k=512"]},
     "samples/attention.py:naive"),
    ("samples/attention.py:block_sparse", {}, "samples/attention.py:block_sparse_dense"),
    ("samples/matmul.py:tiled", {"tpu-v5e": ["bm=256", "bk=256", "bn=256"], "tpu-v6e": ["bm=512", "bk=256", "bn=512"]},
     "samples/matmul.py:xla"),
    ("samples/moe.py:experts", {}, "samples/moe.py:experts_xla"),
]


def hbm(spec: str, chip: str, sets: list[str], args: str | None) -> tuple[int, float | None, str]:
    target = load_target(spec, sets=sets, args=args)
    captured = capture(target, Backend(get_chip(chip)))
    stages = captured.stages
    report = build_report(target, get_chip(chip), captured, fusions=True, pallas=True)
    if report.fusions is None:
        return 0, None, stages.compile_error.headline if stages.compile_error else "no HLO"
    vmem = [k.compiler_scoped_vmem_bytes for k in report.fusions.kernels if k.kind.startswith("custom-call:pallas")]
    note = f"VMEM {fmt_bytes(max(vmem))} (compiler)" if vmem and vmem[0] else ""
    walked = all(not p.walk.skipped for p in report.pallas or [])
    return report.fusions.totals["hbm_bytes"], report.fusions.totals["roofline_s"], note + ("" if walked else "; walk skipped")


def main() -> None:
    print(f"{'kernel':36} {'chip':8} {'kernel HBM':>11} {'jnp HBM':>10} {'ratio':>6} {'roofline':>10} {'jnp roofline':>12}  notes")
    for spec, defaults, plain in CASES:
        for chip in ("tpu-v5e", "tpu-v6e"):
            args = "bf16[4,4096,128] bf16[4,4096,128] bf16[4,4096,128]" if "attention" in spec else None
            k_bytes, k_time, note = hbm(spec, chip, defaults.get(chip, []), args)
            j_bytes, j_time, _ = hbm(plain, chip, [], args)
            ratio = j_bytes / k_bytes if k_bytes else float("nan")
            print(f"{spec:36} {chip:8} {fmt_bytes(k_bytes):>11} {fmt_bytes(j_bytes):>10} {ratio:6.1f} "
                  f"{fmt_time(k_time):>10} {fmt_time(j_time):>12}  {note}")


if __name__ == "__main__":
    main()
