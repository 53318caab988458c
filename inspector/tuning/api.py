"""``inspector.tune(fn_or_spec, *inputs, targets=..., grid=...) -> TuneResult``: the sweep of
``inspector tune`` from Python. ``import inspector`` loads this module: the sweep, libtpu's runner
and the evaluation are imported when a sweep runs.

A ``"file.py:function"`` spec takes the command line's path: worker processes (``workers``, default
the cores) or a Ray cluster (``ray``), the journal (a second call is instant), ``table``. A function
object is swept in this process, one candidate after another (workers could not import it), with
the row cache only. Either way each candidate is traced, pruned when its VMEM estimate is over the
limit, else compiled for each chip (deviceless) and timed by libtpu.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..api import guarded_call, make_target
from ..base.chips import DEFAULT_TPU, get_chip
from ..base.display import tune_progress
from ..base.errors import UsageError
from ..base.specs import hlo_type
from .model import NOT_RUN, STATUSES, TuneResult, TuneRow
from .rank import rank_all
from .table import check_table

if TYPE_CHECKING:
    from .sweep import SweepRequest


def tune(fn_or_spec: Callable | str, *args: Any, targets: str | Sequence[str] = (DEFAULT_TPU,), grid: dict | None = None,
         params: dict | None = None, shapes: Sequence[str] | None = None, workers: int | None = None,
         ray: str | None = None, table: str | None = None, cache: bool = True, time_budget: float | None = None,
         time_memory: float | None = None, measure: bool = False, top: int | None = None, progress: bool = False,
         **kwargs: Any) -> TuneResult:
    """Rank every candidate (INSPECT's ``params`` lists, ``grid`` {name: [values]} over them,
    ``params`` fixed) on each chip of ``targets`` by libtpu's estimated time (a GPU's: its time
    floor, ``estimate_kind`` "floor"). Inputs: arrays,
    ShapeDtypeStructs or shape specs (``"bf16[4096,4096]"``) after the function, or ``shapes`` (a list
    of shape-spec strings, one ranking each). ``.best(chip)`` is the fastest row (``.params``,
    ``.set_line()``); ``.shapes[i].chips[j].rows`` every row, ranked; ``.to_dict()`` as ``--json``.
    As ``inspector tune``'s options: ``time_budget`` the seconds and ``time_memory`` the GiB libtpu's
    simulation may spend per candidate; ``measure`` also runs the ``top`` candidates by estimate
    (default 8, 0 for all) on the attached TPU or GPU, the first of ``targets``, and ranks them by device
    time (a spec only)."""
    if grid is not None and not isinstance(grid, dict):
        raise UsageError(f"grid must be a dict of parameter name to a list of values, not a {type(grid).__name__}")
    if params is not None and not isinstance(params, dict):
        raise UsageError(f"params must be a dict of fixed parameter values, not a {type(params).__name__}")
    grid = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in (grid or {}).items()}
    empty = [k for k, v in grid.items() if not v]
    if empty:
        raise UsageError(f"grid[{empty[0]!r}] is an empty list: give the values to try, e.g. grid={{{empty[0]!r}: [128, 256]}}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"workers={workers!r}: give a whole number of 1 or more (or None: the cores)")
    with guarded_call():
        names = [targets] if isinstance(targets, str) else list(targets)
        budget = _budget(time_budget, time_memory)
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise UsageError(f"top={top!r}: give a whole number of 0 or more (0: all)")
        if isinstance(fn_or_spec, str):
            from .sweep import run_sweep

            req = _spec_request(fn_or_spec, args, kwargs, names, grid, params or {}, shapes, workers, ray, table, cache,
                                budget, measure, top)
            return run_sweep(req, tune_progress(fn_or_spec)) if progress else run_sweep(req)
        if ray or table or measure or workers not in (None, 1):
            raise UsageError("workers, ray, table and measure need a 'file.py:function' spec (a function object cannot be "
                             "imported by a worker): give the spec, or leave them out")
        return _in_process(fn_or_spec, args, kwargs, names, grid, params or {}, shapes, cache, budget)


def _budget(seconds: float | None, memory_gib: float | None):
    """libtpu's budget per candidate: ``time_budget`` seconds and ``time_memory`` GiB over the defaults."""
    from ..libtpu import Budget

    for name, value in (("time_budget", seconds), ("time_memory", memory_gib)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise UsageError(f"{name}={value!r}: give a number > 0")
    default = Budget()
    return Budget(seconds=float(seconds) if seconds else default.seconds,
                  memory_bytes=int(memory_gib * 2**30) if memory_gib else default.memory_bytes)


def _shape_texts(args: tuple, kwargs: dict, shapes) -> list[str]:
    if shapes is not None:
        if isinstance(shapes, str) or not all(isinstance(s, str) for s in shapes):
            raise UsageError("shapes must be a list of shape-spec strings, e.g. ['bf16[512,512] bf16[512,512]']")
        return list(shapes)
    if kwargs:
        raise UsageError("keyword inputs: give a function object, or shapes=[...] as spec strings")
    if not args:
        return []
    parts = [a if isinstance(a, str) else hlo_type(str(a.dtype), tuple(a.shape)) for a in args]
    return [" ".join(parts)]


def _spec_request(spec, args, kwargs, chips, grid, fixed, shapes, workers, ray, table, cache, budget, measure, top):
    """The SweepRequest of a spec: the one `inspector tune` builds for the same options."""
    import inspector.compilation.compile_cache as compile_cache

    from .measured import measure_count
    from .sweep import SweepRequest

    if measure:
        from ..verbs.rules import check_tune_measure

        check_tune_measure(True, get_chip(chips[0]).name if chips else "", "targets")
    if table:
        check_table(table, spec)  # as the command line does: before the sweep
    return SweepRequest(spec=spec, chips=chips, args=_shape_texts(args, kwargs, shapes), grid=grid, fixed=fixed, workers=workers,
                        ray=ray, cache=bool(cache) and compile_cache.enabled(), budget=budget, table=table,
                        measure=measure_count(top) if measure else 0)


def sweep_request(spec: str, *args: Any, targets: str | Sequence[str] = (DEFAULT_TPU,), grid: dict | None = None,
                  params: dict | None = None, shapes: Sequence[str] | None = None, workers: int | None = None,
                  ray: str | None = None, table: str | None = None, cache: bool = True, time_budget: float | None = None,
                  time_memory: float | None = None, measure: bool = False, top: int | None = None) -> SweepRequest:
    """The SweepRequest ``tune`` runs for a spec (tests compare it with the command line's)."""
    names = [targets] if isinstance(targets, str) else list(targets)
    grid = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in (grid or {}).items()}
    return _spec_request(spec, args, {}, names, grid, params or {}, shapes, workers, ray, table, cache,
                         _budget(time_budget, time_memory), measure, top)


def _in_process(fn, args, kwargs, chips, grid, fixed, shapes, cache, budget) -> TuneResult:
    import dataclasses
    import inspect as pyinspect
    import time

    import inspector.compilation.compile_cache as compile_cache
    import inspector.tuning.store as store

    from ..libtpu.runner import kept_sessions
    from .candidates import TunePlan, candidates, default_params, swept_values
    from .evaluate import evaluate_target
    from .sweep import check_chips

    started = time.perf_counter()
    chip_names = [c.name for c in check_chips(chips)]
    try:
        sig = pyinspect.signature(fn)
        takes = None if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()) else list(sig.parameters)
        defaults = {p.name: p.default for p in sig.parameters.values() if p.default is not p.empty}
    except (TypeError, ValueError):
        takes, defaults = None, {}
    inputs = [(text, (text,), {}) for text in shapes] if shapes is not None else [(None, args, kwargs)]
    plan = TunePlan(spec=getattr(fn, "__name__", "function"), choices={}, defaults=defaults, takes=takes, shapes=[])
    values = swept_values(plan, grid, fixed)
    default = default_params(plan, values, fixed)
    combos = candidates(values, default)
    budget = dataclasses.asdict(budget)  # as plain data, as the workers get it
    use = bool(cache) and compile_cache.enabled()
    rows, labels = [], []
    interrupted = False
    with kept_sessions():
        try:
            for text, pos, kw in inputs:
                label = None
                for chip_name in chip_names:
                    chip = get_chip(chip_name)
                    for params, is_default in combos:
                        target = make_target(fn, pos, kw, params={**fixed, **params})
                        if label is None:
                            label = text or _label(target)
                            labels.append(label)
                        base = dict(shape=label, chip=chip.name, params=params, default=is_default)
                        rows.append(evaluate_target(target, chip, base, budget=budget, cache=use))
        except KeyboardInterrupt:
            interrupted = True
    done = {(r.shape, r.chip, tuple(sorted(r.params.items(), key=lambda kv: kv[0]))) for r in rows}
    for label in labels:  # what an interrupt left undone
        for chip_name in chip_names:
            for params, is_default in combos:
                if (label, chip_name, tuple(sorted(params.items(), key=lambda kv: kv[0]))) not in done:
                    rows.append(TuneRow(shape=label, chip=chip_name, params=params, status=NOT_RUN, default=is_default,
                                        reason="the sweep was interrupted before it"))
    counts = {"total": len(rows), "cached": sum(r.cached for r in rows),
              "done": sum(r.status != NOT_RUN and not r.cached for r in rows)}
    counts.update({s: sum(r.status == s for r in rows) for s in STATUSES})
    return TuneResult(target=plan.spec, swept=list(values), fixed=dict(fixed), defaults=default, shapes=rank_all(labels, chip_names, rows), counts=counts,
                      interrupted=interrupted, wall_seconds=round(time.perf_counter() - started, 3), workers=1, runner="in-process", versions=store.versions())


def _label(target) -> str:
    import jax

    leaves = jax.tree.leaves((tuple(target.args), dict(target.kwargs)))
    return " ".join(hlo_type(str(x.dtype), tuple(x.shape)) for x in leaves)
