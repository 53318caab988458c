"""The Python API: ``inspector.inspect``, ``inspector.check``, ``inspector.diff`` and ``inspector.compare``.

``import inspector`` (and ``inspector --help``) loads this module: the target loader and the
analyses (numpy, jax) are imported by the function that needs them.

Each takes a function object with its example inputs (arrays, ``jax.ShapeDtypeStruct``s, any
pytree of them, or shape-spec strings such as ``"f32[8,128]"``), or a ``"file.py:function"``
spec whose INSPECT entry gives the defaults (inputs given here win). They build the same Target
the command line builds and take the same path (``report.make_report``, ``checking.run_check``,
``diff.run_diff``, ``compare.compare_reports``), so a figure here is the figure ``inspector show --json``
prints. A TPU target with a topology (``tpu-v5e:2x2``) takes ``mesh=`` and ``shardings=`` as
``--mesh``/``--shard`` (or INSPECT's ``"mesh"``/``"shardings"``) do.

Every call traces afresh (nothing is kept between calls in this process; the on-disk compile
cache, keyed by the lowered module, spares repeated compiles), prints nothing, and raises an
``InspectorError`` (``UsageError`` for bad input, ``TargetFailure`` when the function itself
raised while tracing). Nothing here imports jax at module level.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .compilation.backends import local_chip
from .compilation.default_target import default_target
from .base.chips import DEFAULT_TPU, INTERPRET_EXAMPLE, Chip, get_chip, parse_targets
from .base.environment import quiet
from .base.errors import TargetFailure, UsageError
from .compilation.sharding import check_mesh, parse_mesh, parse_specs
from .base.user_code import describe_error
from .request import Cache, Request, report_for
from .verbs.rules import check_chips, diff_simulated_chip, require_two_variants
from .results.view_table import Needs
from .families import family_of

if TYPE_CHECKING:
    from .base.chips import Chip
    from .baseline.compare import Comparison
    from .baseline.gate import Gate
    from .verbs.comparison import Compare
    from .verbs.checking import CheckResult
    from .results.report import Report
    from .run.result import DiffResult
    from .compilation.target import Target

@contextlib.contextmanager
def guarded_call():
    """Around one API call: quiet, and sys.exit() in the user's code (at import, while tracing or
    running) a TargetFailure with its code, never the end of the user's script or kernel."""
    with quiet():
        try:
            yield
        except SystemExit as err:
            raise TargetFailure(describe_error(err, None, "raised by the analysed code")) from err


def _inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Positional and keyword inputs; strings are shape specs (a string may hold several, and
    ``name=f32[8]`` in one gives a keyword input)."""
    from .compilation.target_inputs import inputs_from_specs

    pos: list = []
    kw: dict = {}
    for a in args:
        if isinstance(a, str):
            p, k = inputs_from_specs(a)
            pos.extend(p)
            kw.update(k)
        else:
            pos.append(a)
    for name, value in kwargs.items():
        if isinstance(value, str):
            p, k = inputs_from_specs(value)
            if len(p) != 1 or k:
                raise UsageError(f"keyword input {name}={value!r}: give one shape spec such as \"f32[8,128]\"")
            value = p[0]
        kw[name] = value
    for i, value in list(enumerate(pos)) + list(kw.items()):
        if getattr(getattr(value, "dtype", None), "kind", "") == "O":  # jax would blame the function
            raise UsageError(f"input {i}: a numpy array of Python objects is not an array jax can take; "
                             "give numbers (e.g. np.asarray(x, np.float32)) or a shape spec such as \"f32[8]\"")
    return tuple(pos), kw


def _reference(reference, module_spec: str | None) -> Callable | None:
    """A callable, a ``file.py:function`` spec, or (for a spec target) a name in the same file."""
    if reference is None or callable(reference):
        return reference
    if not isinstance(reference, str):
        raise UsageError(f"reference must be a function or a 'file.py:function' spec, not a {type(reference).__name__}")
    from .compilation.user_files import load_module, resolve_callable, split_spec

    if ":" in reference:
        where, func = split_spec(reference)
    elif module_spec is not None:
        where, func = split_spec(module_spec)[0], reference
    else:
        raise UsageError(f"reference {reference!r}: give a function or 'file.py:function'")
    return resolve_callable(load_module(where), func, reference)


def _with_sharding(t: Target, mesh, shardings) -> Target:
    """``mesh=`` ({"data": 2, "model": 2} or "data=2,model=2") and ``shardings=`` (a callable taking
    the mesh, "P('data',None) P()", or one PartitionSpec pytree per positional input) over the
    target's own (INSPECT's); checked as the command line's are."""
    if mesh is not None:
        t = dataclasses.replace(t, mesh=parse_mesh(mesh) if isinstance(mesh, str) else check_mesh(mesh, f"mesh={mesh!r}"))
    if shardings is not None:
        if isinstance(shardings, str):
            parse_specs(shardings)
        elif not callable(shardings) and not isinstance(shardings, (list, tuple)):
            raise UsageError(f"shardings must be a callable taking the mesh, a string such as \"P('data',None) P()\" "
                             f"or one PartitionSpec per positional input, not a {type(shardings).__name__}")
        t = dataclasses.replace(t, shardings=shardings)
    if t.shardings is not None and t.mesh is None:
        raise UsageError(f"{t.spec}: shardings without a mesh: give mesh={{'data': 4, 'model': 4}} as well")
    return t


def make_target(fn_or_spec: Callable | str, args: tuple = (), kwargs: dict | None = None, *,
                params: dict | None = None, reference: Callable | str | None = None, mesh=None,
                shardings=None) -> Target:
    """The Target the stages trace: from a ``"file.py:function"`` spec (its INSPECT entry gives the
    defaults; inputs, params, reference, mesh and shardings given here win) or from a function object."""
    from .compilation.target import callable_target, load_target

    if params is not None and not isinstance(params, dict):
        raise UsageError(f"params must be a dict of static keyword values, not a {type(params).__name__}")
    kwargs = kwargs or {}
    if isinstance(fn_or_spec, str):
        only_text = args and all(isinstance(a, str) for a in args) and not kwargs
        inputs = None if only_text or not (args or kwargs) else _inputs(args, kwargs)
        return _with_sharding(load_target(fn_or_spec, args=" ".join(args) if only_text else None, sets=[], inputs=inputs,
                                          params=params, reference=_reference(reference, fn_or_spec)), mesh, shardings)
    pos, kw = _inputs(args, kwargs)
    return _with_sharding(callable_target(fn_or_spec, pos, kw, params=params, reference=_reference(reference, None)),
                          mesh, shardings)


def resolve_chip(name: str | Chip) -> Chip:
    """A chip by name (``inspector chips``), or ``"local"``: what jax's default backend is."""
    if isinstance(name, Chip):
        return name
    if not isinstance(name, str):
        raise UsageError(f"target must be a chip name such as 'cpu' or 'tpu-v5e', not a {type(name).__name__}")
    if name.strip().lower() == "local":
        return local_chip()
    return get_chip(name)


# inspect's options beside the target, as `inspector show` spells them (tests/test_request.py: one each)
SHOW_OPTIONS = {"target": "--target", "args": "--args", "reference": "--ref", "params": "--set", "mesh": "--mesh",
                "shardings": "--shard", "cache": "--no-cache", "roofline": "--roofline", "time": "--time",
                "time_budget": "--time-budget", "time_memory": "--time-memory", "measure": "--measure",
                "passes": "--passes", "pass_select": "--pass", "buffers": "--view memory"}


def inspect_request(fn_or_spec: Callable | str, *args: Any, target: str | None = None, params: dict | None = None,
                    reference: Callable | str | None = None, roofline: str | None = None, cache: bool = True,
                    mesh: dict | str | None = None, shardings: Any = None, buffers: bool = False, time: bool = False,
                    time_budget: float | None = None, time_memory: float | None = None, measure: bool = False,
                    passes: bool = False, pass_select: str | None = None, fixes: bool = False, **kwargs: Any) -> Request:
    """The Request ``inspect`` makes (the one the command line builds for ``show --json``), checked
    as the command line checks its options; the target is traced when the request is run."""
    from .verbs.rules import check_measure

    if (time_budget is not None or time_memory is not None) and not time:
        raise UsageError("time_budget and time_memory are the budget of libtpu's time estimate: add time=True")
    if time_budget is not None and (isinstance(time_budget, bool) or not isinstance(time_budget, (int, float))):
        raise UsageError(f"time_budget={time_budget!r}: give the seconds libtpu's simulation may take, a number")
    if time_memory is not None and (isinstance(time_memory, bool) or not isinstance(time_memory, (int, float))
                                    or not 0 < time_memory < float("inf") or time_memory * 2**30 < 1):
        raise UsageError(f"time_memory={time_memory!r}: give the GiB libtpu's compiles may use, a number > 0")
    if pass_select is not None:
        from .hlo.pass_select import check_selector

        check_selector(pass_select)
    if isinstance(fn_or_spec, str) and not args and not kwargs and params is None and reference is None \
            and mesh is None and shardings is None:
        spec: str | Target = fn_or_spec  # as the command line gives it: loaded where the request runs
    else:
        spec = make_target(fn_or_spec, args, kwargs, params=params, reference=reference, mesh=mesh, shardings=shardings)
    from .results.view_table import everyday_needs

    # what every view needs (the table of views says), and what the keywords add
    needs = everyday_needs() | Needs(buffers=bool(buffers), passes=bool(passes or pass_select), time=bool(time))
    chip, chosen = (target, None) if target else default_target("show")  # why, as `show --json` says it
    check_measure(bool(measure), chip=chip)
    return Request(spec, resolve_chip(chip).name, chip_reason=chosen, needs=needs, roofline=get_chip(roofline).name if roofline else None,
                   pass_select=pass_select, time_budget=time_budget,
                   time_memory=None if time_memory is None else int(time_memory * 2**30), measure=bool(measure),
                   fixes=bool(fixes), cache=Cache.asked(cache), memo=False)


def inspect(fn_or_spec: Callable | str, *args: Any, target: str | None = None, params: dict | None = None,
            reference: Callable | str | None = None, roofline: str | None = None, cache: bool = True,
            mesh: dict | str | None = None, shardings: Any = None, buffers: bool = False, time: bool = False,
            time_budget: float | None = None, time_memory: float | None = None, measure: bool = False,
            passes: bool = False, pass_select: str | None = None, fixes: bool = False, **kwargs: Any) -> Report:
    """Trace, lower and compile ``fn_or_spec`` for ``target`` and analyse it: what ``inspector
    show --json`` reports (``.stages`` with the jaxpr, StableHLO and HLO texts and XLA's cost and
    memory; ``.fusions`` the kernels with HBM traffic and roofline, ``.fusions.totals["hbm_bytes"]``;
    ``.pallas`` every pallas_call's BlockSpecs, grid walk and VMEM budgets; ``.findings``).

    ``args``/``kwargs``: example inputs (arrays, ShapeDtypeStructs, pytrees, shape-spec strings);
    ``params``: static keyword values baked into the trace; ``target``: ``cpu``, ``gpu``,
    ``local`` (jax's default backend) or a TPU such as ``tpu-v5e`` (libtpu, no TPU needed); by
    default the TPU attached to this machine (compiled without opening it), else $INSPECTOR_TARGET
    or ``[tool.inspector] target`` in pyproject.toml, else tpu-v5e (``.chip_reason`` says which);
    ``roofline``: the chip whose figures the roofline uses (default: the target); ``cache``: use
    the on-disk compile cache. A compile failure is a finding, not an exception.

    A target with a topology (``tpu-v5e:16x16``) compiles for every device of the slice:
    ``mesh`` ({"data": 64, "model": 4}, one size may be -1) and ``shardings`` (a callable taking
    the mesh, or ``"P('data',None) P()"``, or one PartitionSpec pytree per positional input) as
    ``--mesh``/``--shard``; ``.memory`` and ``.collectives`` are per device. ``buffers``: also
    read the compiler's buffer assignment (``.memory.largest``, as ``--view memory``).

    As ``show``'s options: ``time`` libtpu's estimated time per kernel (``--time``) within
    ``time_budget`` seconds and ``time_memory`` GiB; ``measure`` each kernel's device time on the
    attached TPU (``--measure``); ``passes`` a compile with XLA's pass dumps (``--passes``: each
    kernel names the pass that made it), ``pass_select`` the diff of one of XLA's passes kept
    (``--pass``: a name, a substring or an index; ``.passes``); ``fixes`` the fixes ``inspector
    fix`` proves on a TPU target, beside the findings they answer (``--fixes``; ``.fixes``).
    """
    with guarded_call():
        request = inspect_request(fn_or_spec, *args, target=target, params=params, reference=reference, roofline=roofline,
                                  cache=cache, mesh=mesh, shardings=shardings, buffers=buffers, time=time,
                                  time_budget=time_budget, time_memory=time_memory, measure=measure, passes=passes,
                                  pass_select=pass_select, fixes=fixes, **kwargs)
        return report_for(request, budget_option="time_budget")


def _chips(targets: str | Sequence[str], option: str = "targets") -> list[Chip]:
    if not isinstance(targets, (str, list, tuple)):
        raise UsageError(f"{option} must be chip names such as ['tpu-v5e', 'tpu-v6e'] or 'tpu-v5e,tpu-v6e', "
                         f"not {type(targets).__name__}")
    names = targets.split(",") if isinstance(targets, str) else list(targets)
    if not all(isinstance(n, str) for n in names):
        raise UsageError(f"{option} must be chip names such as ['tpu-v5e', 'tpu-v6e']")
    if not any(n.strip() for n in names):
        raise UsageError(f"{option} is empty: give chip names such as ['tpu-v5e', 'tpu-v6e'] (inspector chips lists them)")
    # "local" is the chip jax runs on here, as for inspect's target
    names = [resolve_chip(n).name if n.strip().lower() == "local" else n for n in names]
    return parse_targets(",".join(names))


def check_gate(fn_or_spec: Callable | str | Sequence[str], *args: Any, baseline: str | os.PathLike | None = None,
               tolerance: str | Sequence[str] | dict | None = None, targets: str | Sequence[str] | None = None,
               params: dict | None = None, cache: bool = True, estimate_only: bool = False, sweep: bool = False,
               mesh: dict | str | None = None, shardings: Any = None, **kwargs: Any) -> Gate:
    """The Gate ``check(..., baseline=FILE)`` runs: the one ``inspector check TARGET... --baseline
    FILE`` makes for the same options (commands/baseline.py's ``check_gate``), checked as it checks them."""
    from .baseline.gate import make_gate

    if baseline is None:
        raise UsageError("tolerance applies to baseline=FILE: give the baseline too, or leave it out")
    for name, given in (("estimate_only", estimate_only), ("sweep", sweep), ("mesh", mesh), ("shardings", shardings),
                        ("inputs", args or kwargs)):
        if given:
            raise UsageError(f"{name} does not go with baseline: the baseline's figures come from whole compiles of "
                             "INSPECT's entries")
    if not isinstance(baseline, (str, os.PathLike)):
        raise UsageError(f"baseline must be the path of a saved baseline (`inspector baseline save`), "
                         f"not {type(baseline).__name__}")
    baseline = os.fspath(baseline)
    if not isinstance(baseline, str):
        raise UsageError("baseline must be the path of a saved baseline, as a str or a pathlib.Path")
    specs = [fn_or_spec] if isinstance(fn_or_spec, str) else list(fn_or_spec) if isinstance(fn_or_spec, (list, tuple)) else None
    if not specs or not all(isinstance(s, str) for s in specs):
        raise UsageError("with baseline=FILE (a saved `inspector baseline`), give 'file.py:function' specs, files, "
                         "folders or globs: every target is compiled afresh from its INSPECT entry")
    shape = "tolerance must be 'FIGURE=N%' strings or a dict such as {'time': '5%', 'hbm_bytes': 0}"
    if tolerance is not None and not isinstance(tolerance, (str, dict, list, tuple)):
        raise UsageError(f"{shape}, not {type(tolerance).__name__}")
    if isinstance(tolerance, dict) and not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                               and not isinstance(v, bool) for k, v in tolerance.items()):
        raise UsageError(shape)
    texts = [tolerance] if isinstance(tolerance, str) else \
        [f"{k}={v}" for k, v in tolerance.items()] if isinstance(tolerance, dict) else list(tolerance or [])
    if not all(isinstance(t, str) for t in texts):
        raise UsageError(shape)
    if params is not None and not isinstance(params, dict):
        raise UsageError(f"params must be a dict of static keyword values, not a {type(params).__name__}")
    chips = None if targets is None else ",".join(c.name for c in _chips(targets))
    return make_gate(baseline, specs, chips=chips, sets=[f"{k}={v}" for k, v in (params or {}).items()], tolerances=texts,
                     use_cache=Cache.asked(cache), option="targets", example="targets=['tpu-v5e', 'tpu-v6e']",
                     tolerance_option="tolerance")


def check(fn_or_spec: Callable | str | Sequence[str], *args: Any, targets: str | Sequence[str] | None = None,
          estimate_only: bool = False, sweep: bool = False, params: dict | None = None, cache: bool = True,
          mesh: dict | str | None = None, shardings: Any = None, baseline: str | os.PathLike | None = None,
          tolerance: str | Sequence[str] | dict | None = None, **kwargs: Any) -> CheckResult | Comparison:
    """Every pallas_call against every chip in ``targets`` (TPUs, or spec-only GPUs such as h100):
    the VMEM estimate and, unless ``estimate_only``, the real compiler's verdict (libtpu, no TPU
    needed), layout rules and BlockSpec bugs; as ``inspector check``. ``.ok`` is False on any
    error (``.failed``) and where nothing decides whether a kernel fits VMEM (``.undecided``: the
    chips where, with ``estimate_only``, only the unsure terms (values a kernel body builds, operands
    XLA may place in VMEM itself) put the estimate over the limit); ``.targets`` one row per chip;
    ``.findings``; ``.kernels`` the Pallas analyses.
    ``sweep``: also estimate every combination of the INSPECT params. On a topology
    (``tpu-v5e:16x16``, with ``mesh``/``shardings`` as in ``inspect``) the rows carry the HBM
    fit per device and a program that does not fit is an ``hbm-over-capacity`` error.

    ``baseline``: a saved baseline's path (``inspector baseline save``; a str or a Path, the file
    checked whole: a bad one is a UsageError naming its first bad field): the figures of ``fn_or_spec`` (a
    spec, a file, folder or glob standing for its INSPECT entries, or a list of them) computed now
    on ``targets`` (default: the baseline's chips) and compared with the file's, as ``check
    --baseline``; the result is the Comparison (``.ok`` False when a figure moved past its
    ``tolerance``: ``"time=5%,hbm_bytes=0"``, a list of those, or ``{"time": "5%"}``; default time
    2%, every other figure exact)."""
    from .verbs.checking import run_check

    with guarded_call():
        if baseline is not None or tolerance:
            from .baseline.gate import run_gate

            return run_gate(check_gate(fn_or_spec, *args, baseline=baseline, tolerance=tolerance, targets=targets,
                                       params=params, cache=cache, estimate_only=estimate_only, sweep=sweep, mesh=mesh,
                                       shardings=shardings, **kwargs))
        if not callable(fn_or_spec) and not isinstance(fn_or_spec, str):
            raise UsageError("check takes one target; several with baseline=FILE (a saved `inspector baseline`)")
        chips = check_chips(_chips(DEFAULT_TPU if targets is None else targets), "targets=['tpu-v5e', 'tpu-v6e', 'h100']")
        t = make_target(fn_or_spec, args, kwargs, params=params, mesh=mesh, shardings=shardings)
        result = run_check(t, chips, estimate_only=estimate_only, use_cache=Cache.asked(cache).value, memo=False)
        if sweep:
            from .pallas.sweep import sweep as sweep_params

            result.sweep = sweep_params(t, [c for c in chips if family_of(c).info.can.sweep])
        return result


def diff(fn: Callable | str, reference: Callable | str | None = None, *args: Any, grad: bool = False,
         target: str | None = None, seed: int = 0, atol: float | None = None, rtol: float | None = None,
         runs: int = 3, strict: bool = False, params: dict | None = None, **kwargs: Any) -> DiffResult:
    """Run ``fn`` and ``reference`` on the same inputs and compare every output, as ``inspector
    diff``: arrays given are used as they are, ShapeDtypeStructs and shape specs become seeded
    random inputs (``seed``). ``.ok``; ``.outputs`` per output (max abs/rel error, ulps, how many
    elements outside ``atol``/``rtol``, which default to the dtype's, raised with the number of terms
    the reference sums: ``.tolerance`` says which and why; the error folded onto the kernel's blocks); ``.gradients``
    with ``grad``; ``.timing`` (median of ``runs``). On a GPU or TPU both run there for real; on
    the CPU, Pallas TPU kernels run in TPU interpret mode as ``target`` (a TPU, default tpu-v5e), and
    a GPU target's kernels (Pallas-Triton) in Pallas interpret mode.
    ``reference`` may be None for a spec whose INSPECT names one."""
    from .run import check_tolerance, run_diff

    with guarded_call():
        sim = None
        if target is not None and not (isinstance(target, str) and target.strip().lower() == "local"):
            sim = diff_simulated_chip(_chips(target, "target"), "target", f"'{INTERPRET_EXAMPLE}'", "'cpu'/'gpu'/'local'")
        if not isinstance(runs, int) or runs < 0:
            raise UsageError(f"runs must be 0 or more, not {runs!r}")
        try:
            check_tolerance("atol", atol)
            check_tolerance("rtol", rtol)
        except ValueError as err:
            raise UsageError(str(err)) from err
        t = make_target(fn, args, kwargs, params=params, reference=reference)
        if t.reference is None:
            raise UsageError(f"{t.spec}: no reference to compare with: inspector.diff(fn, reference, *inputs)")
        try:
            return run_diff(t, seed=seed, atol=atol, rtol=rtol, grad=grad, runs=runs, chip=sim, strict=strict)
        except ValueError as err:
            raise UsageError(str(err)) from err


def compare(a: Callable | str, b: Callable | str | None = None, *args: Any, params: dict | None = None,
            params_a: dict | None = None, params_b: dict | None = None, target: str | None = None, target_a: str | None = None,
            target_b: str | None = None, roofline: str | None = None, cache: bool = True, mesh: dict | str | None = None,
            shardings: Any = None, time: bool = False, time_budget: float | None = None, time_memory: float | None = None,
            measure: bool = False, **kwargs: Any) -> Compare:
    """Two variants side by side, as ``inspector compare``: ``a`` and ``b`` (functions or
    ``"file.py:function"`` specs; ``b`` None compares ``a`` with itself under other params or on
    another chip), ``params_a``/``params_b`` over the shared ``params``, on ``target_a``/``target_b``
    (default ``target``). Both are built as ``inspect`` builds them; the result has the totals with
    B / A ratios (``.totals``), the VMEM of each Pallas kernel (``.vmem``), the kernels only one side
    has (``.only_a``, ``.only_b``) and those whose HBM bytes changed most (``.changed``); ``.ok`` is
    False when either side has an error finding. ``time``, ``time_budget``, ``time_memory`` and
    ``measure`` as ``inspect``'s (``--time``, ``--time-budget``, ``--time-memory``, ``--measure``)."""
    from .results.view_table import get_view
    from .verbs.comparison import compare_reports

    with guarded_call():
        for name, value in (("params", params), ("params_a", params_a), ("params_b", params_b)):
            if value is not None and not isinstance(value, dict):
                raise UsageError(f"{name} must be a dict of static keyword values, not a {type(value).__name__}")
        second = a if b is None else b
        pa, pb = {**(params or {}), **(params_a or {})}, {**(params or {}), **(params_b or {})}
        chip_a, chip_b = resolve_chip(target_a or target or default_target("compare")[0]), resolve_chip(target_b or target or default_target("compare")[0])
        require_two_variants((id(a), pa, chip_a.name), (id(second), pb, chip_b.name),
                             "give b, params_a/params_b (e.g. params_a={'block_q': 128}, params_b={'block_q': 256}) "
                             "or target_a/target_b")
        reports = []
        for fn, p, chip in ((a, pa, chip_a), (second, pb, chip_b)):
            side = inspect_request(fn, *args, target=chip.name, params=p or None, roofline=roofline, cache=cache, mesh=mesh,
                                   shardings=shardings, time=time, time_budget=time_budget, time_memory=time_memory,
                                   measure=measure, **kwargs)
            # what the comparison reads: the fusions view's kernels and totals, each Pallas kernel's VMEM
            needs = get_view("fusions").needs | Needs(time=bool(time))
            reports.append(report_for(dataclasses.replace(side, needs=needs), budget_option="time_budget"))
        return compare_reports(*reports)
