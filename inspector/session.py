"""What the terminal UI asks of the core, in one object: the report for the current chip and
parameters, a diff, an export. The app calls these from worker threads and only renders what
comes back; it never touches jax itself."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path


@dataclasses.dataclass
class Session:
    spec: str
    chip: str = "cpu"
    args: str | None = None
    ref: str | None = None
    sets: list[str] = dataclasses.field(default_factory=list)
    use_cache: bool = True

    def target(self, fresh: bool = False):
        from .target import load_target, split_spec

        if fresh:  # --watch: import the file again so edits are seen
            where = split_spec(self.spec)[0]
            for name, module in list(sys.modules.items()):
                if getattr(module, "__file__", None) and os.path.abspath(module.__file__) == os.path.abspath(where):
                    del sys.modules[name]
            from . import stages
            stages._MEMO.clear()
        return load_target(self.spec, args=self.args, ref=self.ref, sets=self.sets)

    def report(self, fresh: bool = False):
        from .backends import Backend
        from .chips import get_chip
        from .report import build_report
        from .stages import capture

        target = self.target(fresh)
        chip = get_chip(self.chip)
        captured = capture(target, Backend(chip), jaxpr_text=True, use_cache=self.use_cache)
        captured.stages.op_counts  # counted here, in the worker process, not in the UI's thread
        return build_report(target, chip, captured, fusions=True, pallas=True)

    def diff(self):
        from .chips import get_chip
        from .diff import run_diff

        chip = get_chip(self.chip)  # a TPU target is the chip interpret mode simulates
        return run_diff(self.target(), runs=1, chip=chip if chip.is_tpu else None)

    def with_chip(self, chip: str) -> "Session":
        return dataclasses.replace(self, chip=chip)

    def with_params(self, params: dict[str, str]) -> "Session":
        sets = [s for s in self.sets if s.split("=", 1)[0] not in params] + [f"{k}={v}" for k, v in params.items()]
        return dataclasses.replace(self, sets=sets)

    def source_file(self) -> Path | None:
        from .target import split_spec

        where = split_spec(self.spec)[0]
        return Path(where) if where.endswith(".py") else None

    def export(self, report, directory: str = ".") -> list[str]:
        """SVG (when Graphviz is there) and JSON of the current report, next to the user."""
        import json

        from .atomic import write_atomic
        from .hlo.graph import build_dot, dot_available, render_svg

        stem = Path(directory) / f"inspector-{report.target.function}-{report.chip.name}"
        written = [str(write_atomic(f"{stem}.json", json.dumps(report.to_dict(texts=("jaxpr", "stablehlo", "hlo", "mosaic")),
                                                                    indent=2, default=str)))]
        if report.fusions is not None and dot_available():
            graph, summary = build_dot(report.fusions, f"{report.target.spec} on {report.chip.name}")
            written.append(str(write_atomic(f"{stem}.svg", render_svg(graph, summary.nodes))))
        return written
