"""Regenerate tests/data/hlo/gpt2_plain_tpu.hlo.gz: the optimized HLO libtpu makes (deviceless, for
tpu-v5e) of tests/data/gpt2_plain.py:train_step, the 24-layer GPT-2-style step without named
scopes that tests/test_graph_source.py groups by its source. Paths in its stack-frame table are
made relative to the repository. Run from the repository root (about a minute):

    .venv/bin/python tests/data/make_gpt2_hlo.py
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("hlo") / "gpt2_plain_tpu.hlo.gz"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from inspector.base import environment

    environment.prepare()
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target

    stages = capture(load_target("tests/data/gpt2_plain.py:train_step"), Backend(get_chip("tpu-v5e"))).stages
    if stages.hlo is None:
        raise SystemExit(f"no HLO: {stages.compile_error}")
    text = stages.hlo.replace(str(ROOT) + "/", "")
    OUT.write_bytes(gzip.compress(text.encode(), 9, mtime=0))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
