"""A sweep from start to end, in the process that renders (it never imports jax): the plan (from
a worker, or the journal), the candidates, the rows the journal already holds, the rest on the
pool (local workers or Ray), each row journaled as it arrives, then the ranking and the tuning
table. Ctrl-C kills the workers at once and returns what is done, marked interrupted; running
again resumes from the journal."""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Protocol

import inspector.tuning.fingerprint as fingerprint
import inspector.tuning.store as store
import inspector.tuning.table as table  # the module: a test replaces its update_table
from ..base.chips import UNSIMULATED_WHY, parse_targets
from ..base.errors import TargetFailure, UsageError
from ..compilation.compile_cache import REFRESH  # noqa: F401  (the one definition: views/tui/tune_options.py reads it here)
from ..request import Cache, Request
from ..libtpu import Budget
from ..base import cores
from ..base.tempdirs import sweep
from .candidates import TunePlan, candidates, default_params, swept_values
from .measured import measure_rankings
from .model import FAILED, NOT_RUN, RANKED, STATUSES, TIMED_BY, TuneResult, TuneRow, sound_row
from .pool import Cancelled, LocalPool, WorkerDied
from .rank import rank_all
from .ray_backend import RayPool
from ..families import family_of


@dataclasses.dataclass(frozen=True, init=False)
class SweepRequest:
    """A sweep: the template Request every candidate is made by (the spec, the chips, libtpu's
    budget per candidate, the compile cache, --debug), and what the sweep alone has."""

    template: Request  # its chip: the chips, comma-separated
    args: list[str] = dataclasses.field(default_factory=list)  # --args, one shape each (empty: INSPECT's)
    grid: dict[str, list] = dataclasses.field(default_factory=dict)
    fixed: dict = dataclasses.field(default_factory=dict)  # --set
    workers: int | None = None  # default: the cores
    ray: str | None = None  # a Ray cluster's address
    table: str | None = None  # tuning table to write or update
    measure: int = 0  # candidates per shape to run on the attached TPU or GPU and rank by device time (tune --measure)

    def __init__(self, *, template: Request | None = None, spec: str = "", chips: list[str] | tuple[str, ...] = (),
                 cache: bool | str | Cache = True, budget: Budget | None = None, debug: bool = False,
                 args: list[str] | None = None, grid: dict | None = None, fixed: dict | None = None,
                 workers: int | None = None, ray: str | None = None, table: str | None = None, measure: int = 0) -> None:
        """``SweepRequest(template=..., ...)``, or the template's fields by name: ``spec``,
        ``chips``, ``cache``, ``budget`` (libtpu's Budget) and ``debug``."""
        if template is None:
            budget = budget or Budget()
            template = Request(spec, ",".join(chips), cache=Cache(cache), debug=debug, time_budget=budget.seconds,
                               time_memory=budget.memory_bytes, memo=False)
        for name, value in (("template", template), ("args", list(args or [])), ("grid", dict(grid or {})),
                            ("fixed", dict(fixed or {})), ("workers", workers), ("ray", ray), ("table", table),
                            ("measure", measure)):
            object.__setattr__(self, name, value)

    @property
    def spec(self) -> str:
        return str(self.template.spec)

    @property
    def chips(self) -> list[str]:
        return [c for c in self.template.chip.split(",") if c]

    @property
    def cache(self) -> bool | str:
        """What a candidate's compile takes: True, False, or REFRESH (--no-cache: compute, then store)."""
        return self.template.cache.value

    @property
    def budget(self) -> Budget:
        """libtpu's, per candidate (--time-budget)."""
        return self.template.budget()

    @property
    def debug(self) -> bool:
        return self.template.debug


class Progress(Protocol):
    def start(self, total: int, done: int, workers: int, runner: str) -> None: ...
    def advance(self, row: TuneRow) -> None: ...
    def stop(self) -> None: ...


class _Quiet:
    def start(self, total, done, workers, runner): pass
    def advance(self, row): pass
    def stop(self): pass


def check_chips(names: list[str]) -> list:
    """Chips whose family times a compiled candidate: TPUs by libtpu's simulation, GPUs by the time
    floor of what XLA:GPU compiled (families/gpu/time.py). Other targets have nothing to rank by."""
    chips = parse_targets(",".join(names))
    other = [c.name for c in chips if family_of(c).info.can.time not in TIMED_BY]
    if other:
        raise UsageError(f"tune ranks compiled candidates by their time: give TPU targets (e.g. --target tpu-v5e,tpu-v6e) "
                         f"or GPU targets (--target h100,a100), not {', '.join(other)}")
    untimed = [c.name for c in chips if family_of(c).info.can.time == "simulated" and not c.libtpu_times]
    if untimed:  # every candidate would compile, then come back without a time
        raise UsageError(f"tune ranks by libtpu's simulated time, and libtpu does not simulate {', '.join(untimed)} "
                         f"({UNSIMULATED_WHY}): give tpu-v5e, tpu-v5p, tpu-v6e or tpu-7x "
                         f"(`inspector check --target {untimed[0]}` still checks the VMEM fit)")
    sliced = [c.name for c in chips if c.devices > 1]
    if sliced:
        raise UsageError(f"tune ranks one chip's kernels: give the chip (tpu-v5e), not a slice ({', '.join(sliced)})")
    return chips


def run_sweep(req: SweepRequest, progress: Progress | None = None, cancel=None) -> TuneResult:
    """``cancel`` (a threading.Event), set from another thread, stops the sweep as Ctrl-C does: the
    workers are killed and what is done comes back, marked interrupted (set before the candidates
    are known, it raises pool.Cancelled instead: there is nothing to show yet)."""
    progress = progress or _Quiet()
    started = time.perf_counter()
    chips = [c.name for c in check_chips(req.chips)]
    budget = dataclasses.asdict(req.budget)  # as plain data: the journal's keys, the workers' tasks
    # a missing extra answers before any work
    ray_pool = RayPool(req.ray, req.spec, debug=req.debug) if req.ray else None
    workers, workers_note = fit_workers(req.workers or cores.available())
    with LocalPool(workers, debug=req.debug, cancel=cancel) as local, (ray_pool or contextlib.nullcontext()):
        # Ray is reached first: an address that does not answer is one line before any work
        plan = _plan(req, local, budget)
        values = swept_values(plan, req.grid, req.fixed)
        default = default_params(plan, values, req.fixed)
        jobs = _Jobs(req, progress)
        jobs.add(plan, chips, budget, candidates(values, default))
        runner = ray_pool or local
        interrupted = _run(jobs, runner, local, ray_pool is not None, progress)
    ordered = [jobs.rows[i] for i in sorted(jobs.rows)]
    cached = len(jobs.keys) - len(jobs.pending)
    counts = {"total": len(ordered), "cached": cached, "done": sum(1 for r in ordered if r.status != NOT_RUN) - cached}
    counts.update({status: sum(r.status == status for r in ordered) for status in STATUSES})
    result = TuneResult(target=req.spec, swept=list(values), fixed=dict(req.fixed), defaults=default, shapes=rank_all([s for s, _ in plan.shapes], chips, ordered),
                        counts=counts, interrupted=interrupted, wall_seconds=round(time.perf_counter() - started, 3),
                        workers=min(runner.size, max(len(jobs.pending), 1)), runner=runner.runner, versions=store.versions())
    if workers_note and ray_pool is None and len(jobs.pending) > workers:  # else memory held all that started
        result = dataclasses.replace(result, notes=[*result.notes, workers_note])
    if req.measure and not interrupted:
        result = measure_rankings(result, req.spec, dict(plan.shapes), dict(req.fixed), req.measure, chips[0])
    return _write_table(req, result) if req.table else result


class _Jobs:
    """The sweep's rows by job id: those the journal holds, the rest pending for the pool (each a
    not-run row until its answer comes), and each answer journaled as it arrives."""

    def __init__(self, req: SweepRequest, progress: Progress):
        self.req, self.progress = req, progress
        self.rows: dict[int, TuneRow] = {}
        self.pending: list = []
        self.keys: dict = {}

    def add(self, plan: TunePlan, chips: list[str], budget: dict, combos) -> None:
        """A job per shape, chip and candidate; from the journal where it has the row."""
        req = self.req
        closure = fingerprint.digest(plan.closure)
        for label, args in plan.shapes:
            for chip in chips:
                parts = store.request_parts(req.spec, chip, budget)
                for params, is_default in combos:
                    job_id = len(self.keys)
                    full = {**req.fixed, **params}
                    self.keys[job_id] = store.journal_key(parts, args, full, closure)
                    base = dict(shape=label, chip=chip, params=params, default=is_default)
                    hit = store.load(self.keys[job_id], store.JOURNAL) if req.cache is True else None
                    row = _row(hit, base) if hit is not None else None
                    if row is not None:
                        self.rows[job_id] = dataclasses.replace(row, cached=True, wall_seconds=None)
                        continue
                    self.pending.append((job_id, "row", {"spec": req.spec, "args": args, "params": full, "swept": params,
                                                         "shape": label, "chip": chip, "default": is_default,
                                                         "budget": budget, "cache": req.cache}))
                    self.rows[job_id] = TuneRow(**base, status=NOT_RUN, reason="the sweep was interrupted before it")

    def _base(self, job_id: int) -> dict:
        return {k: getattr(self.rows[job_id], k) for k in ("shape", "chip", "params", "default")}

    def answered(self, job_id, status, value) -> None:
        row = _answered(value) if status == "ok" and isinstance(value, dict) else None
        if row is None:
            why = value if status == "ok" else f"{type(value).__name__}: {value}"
            row = TuneRow(**self._base(job_id), status=FAILED, reason=f"internal error: {why}"[:300], code="internal")
        self.rows[job_id] = row
        if self.req.cache and row.status != FAILED:  # a failure is cheap to see again, and may be fixed
            stored = dataclasses.asdict(row)
            stored.pop("cached", None)
            store.store(self.keys[job_id], store.JOURNAL, stored)
        self.progress.advance(row)

    def died(self, job_id, message) -> None:
        self.rows[job_id] = TuneRow(**self._base(job_id), status=FAILED, reason=message, code="worker-died")
        self.progress.advance(self.rows[job_id])


def _run(jobs: _Jobs, runner, local, on_ray: bool, progress: Progress) -> bool:
    """The pending jobs on ``runner``; whether Ctrl-C (or ``cancel``) interrupted them."""
    try:
        if on_ray:
            local.stop()  # the plan's worker: Ray does the rest
        progress.start(len(jobs.keys), len(jobs.keys) - len(jobs.pending), min(runner.size, max(len(jobs.pending), 1)),
                       runner.runner)
        runner.run(jobs.pending, jobs.answered, jobs.died)
    except (KeyboardInterrupt, Cancelled):
        local.kill()
        sweep()  # the killed workers' folders (libtpu's logs and dumps) go now, not with the next run
        return True
    finally:
        progress.stop()
    return False


# A worker with its libtpu dump child: 1.66 GB resident for 2 workers at their peak on the small
# kernels of tests/data/tune_kernels.py (measured); bigger kernels take more, so 1 GiB is a floor.
WORKER_BYTES = 1 << 30


def fit_workers(asked: int) -> tuple[int, str | None]:
    """As many workers as asked, or as the free memory holds (each imports jax and starts libtpu:
    `--workers 64` on a laptop would swap, or be killed by the kernel, mid-sweep); a note when fewer."""
    free = _available_bytes()
    if free is None:
        return asked, None
    room = max(1, free // WORKER_BYTES)
    if asked <= room:
        return asked, None
    return room, (f"--workers {asked}: {room} started, as many as {free / (1 << 30):.1f} GiB of free memory holds at "
                  "1 GiB or more each")


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None  # not Linux: as asked


def _answered(data: dict) -> TuneRow | None:
    """A worker's fresh row (its own structure; the stored ones are checked by ``_row``)."""
    try:
        return TuneRow(**data)
    except TypeError:
        return None


def _row(data, base: dict) -> TuneRow | None:
    """A stored or answered row, checked field by field: another structure or a wrong type is a miss."""
    return sound_row({**data, **base}) if isinstance(data, dict) else None


def _plan(req: SweepRequest, local, budget: dict) -> TunePlan:
    """From the journal when no file the target imported changed, else from a worker."""
    parts = store.request_parts(req.spec, None, budget)
    key = store.plan_key(parts, req.args, list(req.grid))
    if req.cache is True and (hit := store.load(key, store.PLAN)) is not None:
        plan = _stored_plan(hit)
        if plan is not None and fingerprint.unchanged(plan.closure):
            return plan
    try:
        plan = local.call("plan", (req.spec, list(req.args), list(req.grid)))
    except WorkerDied as err:  # os._exit or a crash while importing the target
        raise TargetFailure(f"{req.spec}: loading it, {err}") from err
    if req.cache and _exact_json(plan.choices):  # values JSON would change (tuples, objects) are not stored
        stored = dataclasses.asdict(plan)
        stored["defaults"] = {k: v for k, v in plan.defaults.items() if _exact_json(v)}
        store.store(key, store.PLAN, stored)
    return plan


def _holds_any(path: str, result: TuneResult) -> bool:
    """Whether the table has an entry for a shape and chip swept here (nothing ranked now: it is
    stale and goes, so the table is written though nothing is added)."""
    try:
        entries = table.read_table(path, result.target)["entries"]
    except UsageError:
        return True  # let the write say what is wrong with it
    return any(c.chip in entries.get(s.shape, {}) for s in result.shapes for c in s.chips)


def _stored_plan(hit) -> TunePlan | None:
    """The journal's plan when every field has its type (JSON gave lists for the pairs), else None:
    a miss, and the target is loaded again."""
    def pairs(items, second_may_be_none: bool) -> bool:
        return isinstance(items, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
            and (isinstance(p[1], str) or (second_may_be_none and p[1] is None)) for p in items)

    if not isinstance(hit, dict):
        return None
    try:
        plan = TunePlan(**hit)
    except TypeError:
        return None
    if not (isinstance(plan.spec, str) and isinstance(plan.defaults, dict) and isinstance(plan.choices, dict)
            and all(isinstance(k, str) and isinstance(v, list) for k, v in plan.choices.items())
            and (plan.takes is None or (isinstance(plan.takes, list) and all(isinstance(t, str) for t in plan.takes)))
            and pairs(plan.shapes, True) and plan.shapes and pairs(plan.closure, False)):
        return None
    return dataclasses.replace(plan, shapes=[(s[0], s[1]) for s in plan.shapes], closure=[(f[0], f[1]) for f in plan.closure])


def _exact_json(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_exact_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _exact_json(v) for k, v in value.items())
    return False  # tuples (they come back as lists), objects


def _write_table(req: SweepRequest, result: TuneResult) -> TuneResult:
    """The result with the tuning table written (``table``), or why not (``table_note``)."""
    assert req.table is not None  # called only when --table names a file
    if result.interrupted:
        return dataclasses.replace(result, table_note=f"{req.table} not written: the sweep was interrupted (run again to finish it)")
    if not any(c.best is not None for s in result.shapes for c in s.chips) and not _holds_any(req.table, result):
        return dataclasses.replace(result, table_note=f"{req.table} not written: no candidate was ranked")
    try:
        return dataclasses.replace(result, table=table.update_table(req.table, result))
    except UsageError as err:  # it changed during the sweep (a folder gone, another file): the rows still show
        return dataclasses.replace(result, table_note=f"{req.table} not written: {err}", table_failed=True)


__all__ = ["SweepRequest", "run_sweep", "check_chips", "RANKED"]
