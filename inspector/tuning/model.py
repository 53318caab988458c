"""What a sweep finds, as plain data (JSON-serialisable): one row per candidate, chip and input
shape; per shape and chip the rows ranked by libtpu's estimated time. Views only read these."""
from __future__ import annotations

import dataclasses

from ..base.display import html

# How a candidate ended, in the order a ranking lists them.
RANKED = "ranked"  # compiled, with libtpu's time estimate (on a GPU: its time floor)
UNTIMED = "untimed"  # compiled, but libtpu gave no time within the budget: a roofline bound only, not ranked
PRUNED = "pruned"  # the VMEM estimate: its blocks and scratch alone pass the limit; never compiled
REFUSED = "refused"  # the compiler refused it (VMEM or shared memory out of memory, a lowering or compile error)
FAILED = "failed"  # the function raised for it (a block that does not divide), or its worker died
NOT_RUN = "not-run"  # the sweep was interrupted first
STATUSES = (RANKED, UNTIMED, PRUNED, REFUSED, FAILED, NOT_RUN)
# a family's time (its Capabilities.time) -> the kind of figure its ranked rows have: libtpu's
# estimate on a TPU; on a GPU (no simulator deviceless) the floor, compared only with floors
TIMED_BY = {"simulated": "estimate", "floor": "floor"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneRow:
    """One candidate on one chip for one input shape."""

    shape: str  # the inputs as shape specs, e.g. "bf16[1024,1792] bf16[1792,4608]"
    chip: str
    params: dict  # the swept parameters' values (the fixed ones are the sweep's)
    status: str  # one of STATUSES
    reason: str | None = None  # why it is not ranked, in one line
    code: str | None = None  # the finding code of that reason (compile-vmem-oom, vmem-over-limit, ...)
    estimated_seconds: float | None = None  # the program's total, libtpu's estimate
    estimated_cycles: float | None = None
    estimate_source: str | None = None  # libtpu | libtpu-extrapolated | bundles | roofline
    estimate_kind: str | None = None  # a ranked row's: "estimate" (libtpu's), or "floor" (a GPU's: a lower bound)
    vmem_bytes: int | None = None  # the most scoped VMEM a Mosaic kernel uses, by the compiler
    vmem_estimate_bytes: int | None = None  # the static estimate (blocks x buffers + scratch + the body's largest value)
    vmem_limit_bytes: int | None = None  # the scoped limit the kernel compiles under
    hbm_bytes: int | None = None  # HBM traffic of the whole program (the Pallas kernels' from their BlockSpec walk)
    bound: str | None = None  # the unit that bounds the slowest Pallas kernel's grid step (MXU, DMA waits, ...)
    spills: int | None = None  # spill stores + fills per grid step, over the Pallas kernels
    notes: list[str] = dataclasses.field(default_factory=list)  # libtpu's findings about the estimate, one line each
    default: bool = False  # the parameters INSPECT (or the function) uses by default
    cached: bool = False  # from the cache: nothing that shapes it changed since it was computed
    wall_seconds: float | None = None  # what computing it cost (None when cached)
    rank: int | None = None  # 1 = fastest on its chip and shape; None when not ranked
    ratio: float | None = None  # estimated time / the best's (measured time / the best's, where measured)
    measured_seconds: float | None = None  # device time on the attached TPU or GPU (tune --measure), per run of the program

    def set_line(self) -> str:
        return " ".join(f"--set {k}={_text(v)}" for k, v in self.params.items())


def sound_row(data) -> TuneRow | None:
    """A TuneRow from stored data (a cache entry, a worker's answer) when every field has its
    type (a ranked row with a time), else None: an entry edited, or written by another version,
    is a miss, never a crash in the ranking."""
    if not isinstance(data, dict):
        return None
    try:
        row = TuneRow(**data)
    except TypeError:
        return None
    texts = (row.shape, row.chip, row.status)
    maybe_texts = (row.reason, row.code, row.estimate_source, row.estimate_kind, row.bound)
    numbers = (row.estimated_seconds, row.estimated_cycles, row.vmem_bytes, row.vmem_estimate_bytes,
               row.vmem_limit_bytes, row.hbm_bytes, row.spills, row.wall_seconds, row.rank, row.ratio, row.measured_seconds)
    ok = (all(isinstance(t, str) for t in texts) and row.status in STATUSES and isinstance(row.params, dict)
          and all(t is None or isinstance(t, str) for t in maybe_texts)
          and all(n is None or (isinstance(n, (int, float)) and not isinstance(n, bool) and 0 <= n < float("inf"))
                  for n in numbers)
          and isinstance(row.notes, list) and all(isinstance(n, str) for n in row.notes)
          and isinstance(row.default, bool) and isinstance(row.cached, bool)
          and (row.status != RANKED or (row.estimated_seconds or 0) > 0))
    return row if ok else None


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChipRanking:
    """The rows of one shape on one chip: ranked by estimated time (by device time first, where
    tune --measure ran them on the chip), then the others by status."""

    chip: str
    rows: list[TuneRow]
    best: TuneRow | None
    default: TuneRow | None  # the default candidate's row (None when it was not swept)

    @property
    def set_line(self) -> str | None:
        return self.best.set_line() if self.best is not None else None

    @property
    def default_ratio(self) -> float | None:
        """How much slower the default is than the best (1.0: the default is the best)."""
        return self.default.ratio if self.default is not None else None

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShapeResult:
    shape: str
    chips: list[ChipRanking]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneResult:
    """A sweep of one target over candidates x chips x input shapes."""

    target: str
    swept: list[str]  # the parameter names swept
    fixed: dict  # parameters fixed by --set
    defaults: dict  # the default value of each swept parameter
    shapes: list[ShapeResult]
    counts: dict[str, int]  # total, done (this run), cached, and one per status
    interrupted: bool = False
    wall_seconds: float = 0.0
    workers: int = 1
    runner: str = "local"  # local | in-process | ray ADDRESS
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    table: str | None = None  # the tuning table written (--table), if any
    table_note: str | None = None  # why it was not written, if asked for
    notes: list[str] = dataclasses.field(default_factory=list)  # what the sweep changed of what was asked (fewer workers)
    table_failed: bool = False  # it was to be written and could not be (exit 2 once the tables are shown)
    measured_on: str | None = None  # the chip tune --measure ran the top candidates on

    @property
    def rows(self) -> list[TuneRow]:
        return [row for s in self.shapes for c in s.chips for row in c.rows]

    @property
    def ok(self) -> bool:
        """Every shape has a ranked candidate on every chip, and nothing was left undone."""
        return not self.interrupted and all(c.best is not None for s in self.shapes for c in s.chips)

    def ranking(self, chip: str, shape: str | None = None) -> ChipRanking | None:
        for s in self.shapes:
            if shape is None or s.shape == shape:
                for c in s.chips:
                    if c.chip == chip:
                        return c
        return None

    def best(self, chip: str, shape: str | None = None) -> TuneRow | None:
        """The fastest candidate on ``chip`` (for ``shape``; the first shape when not given)."""
        ranking = self.ranking(chip, shape)
        return ranking.best if ranking is not None else None

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        for s, shape in zip(data["shapes"], self.shapes):
            for c, chip in zip(s["chips"], shape.chips):
                c["set_line"], c["default_ratio"] = chip.set_line, chip.default_ratio
        data["ok"] = self.ok
        return data

    def __repr__(self) -> str:
        bests = ", ".join(f"{c.chip}: {c.set_line or 'none'}" for s in self.shapes[:1] for c in s.chips)
        return (f"<TuneResult {self.target}: {self.counts.get('total', 0)} candidates x chips x shapes"
                f"{' (interrupted)' if self.interrupted else ''}; best {bests}>")

    def _repr_html_(self) -> str:  # Jupyter: a table per shape and chip with a bar per row (rich loads only here)

        return html(self)
