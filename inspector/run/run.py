"""Run a function and its reference on the same inputs and say where they differ.

On a machine with an accelerator both run natively. On the CPU, Pallas TPU kernels run in TPU
interpret mode as the chip being simulated (``interpreted``): elements no grid step wrote come
back NaN; an out-of-bounds read is an error finding with the grid point and the run goes on
reading NaN there, so the outputs are still compared; revisits the interpreter refuses become
findings; races and DMA hazards are confirmed by rerunning. A sharded target runs on as many CPU
devices as its mesh has where the process can have them. The comparison checks the output trees'
structure, shapes and dtypes, then the values at a tolerance given or derived from the dtype and
the terms summed (``tolerance``), folded onto the output BlockSpec's blocks.
"""
from __future__ import annotations

import functools
import inspect as pyinspect
import math
import statistics
import time

import numpy as np

from ..chips import DEFAULT_TPU, SPARSE_CORE_CHIP, Chip, get_chip
from ..findings import Finding, by_severity
from ..target import Target, describe_error
import inspector.run.inputs as inputs_
import inspector.run.interpreted as interpreted
from .outputs import coarse_blocks, compare, error_map, leaf_findings, pair_leaves, value_notes
from .inputs import check_memory, make_inputs, memory_needed
from .result import DiffResult, LeafDiff, Timing



def _reference_params(reference, params: dict) -> dict:
    try:
        sig = pyinspect.signature(reference)
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return dict(params)
    return {k: v for k, v in params.items() if k in sig.parameters}


def check_tolerance(name: str, value) -> float | None:
    """A tolerance must be a finite number >= 0 (a usage error otherwise)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, not {value:g}")
    return value


def simulated_chip(chip: str | Chip | None) -> Chip:
    chip = get_chip(chip) if isinstance(chip, str) else chip or get_chip(DEFAULT_TPU)
    if not chip.is_tpu:
        raise ValueError(f"interpret mode simulates a TPU, not {chip.name}: give a TPU target such as tpu-v5p")
    return chip


# ----------------------------------------------------------------------------- running


def _plain(fn, args, kwargs):
    try:
        return interpreted.block(fn(*args, **kwargs)), None
    except Exception as err:  # noqa: BLE001
        return None, err


def _trace(target: Target, chip: Chip):
    """The kernel's jaxpr, traced as ``chip`` (kernels that ask get_tpu_info() see it): (closed
    jaxpr, found pallas_calls, whether there is any pallas_call, a note when discovery failed)."""
    import jax

    from ..errors import TargetFailure
    from ..jax_internals import interpret as ji
    from ..jax_internals.mesh_kernels import KERNEL_PRIMITIVES
    from ..jax_internals.pipelines import recording_pipelines
    from ..jax_internals.tracing import walk_eqns
    from ..pallas.discovery import find_pallas_calls
    from ..stages import Program, example_values

    fn = functools.partial(target.fn, **target.params)
    try:
        with ji.simulating(chip), recording_pipelines():
            closed = jax.make_jaxpr(fn)(*target.args, **target.kwargs)
    except Exception as err:
        raise TargetFailure(describe_error(err, target.file, f"raised while tracing {target.name}")) from err
    has_pallas = any(e.primitive.name in KERNEL_PRIMITIVES for e in walk_eqns(closed.jaxpr))
    try:
        return closed, find_pallas_calls(Program(closed, example_values(target))), has_pallas, None
    except Exception as err:  # noqa: BLE001 - a kernel the discovery cannot follow (a dynamic grid, say)
        return closed, [], has_pallas, f"{type(err).__name__}: {err}"


def _check_memory(target: Target, closed, reference, ref_params):
    import jax

    try:
        ref_shapes = jax.eval_shape(functools.partial(reference, **ref_params), *target.args, **target.kwargs)
    except Exception:  # noqa: BLE001 - the reference's own error is reported when it runs
        ref_shapes = ()
    needed = memory_needed((target.args, target.kwargs), closed.out_avals, ref_shapes)
    check_memory(needed, inputs_.available_memory())


# ----------------------------------------------------------------------------- comparing


def _writers(call, operand: int):
    """block -> the first grid points whose output block it is."""
    from ..pallas.grid_walk import MAX_STEPS, _grid_points

    info = call.info
    if not info.grid or info.steps is None or info.steps > MAX_STEPS // 4 or (info.scalar_prefetch and not call.prefetch_known):
        return None  # no grid (one step), a run-time grid, too many steps, or index maps that read run-time data
    points = _grid_points(info.grid, 0, info.steps)
    try:
        blocks = [np.broadcast_to(np.asarray(b), (info.steps,)) for b in call.index_maps[operand](*points)]
    except Exception:  # noqa: BLE001 - an index map the walk cannot evaluate: no writers named
        return None

    def find(block: list[int]) -> list[list[int]]:
        hit = np.ones(info.steps, bool)
        for b, want in zip(blocks, block):
            hit &= b == want
        return [[int(p[i]) for p in points] for i in np.flatnonzero(hit)[:4]]

    return find


def _output_blockspec(found_calls, shape: tuple[int, ...], dtype: str):
    """The pallas_call output that has this leaf's shape: (call, operand index)."""
    for call in found_calls:
        for i, op in enumerate(call.info.operands):
            if op.role == "output" and op.pipelined and tuple(op.array_shape) == tuple(shape) and op.dtype == dtype:
                return call, i
    return None, None


def accumulations_of(fn, args, kwargs):
    """Per flat output of ``fn``, the terms it sums (jax_internals.accumulation); None when it cannot be traced."""
    import jax

    from ..jax_internals.accumulation import accumulations

    try:
        return accumulations(jax.make_jaxpr(fn)(*args, **kwargs))
    except Exception:  # noqa: BLE001 - the tolerance falls back to the dtype's; the run reports the function's errors
        return None


def _by_leaf(ref_out, accs) -> dict[int, object]:
    import jax

    leaves = jax.tree.leaves(ref_out)
    return {id(leaf): acc for leaf, acc in zip(leaves, accs)} if accs is not None and len(accs) == len(leaves) else {}


def compare_trees(kernel_out, ref_out, found_calls, atol, rtol, label: str = "", accs=None) -> tuple[list[LeafDiff], list[Finding]]:
    """Every output leaf compared, and the structure/shape/dtype findings. ``accs``: the reference's
    accumulations per flat output (accumulations_of), from which tolerances not given are derived."""
    pairs, findings = pair_leaves(kernel_out, ref_out, label)
    by_leaf = _by_leaf(ref_out, accs)
    diffs = []
    for name, k, r in pairs:
        comparable, leaf_notes = leaf_findings(name, k, r)
        findings += leaf_notes
        if not comparable:
            continue
        leaf, bad, nan, diff = compare(name, k, r, atol, rtol, by_leaf.get(id(r)))
        findings += value_notes(leaf)
        call, operand = _output_blockspec(found_calls, tuple(np.shape(k)), str(np.asarray(k).dtype))
        if call is not None:
            op = call.info.operands[operand]
            blocks = [b or 1 for b in op.block_shape]
            leaf.error_map = error_map(bad, nan, diff, blocks, "blockspec", call.info.name, _writers(call, operand))
        elif bad.ndim:
            leaf.error_map = error_map(bad, nan, diff, coarse_blocks(bad.shape), "coarse")
        diffs.append(leaf)
    return diffs, findings


def _wrong(kernel_out, ref_out, tol) -> int | None:
    """Elements outside tolerance (None: the trees do not even match). ``tol``: (atol, rtol, accumulations)."""
    atol, rtol, accs = tol
    diffs, findings = compare_trees(kernel_out, ref_out, [], atol, rtol, accs=accs)
    if any(f.severity == "error" for f in findings):
        return None
    return sum(l.bad + max(0, l.nan_kernel - l.nan_reference) for l in diffs)


# ----------------------------------------------------------------------------- races


def _confirm_races(kernel, args, kwargs, chip, cores, main_out, ref_out, tol, text, found, name, options=None) -> Finding:
    """Rerun a racy kernel in other orderings: a race is an error only when some ordering's
    outputs differ from the reference. A race where a DMA is one side (a DMA hazard: a writeback
    and the next prefetch into the same buffer, a store into a buffer a DMA still reads) is
    reported as such, with the lines that started the DMAs."""
    from ..jax_internals import interpret as ji

    options = dict(options or {})
    if cores > 1:
        others = [("one core", dict(options, cores=1)), ("the parallel steps in another order", dict(options, cores=cores, seed=1))]
    else:
        flip = ("DMAs done on wait", "on_wait") if options.get("dma_execution_mode") == "eager" else ("eager DMAs", "eager")
        others = [(flip[0], dict(options, cores=1, dma_execution_mode=flip[1])), ("another order", dict(options, cores=1, seed=1))]
    verdicts = [(f"{cores} cores" if cores > 1 else "as checked", _wrong(main_out, ref_out, tol))]
    for label, kw in others:
        outcome = interpreted.run(kernel, args, kwargs, chip, check=False, **kw)
        verdicts.append((label, None if outcome.error is not None else _wrong(outcome.output, ref_out, tol)))
    reports = ji.parse_races(text)
    first = interpreted.describe_race(reports[0], found) if reports else "(the interpreter's report was not captured)"
    dma = bool(reports) and any(reports[0].dmas)
    kind = "DMA hazard" if dma else "race"
    count = f"{len(reports)} {kind}{'s' if len(reports) != 1 else ''}" if reports else f"a {kind}"
    if cores > 1:
        where = f"{name} as {chip.name} ({cores} TensorCores sharing the grid): {count}, first {first}"
    else:
        where = f"{name} as {chip.name}: {count}, first {first}"
    runs = "; ".join(f"{label}: {'matches' if bad == 0 else 'did not finish' if bad is None else f'{bad} wrong'}"
                     for label, bad in verdicts)
    benign = all(bad == 0 for _, bad in verdicts)
    code = "dma-hazard" if dma else "race-detected"
    data = {"chip": chip.name, "cores": cores, "runs": {label: bad for label, bad in verdicts},
            "races": [r.__dict__ for r in reports[:20]], "detail": interpreted.detail(text)}
    if dma:
        fix = ("wait for the DMA that reads or writes the buffer before the next access to it (a writeback before "
               "the next prefetch into the same buffer), or give the two their own buffers (double buffering)")
        if benign:
            return Finding("warning", code, f"{where}. The outputs match the reference in every ordering tried ({runs}), "
                           f"but on the chip the two overlap: {fix}", view="diff", data=data)
        return Finding("error", code, f"{where}. Confirmed: the outputs depend on when the DMAs run ({runs}); {fix}",
                       view="diff", data=data)
    if benign:
        return Finding("warning", code, f"{where}. The outputs match the reference in every ordering tried "
                       f"({runs}): benign here (the same values written twice?), but it depends on the data", view="diff", data=data)
    return Finding("error", code, f"{where}. Confirmed: the outputs depend on the ordering ({runs}); "
                   "make the axis \"arbitrary\" or give each parallel step its own output block", view="diff", data=data)


# ----------------------------------------------------------------------------- the diff


def run_diff(target: Target, *, seed: int = 0, atol: float | None = None, rtol: float | None = None,
             grad: bool = False, runs: int = 3, chip: str | Chip | None = None, strict: bool = False,
             start_devices: bool = False) -> DiffResult:
    """Run ``target`` and its reference on the same inputs and compare. ``chip``: the TPU that
    interpret mode simulates (default tpu-v5e); ``strict``: a kernel the interpreter cannot run is
    an error rather than an info finding; ``start_devices``: where jax has not started, start its CPU
    with as many devices as the target's mesh has (a process of its own, as the CLI's: the setting
    is the whole process's). Usage problems raise ValueError."""
    from ..jax_internals import interpret as ji

    # a sharded target (INSPECT's or --mesh's axes) runs on as many CPU devices as its mesh has
    sizes, mesh_note = _mesh_here(target, start_devices)
    with ji.mesh_axes(sizes):
        return _run_diff(target, seed=seed, atol=atol, rtol=rtol, grad=grad, runs=runs, chip=chip, strict=strict,
                         mesh_note=mesh_note)


def _mesh_here(target: Target, start_devices: bool) -> tuple[dict[str, int], Finding | None]:
    """The mesh the diff runs on, and the info finding that says which. Its axes get their sizes
    when this process has (or can still start) that many devices; an axis of -1 ("the devices left
    over") gets 1. Where there are too few devices, every axis is of size 1, and a kernel that then
    fails is no finding against the kernel (see _mesh_failure)."""
    import math

    from ..jax_internals import interpret as ji

    mesh = dict(target.mesh or {})
    if not mesh:
        return {}, None
    sizes = {name: (size if size != -1 else 1) for name, size in mesh.items()}
    needed = math.prod(sizes.values())
    given = ", ".join(f"{name}={size if size != -1 else 'the rest'}" for name, size in mesh.items())
    free = [name for name, size in mesh.items() if size == -1]
    rest = (f"; {', '.join(free)} (the devices left over) has size 1 here: give --mesh with its size to run it wider"
            if free else "")
    data = {"axes": dict(mesh), "devices": needed}
    if needed > 1:
        have = ji.cpu_devices(needed if start_devices else 1)
        if have >= needed:
            return sizes, Finding("info", "mesh-on-cpu-devices", f"{target.name}: run on {needed} devices, its mesh ({given})"
                                  f"{rest}", view="diff", data=data | {"sizes": sizes, "reduced": bool(free)})
        ones = {name: 1 for name in mesh}
        return ones, Finding("info", "mesh-on-one-device", f"{target.name}: its mesh ({given}) needs {needed} devices and this "
                             f"process has {have}: run on one device, every "
                             f"axis of size 1. `inspector diff` on the command line runs it on {needed} CPU devices, as does "
                             f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} set before jax starts", view="diff",
                             data=data | {"sizes": ones, "reduced": True})
    return sizes, Finding("info", "mesh-on-one-device", f"{target.name}: run on one device, its mesh ({given}) with every axis "
                          f"of size 1{rest}; the compile views (show/check --target CHIP:SHAPE) have the real mesh", view="diff",
                          data=data | {"sizes": sizes, "reduced": bool(free)})


def _mesh_failure(finding: Finding, mesh_note: Finding, strict: bool) -> Finding:
    """A kernel that raised on a mesh smaller than its own (a collective kernel on one device: its
    ring of neighbours is empty, a split over n - 1 steps divides by zero): it cannot be diffed here."""
    note = mesh_note.data or {}
    axes, sizes = note["axes"], note["sizes"]
    shape = ",".join(f"{k}={v}" for k, v in sizes.items())
    own = ",".join(f"{k}={v if v != -1 else 'the rest'}" for k, v in axes.items())
    if -1 in axes.values():
        hint = "give the axis sizes (e.g. --mesh " + ",".join(f"{k}=4" if v == -1 else f"{k}={v}" for k, v in axes.items()) \
               + ") to run it on that many CPU devices"
    else:
        hint = (f"`inspector diff` on the command line runs it on {note['devices']} CPU devices, as does "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={note['devices']} set before jax starts")
    return Finding("error" if strict else "info", "mesh-unavailable",
                   f"{finding.message.rstrip('.')}: on a mesh of {shape}, smaller than its own ({own}), so it cannot be "
                   f"diffed here (a collective kernel needs its mesh's devices): {hint}",
                   view="diff", data={"raised": finding.message, "detail": (finding.data or {}).get("detail", "")})


def _run_diff(target: Target, *, seed, atol, rtol, grad, runs, chip, strict, mesh_note=None) -> DiffResult:
    import jax

    from ..jax_internals import interpret as ji

    from ..errors import TargetFailure

    if target.reference is None:
        raise ValueError(f"{target.spec} has no reference: give --ref file.py:function or INSPECT's \"reference\"")
    atol = check_tolerance("atol", target.options.get("atol") if atol is None else atol)
    rtol = check_tolerance("rtol", target.options.get("rtol") if rtol is None else rtol)
    sim = simulated_chip(chip)
    accelerator = next((d.platform for d in jax.devices() if d.platform in ("gpu", "tpu")), None)
    try:
        try:
            closed, found, has_pallas, discovery_note = _trace(target, sim)
        except TargetFailure as failure:  # a SparseCore program on a chip without: simulate one that has them
            if "SparseCore" not in str(failure) or sim.sparse_core_vmem_bytes is not None:
                raise
            sim = get_chip(SPARSE_CORE_CHIP)
            closed, found, has_pallas, discovery_note = _trace(target, sim)
    except TargetFailure as failure:
        if mesh_note is None or not (mesh_note.data or {}).get("reduced"):
            raise
        raised = Finding("error", "kernel-raised", f"{target.name}: {failure}", view="diff")
        said = [mesh_note, _mesh_failure(raised, mesh_note, strict)]
        return DiffResult(target.spec, target.reference_name or "reference", seed, "not run", [], [], None, None,
                          by_severity(said), not strict, chip=None)
    interpret = accelerator is None and has_pallas
    ref_params = _reference_params(target.reference, target.params)
    _check_memory(target, closed, target.reference, ref_params)
    args, kwargs = make_inputs(target, seed)
    kernel = jax.jit(functools.partial(target.fn, **target.params))
    reference = jax.jit(functools.partial(target.reference, **ref_params))
    findings: list[Finding] = []
    if mesh_note is not None:  # said, not hidden: a program that needs the mesh's real sizes fails or differs on a smaller one
        findings.append(mesh_note)
    if discovery_note and has_pallas:
        findings.append(Finding("info", "blocks-unknown", f"{target.name}: the error map uses an even grid, not the kernel's "
                                f"blocks: the pallas_call could not be followed ({discovery_note})", view="diff"))

    r_out, r_err = _plain(reference, args, kwargs)
    if r_err is not None:  # the analysed code failed (exit 1), not the command line
        raise TargetFailure(describe_error(r_err, target.file, f"raised while running the reference {target.reference_name}")) from r_err
    accs = accumulations_of(reference, args, kwargs)  # terms summed per output: the default tolerance grows with them
    tol = (atol, rtol, accs)
    cores = interpreted.cores_of(sim)
    printed = ""
    run_options: dict = {}
    sparse = [f.info.name for f in found if (f.info.core_type or "").startswith("SparseCore")] if interpret else []
    if sparse:  # measured with jax 0.10.2: only the first subcore's share is written, the rest left NaN
        findings.append(Finding("error" if strict else "info", "interpret-unsupported",
                                f"{', '.join(sparse)}: a SparseCore kernel (pl.kernel over a VectorSubcoreMesh or "
                                f"ScalarSubcoreMesh) cannot run here: jax {jax.__version__}'s TPU interpreter runs only the "
                                "first subcore of the mesh (the other subcores' output stays unwritten) and does not follow "
                                f"indirect (gather/scatter) DMAs, so its output would be wrong; the compile views still hold "
                                f"(inspector check/show --target {sim.name})", view="diff",
                                data={"reason": "SparseCore mesh not interpreted"}))
        k_out, ran = None, False
    elif interpret:
        k_out, findings_run, printed, run_options = _interpret(kernel, args, kwargs, sim, cores, r_out, tol, found, target.name, strict)
        findings += findings_run
        ran = k_out is not None
    else:
        k_out, err = _plain(kernel, args, kwargs)
        ran = err is None  # a function may return None: that is an output too
        if err is not None:
            import traceback

            findings.append(Finding("error", "kernel-raised", f"{target.name}: " + describe_error(err, target.file, "raised while running"),
                                    view="diff", data={"detail": interpreted.detail("".join(traceback.format_exception(err)))}))
    if not ran and mesh_note is not None and (mesh_note.data or {}).get("reduced"):
        findings = [_mesh_failure(f, mesh_note, strict) if f.code in ("kernel-raised", "interpret-out-of-bounds") else f
                    for f in findings]
    outputs: list[LeafDiff] = []
    if ran:
        outputs, tree_findings = compare_trees(k_out, r_out, found, atol, rtol, accs=accs)
        findings += tree_findings
    gradients = None
    if grad and ran:
        gradients, grad_findings = _gradients(target, kernel, reference, args, kwargs, atol, rtol, seed, sim if interpret else None)
        findings += grad_findings
    timing = None
    if ran and runs > 0 and accelerator == "tpu":
        timing = _device_timing(kernel, reference, args, kwargs, runs)
    elif ran and runs > 0:
        timing = Timing(_median_time(kernel, args, kwargs, runs, sim if interpret else None, run_options),
                        _median_time(reference, args, kwargs, runs, None), runs,
                        "Pallas kernel in TPU interpret mode on the CPU: not representative of TPU speed"
                        if interpret else f"measured on the {accelerator}" if accelerator else "XLA on the CPU")
    for leaf in outputs + (gradients or []):
        if not leaf.ok:
            unwritten = leaf.nan_kernel - leaf.nan_reference
            read_past = any(f.code == "interpret-out-of-bounds" for f in findings)
            extra = (f"; {unwritten} NaN elements in the kernel's output ("
                     + ("never written, or made from the NaN read past the end?)" if read_past else "never written?)")
                     if unwritten > 0 and interpret else "")
            why = f"; tolerance {leaf.tolerance.source}: {leaf.tolerance.reason}" if leaf.tolerance else ""
            findings.append(Finding("error", "mismatch", f"{leaf.output or 'output'}: {leaf.bad} of {int(np.prod(leaf.shape))} "
                                    f"elements outside atol={leaf.atol:g}, rtol={leaf.rtol:g} (max abs error {leaf.max_abs:.3g} at "
                                    f"{tuple(leaf.worst_index)}){extra}{why}", view="diff"))
    if accelerator:
        mode = f"accelerator ({accelerator})"
    elif interpret:
        on = ji.mesh_devices()
        mode = (f"TPU interpret mode on the CPU as {sim.name} ("
                + ("2 TensorCores share each grid" if cores > 1 else "1 TensorCore")
                + (f" on each of {on} devices" if on > 1 else "")
                + ", race detection, NaN for uninitialized memory)")
    else:
        mode = "XLA on the CPU"
    inputs = [f"{name}: {getattr(a, 'dtype', '')}{list(getattr(a, 'shape', []))}" for name, a in zip(target.arg_names, args)]
    errors = any(f.severity == "error" for f in findings)
    unsupported = not ran and any(f.code in ("interpret-unsupported", "mesh-unavailable") for f in findings)  # nothing ran, nothing seen wrong
    ok = not errors and (unsupported or (ran and all(l.ok for l in outputs + (gradients or []))))
    from ..jax_internals.interpret import without_marks

    return DiffResult(target.spec, target.reference_name or "reference", seed, mode, inputs, outputs, gradients, timing,
                      by_severity(findings), ok, chip=sim.name if interpret else None,
                      interpreter_output=interpreted.detail(without_marks(printed)) if printed else "")


def _revisit_any(found_calls) -> bool:
    return any(op.revisit == "any" for call in found_calls for op in call.info.operands if op.role == "output")


def _retried(name: str, why: str) -> Finding:
    return Finding("info", "interpret-retried", f"{name}: {why}", view="diff")


def _interpret(kernel, args, kwargs, sim, cores, r_out, tol, found, name, strict):
    """(kernel outputs or None, findings, printed text, the interpreter options it needed) of the
    checked interpret-mode run. What the interpreter refuses but the chip runs is retried with the
    interpreter's options that allow it;
    an out-of-bounds read is an error finding, and the run goes on (NaN for what was read past the end)
    so the outputs are still compared."""
    from ..jax_internals import interpret as ji

    findings = []
    options: dict = {}
    check = True

    def again():
        return interpreted.run(kernel, args, kwargs, sim, cores=cores, check=check, **options)

    main = again()
    for _ in range(4):  # each remedy at most once
        err = main.error
        if err is None:
            break
        if ji.zero_length_out_of_bounds(err) and "out_of_bounds_reads" not in options:
            options["out_of_bounds_reads"] = "uninitialized"
            findings.append(_retried(name, "the interpreter counts a zero-length read at the end of a buffer (a zero-length "
                                     "DMA at offset == size) as out of bounds, which the chip accepts; ran again with "
                                     "out-of-bounds reads returning uninitialized (NaN) values"))
        elif ji.race_detector_zero_wait(err) and "dma_execution_mode" not in options:
            options["dma_execution_mode"] = "eager"
            findings.append(_retried(name, "the interpreter's race detector fails (an AssertionError in its semaphore "
                                     "wait) on a zero-byte DMA wait, which the chip accepts; ran again with each DMA "
                                     "done when it starts, race detection kept"))
        elif (at := ji.interpreter_assertion(err)) and "dma_execution_mode" not in options:
            options["dma_execution_mode"] = "eager"
            findings.append(_retried(name, f"the interpreter's own assertion failed ({at}), not the kernel's; ran "
                                     "again with each DMA done when it starts"))
        elif ji.interpreter_assertion(err) and check:
            check = False
            findings.append(_retried(name, f"the interpreter's own assertion still fails ({ji.interpreter_assertion(err)}); "
                                     "ran again without race detection (races are not checked in this run)"))
        elif ji.out_of_bounds_read(err) and options.get("out_of_bounds_reads") != "uninitialized":
            read = interpreted.failure_finding(err, main.text, name, sim, strict)
            read.message += "; the outputs are compared from a run that reads NaN there"
            findings.append(read)
            options["out_of_bounds_reads"] = "uninitialized"
        else:
            break
        main = again()
    if main.error is not None:
        finding = interpreted.failure_finding(main.error, main.text, name, sim, strict)
        if finding.code == "interpret-revisit" and _revisit_any(found):
            # the interpreter ignores pl.RevisitMode.ANY (it never reloads an output block): its limit, not the kernel's bug
            reason = "the interpreter refuses the non-consecutive output revisits that pl.RevisitMode.ANY allows"
            finding = Finding("error" if strict else "info", "interpret-unsupported",
                              f"{name}: cannot run in interpret mode: {reason}; the compile views still hold "
                              f"(inspector check/show --target {sim.name})", view="diff",
                              data={"reason": reason, "detail": finding.data.get("detail", "")})
        if (at := ji.interpreter_assertion(main.error)) is not None:  # jax's interpreter, not the kernel, asserted
            reason = f"the interpreter's own assertion fails ({at}) in every setting tried"
            finding = Finding("error" if strict else "info", "interpret-unsupported",
                              f"{name}: cannot run in interpret mode: {reason}; the compile views still hold "
                              f"(inspector check/show --target {sim.name})", view="diff",
                              data={"reason": reason, "detail": interpreted.detail(main.text)})
        if finding.code == "interpret-out-of-bounds" and any(f.code == finding.code for f in findings):
            finding.message = finding.message.replace("; the outputs are compared from a run that reads NaN there", "")
        findings.append(finding)
        return None, findings, main.text, options
    if check and (ji.parse_races(main.text) or ji.races_found() or "RACE DETECTED" in main.text):
        findings.append(_confirm_races(kernel, args, kwargs, sim, cores, main.output, r_out, tol, main.text, found, name, options))
    return main.output, findings, main.text, options


def _device_timing(kernel, reference, args, kwargs, runs: int) -> Timing:
    """On a TPU: each function's device time from jax's profiler (wall-clock time there is mostly
    dispatch and synchronisation for programs under a millisecond)."""
    from ..backends import attached_chip
    from ..measure.on_chip import measure_function

    chip = attached_chip()
    name = chip.name if chip is not None else "tpu"
    k = measure_function(kernel, args, kwargs, chip_name=name, runs=max(runs, 3))
    r = measure_function(reference, args, kwargs, chip_name=name, runs=max(runs, 3))
    return Timing(k.seconds, r.seconds, k.runs, f"device time on the {k.device_kind} (jax profiler), median of {k.runs} runs")


def _median_time(fn, args, kwargs, runs: int, sim: Chip | None, options: dict | None = None) -> float | None:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        if sim is not None:
            outcome = interpreted.run(fn, args, kwargs, sim, cores=1, check=False, **(options or {}))
            err = outcome.error
        else:
            _, err = _plain(fn, args, kwargs)
        if err is not None:
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if times else None


def _autodiff_rule(err: BaseException) -> str | None:
    """'JVP rule' / 'transpose rule' when jax's own autodiff of pallas_call raised (e.g. an
    AssertionError with no message for a kernel that reads pl.program_id)."""
    import traceback

    names = [f.name for f in traceback.extract_tb(err.__traceback__)] if err.__traceback__ else []
    for name, rule in (("_pallas_call_jvp_rule", "JVP rule"), ("_pallas_call_transpose_rule", "transpose rule")):
        if name in names:
            return rule
    return None


def _gradients(target, kernel, reference, args, kwargs, atol, rtol, seed, sim: Chip | None):
    """vjp of kernel and reference with the same random cotangent, w.r.t. every float input."""
    import jax
    import jax.numpy as jnp

    wrt = [i for i, a in enumerate(args) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating)]

    def vjp_of(fn):
        def grads():  # called inside the run, so the kernel's backward pass is traced in interpret mode too
            def run(*diff_args):
                full = list(args)
                for i, a in zip(wrt, diff_args):
                    full[i] = a
                return fn(*full, **kwargs)

            out, pullback = jax.vjp(run, *[args[i] for i in wrt])
            rng = np.random.default_rng(seed + 1)  # the same cotangent for kernel and reference
            cot = jax.tree.map(lambda o: jnp.asarray(rng.standard_normal(o.shape, dtype=np.float32)).astype(o.dtype), out)
            return pullback(cot)

        return grads

    if sim is not None:
        outcome = interpreted.run(vjp_of(kernel), (), {}, sim, cores=1, check=False)
        k_grads, err, text = outcome.output, outcome.error, outcome.text
    else:
        (k_grads, err), text = _plain(vjp_of(kernel), (), {}), ""
    if err is not None:
        if (rule := _autodiff_rule(err)) is not None:
            return None, [Finding("error", "kernel-raised",
                                  f"{target.name} (gradient): jax cannot differentiate this pallas_call by itself: its {rule} "
                                  f"raised {type(err).__name__}{': ' + str(err).strip() if str(err).strip() else ''} (a kernel "
                                  "that reads pl.program_id, or writes an output in place, needs a jax.custom_vjp with a "
                                  "backward kernel)", view="diff", data={"type": type(err).__name__, "message": str(err)})]
        return None, [interpreted.failure_finding(err, text, f"{target.name} (gradient)", sim, False) if sim is not None else
                      Finding("error", "kernel-raised", f"{target.name} (gradient): " + describe_error(err, target.file, "raised"), view="diff")]
    r_grads, r_err = _plain(vjp_of(reference), (), {})
    accs = accumulations_of(vjp_of(reference), (), {}) if r_err is None else None
    by_leaf = _by_leaf(r_grads, accs)
    if r_err is not None:
        raise ValueError(describe_error(r_err, target.file, f"raised while differentiating the reference {target.reference_name}"))
    names = [target.arg_names[i] for i in wrt]
    diffs, findings = [], []
    for name, k, r in zip(names, k_grads, r_grads):
        comparable, notes = leaf_findings(f"d/d{name}", k, r)
        findings += notes
        if not comparable:
            continue
        leaf, bad, nan, diff = compare(f"d/d{name}", k, r, atol, rtol, by_leaf.get(id(r)))
        findings += value_notes(leaf)
        leaf.error_map = error_map(bad, nan, diff, coarse_blocks(bad.shape), "coarse") if bad.ndim else None
        diffs.append(leaf)
    return diffs, findings
