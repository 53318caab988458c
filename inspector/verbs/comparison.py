"""Two variants of a program side by side: two targets, one target with two parameter sets, or
one target on two chips. Both Reports are built on the path every verb takes (cli._report ->
report.build_report); this module only reads them. Plain data, never printed.

Kernels are paired by what they are, not by their HLO names (``fusion.12`` in one compile is
not ``fusion.12`` in another): kernels of the same kind made from the same jax op (op_name) at
the same source line pair up in schedule order, within the same group (a layer's forward) first;
then, of those left, the same line number in another file (variant B a copy of A), then the same
jax op anywhere (an edit moved the lines);
the ones left over are only on one side.
"""
from __future__ import annotations

import dataclasses

from ..base.display import html
from ..results.report import Report
from ..base.chips import SIMULATED_CHIP


@dataclasses.dataclass(frozen=True, kw_only=True)
class Side:
    label: str  # e.g. "samples/attention.py:flash block_q=128 on tpu-v5e"
    spec: str
    chip: str
    params: dict
    ok: bool
    compile_error: str | None  # the compiler's headline when it refused the program
    compile_cached: bool
    errors: list[str]  # the error findings' messages


@dataclasses.dataclass(frozen=True, kw_only=True)
class Total:
    name: str  # kernels | HBM bytes | flops | roofline time | XLA temporaries | compile time
    unit: str  # count | bytes | flops | seconds
    a: float | None
    b: float | None
    ratio: float | None  # b / a
    kind_a: str | None = None  # an estimated time's kind on each side: estimate | floor | range (a range's low end)
    kind_b: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelRef:
    name: str
    kind: str
    source: str | None
    hbm_bytes: int
    flops: float
    group: str | None = None  # its KernelGroup's label: layer3 forward, gpt2.py:34-35 block #7 backward


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelChange:
    a: KernelRef
    b: KernelRef
    bytes_delta: int  # b - a
    ratio: float | None  # b / a of the HBM bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class PallasVmem:
    """One pallas_call's VMEM on each side: the inspector's estimate and, on TPU targets, the
    compiler's own figure for its custom call (used_scoped_memory_configs)."""

    kernel: str
    chip_a: str | None
    chip_b: str | None
    estimate_a: int | None
    estimate_b: int | None
    limit_a: int | None
    limit_b: int | None
    compiler_a: int | None
    compiler_b: int | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compare:
    a: Side
    b: Side
    totals: list[Total]
    vmem: list[PallasVmem]
    only_a: list[KernelRef]
    only_b: list[KernelRef]
    changed: list[KernelChange]  # paired kernels whose HBM bytes differ, largest change first
    paired: int  # kernels present on both sides

    @property
    def ok(self) -> bool:
        return self.a.ok and self.b.ok

    def __repr__(self) -> str:  # the dataclass's would list every kernel
        return (f"<Compare {self.a.label} vs {self.b.label}: {self.paired} kernels paired, {len(self.only_a)} only in A, "
                f"{len(self.only_b)} only in B, {'ok' if self.ok else 'errors'}>")

    def _repr_html_(self) -> str:  # Jupyter: what `inspector compare` prints (rich loads only here)
        return html(self)


def _ratio(a, b) -> float | None:
    return b / a if a and b is not None else None


def _side(report: Report) -> Side:
    params = report.target.params
    label = report.target.spec + "".join(f" {k}={v}" for k, v in params.items()) + f" on {report.chip.name}"
    error = report.stages.compile_error.headline if report.stages.compile_error else None
    return Side(label=label, spec=report.target.spec, chip=report.chip.name, params=dict(params), ok=report.ok,
                compile_error=error, compile_cached=report.stages.compile_cached,
                errors=[f.message for f in report.findings if f.severity == "error"])


def _kernels(report: Report) -> list:
    return report.fusions.kernels if report.fusions else []


def _ref(k) -> KernelRef:
    return KernelRef(name=k.name, kind=k.kind, source=k.source, hbm_bytes=k.hbm_bytes * k.repeat, flops=k.flops * k.repeat,
                     group=k.group)


def _totals(a: Report, b: Report) -> list[Total]:
    def total(report, key):
        return report.fusions.totals.get(key) if report.fusions else None

    def memory(report, key):
        return (report.stages.memory or {}).get(key)

    rows = [("kernels", "count", lambda r: len(_kernels(r)) if r.fusions else None),
            ("HBM bytes", "bytes", lambda r: total(r, "hbm_bytes")),
            ("flops", "flops", lambda r: total(r, "flops")),
            ("roofline time", "seconds", lambda r: total(r, "roofline_s")),
            *([(_estimate_label(a, b), "seconds", lambda r: total(r, "estimated_seconds"))]
              if a.time is not None or b.time is not None else []),
            ("XLA temporaries", "bytes", lambda r: memory(r, "temp_size_in_bytes")),
            ("compile time", "seconds", lambda r: r.stages.timings.get("compile_s"))]
    # a simulation against a roofline (v5e against v4, a TPU against the CPU), or a floor against
    # anything, is no ratio
    kinds = (total(a, "estimate_kind"), total(b, "estimate_kind"))
    unlike = {name for name, _, _ in rows if name.startswith("estimated time (A ")
              or name.startswith("estimated time") and {"floor", "range"} & set(kinds)}
    return [Total(name=name, unit=unit, a=get(a), b=get(b), ratio=None if name in unlike else _ratio(get(a), get(b)),
                  **({"kind_a": kinds[0], "kind_b": kinds[1]} if name.startswith("estimated time") else {}))
            for name, unit, get in rows]


def _estimate_label(a: Report, b: Report) -> str:
    """The estimate's row, named by how its figures were made (libtpu, libtpu-extrapolated, ...), per side when they differ."""
    how_a, how_b = (r.time.method if r.time is not None else "none" for r in (a, b))
    return f"estimated time ({how_a})" if how_a == how_b else f"estimated time (A {how_a}, B {how_b})"


def _line(source: str | None) -> str | None:
    return source.rsplit(":", 1)[-1] if source else None


# Keys from strict to loose: the same source line in the same group (a layer's forward: one side may
# fuse a kernel more in an earlier layer); the same source line; the same line number in another file (B a copy
# of A, or A moved); the same jax op anywhere (lines shifted by an edit). Each pass pairs what the
# stricter ones left, in schedule order.
_PAIR_KEYS = (lambda k: (k.group, k.kind, k.op_name, k.source),  # layer 7's forward with layer 7's forward
              lambda k: (k.kind, k.op_name, k.source),
              lambda k: (k.kind, k.op_name, _line(k.source)),
              lambda k: (k.kind, k.op_name))


def _pair(a: list, b: list) -> tuple[list[tuple], list, list]:
    """(pairs, only in a, only in b): same kind and jax op, then the closest source, in schedule order."""
    pairs, only_a, rest_b = [], list(a), list(b)
    for key in _PAIR_KEYS:
        waiting: dict[tuple, list] = {}
        for k in rest_b:
            waiting.setdefault(key(k), []).append(k)
        left = []
        for k in only_a:
            queue = waiting.get(key(k))
            if queue:
                pairs.append((k, queue.pop(0)))
            else:
                left.append(k)
        paired_b = {id(kb) for _, kb in pairs}
        only_a, rest_b = left, [k for k in rest_b if id(k) not in paired_b]
    return pairs, only_a, rest_b


def _budget(report: Report, call) -> tuple[str | None, int | None, int | None]:
    """(chip, estimate, limit) of one pallas_call: the target chip's budget, else (on the CPU) that of
    the TPU whose rules the kernel was traced under, else the first TPU's."""
    budgets = [b for b in call.budgets if b.memory == "VMEM"]
    chosen = (next((b for b in budgets if b.chip == report.chip.name), None)
              or next((b for b in budgets if b.chip == SIMULATED_CHIP), None) or (budgets[0] if budgets else None))
    return (chosen.chip, chosen.total_bytes, chosen.limit_bytes) if chosen else (None, None, None)


def _vmem(a: Report, b: Report) -> list[PallasVmem]:
    calls_a, calls_b = list(a.pallas or []), list(b.pallas or [])
    rows = []
    for i in range(max(len(calls_a), len(calls_b))):
        ca = calls_a[i] if i < len(calls_a) else None
        cb = calls_b[i] if i < len(calls_b) else None
        either = ca or cb
        assert either is not None  # i is within one of the lists
        name = either.call.name
        chip_a, est_a, lim_a = _budget(a, ca) if ca else (None, None, None)
        chip_b, est_b, lim_b = _budget(b, cb) if cb else (None, None, None)
        rows.append(PallasVmem(
            kernel=name if not cb or not ca or ca.call.name == cb.call.name else f"{ca.call.name} / {cb.call.name}",
            chip_a=chip_a, chip_b=chip_b, estimate_a=est_a, estimate_b=est_b, limit_a=lim_a, limit_b=lim_b,
            compiler_a=a.compiler_vmem.get(ca.call.name) if ca else None,
            compiler_b=b.compiler_vmem.get(cb.call.name) if cb else None))
    return rows


def compare_reports(a: Report, b: Report) -> Compare:
    pairs, only_a, only_b = _pair(_kernels(a), _kernels(b))
    changed = [KernelChange(a=_ref(ka), b=_ref(kb), bytes_delta=_ref(kb).hbm_bytes - _ref(ka).hbm_bytes,
                            ratio=_ratio(_ref(ka).hbm_bytes, _ref(kb).hbm_bytes))
               for ka, kb in pairs if ka.hbm_bytes * ka.repeat != kb.hbm_bytes * kb.repeat]
    changed.sort(key=lambda c: -abs(c.bytes_delta))
    by_bytes = lambda k: -k.hbm_bytes
    return Compare(a=_side(a), b=_side(b), totals=_totals(a, b), vmem=_vmem(a, b), only_a=sorted(map(_ref, only_a), key=by_bytes),
                   only_b=sorted(map(_ref, only_b), key=by_bytes), changed=changed, paired=len(pairs))
