"""Run a function and its reference on the same inputs and say where they differ.

On a machine with an accelerator both run natively. On the CPU, Pallas GPU kernels (Triton) run
in jax's Pallas interpreter one grid step at a time, simulating no chip, and Pallas TPU kernels in
TPU interpret mode as the chip being simulated (``interpreted``): elements no grid step wrote come
back NaN; an out-of-bounds read is an error finding with the grid point and the run goes on
reading NaN there, so the outputs are still compared; revisits the interpreter refuses become
findings; races and DMA hazards are confirmed by rerunning. A sharded target runs on as many CPU
devices as its mesh has where the process can have them. The comparison checks the output trees'
structure, shapes and dtypes, then the values at a tolerance given or derived from the dtype and
the terms summed (``tolerance``), folded onto the output BlockSpec's blocks.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect as pyinspect
import math
import traceback
from typing import Any

import numpy as np

from ..base.chips import DEFAULT_TPU, INTERPRET_EXAMPLE, SPARSE_CORE_CHIP, Chip, get_chip
from ..base.errors import TargetFailure
from ..base.findings import Finding, by_severity
from ..jax_internals import interpret as ji
from ..jax_internals.mesh_kernels import KERNEL_PRIMITIVES
from ..jax_internals.pipelines import recording_pipelines
from ..jax_internals.tracing import walk_eqns
from ..pallas.discovery import find_pallas_calls
from ..compilation.stage_records import Program
from ..compilation.stages import example_values
from ..compilation.target import Target
from ..base.user_code import describe_error
import inspector.run.inputs as inputs_  # the module, so that a test can set its available_memory
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .gradients import gradients
from .inputs import check_memory, make_inputs, memory_needed
from .mesh import mesh_failure, mesh_here
from .result import DiffResult, LeafDiff, Timing
from .retries import interpret
from .timing import device_timing, median_time
from .trees import accumulations_of, compare_trees
from ..families import family_of


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


GPU_KERNELS = ("triton", "mosaic_gpu")  # the Pallas backends a GPU kernel is written for (PallasCall.written_for)


def simulated_chip(chip: str | Chip | None) -> Chip:
    """The TPU interpret mode traces as: ``chip``, or the default TPU for a GPU target (its kernels
    ask no TPU's lookups and run in the plain interpreter)."""
    chip = get_chip(chip) if isinstance(chip, str) else chip or get_chip(DEFAULT_TPU)
    can = family_of(chip).info.can
    if can.simulate:
        return chip
    if can.run and can.kernels:
        return get_chip(DEFAULT_TPU)
    raise ValueError(f"interpret mode simulates a TPU, not {chip.name}: give a TPU target such as {INTERPRET_EXAMPLE}")


def _gpu_target(chip: str | Chip | None) -> Chip | None:
    """``chip`` where it is a GPU whose kernels diff runs in the interpreter, else None."""
    chip = get_chip(chip) if isinstance(chip, str) else chip
    can = family_of(chip).info.can if chip is not None else None
    return chip if can is not None and can.run and can.kernels and not can.simulate else None


def _gpu_kernels(found: list, gpu: Chip | None) -> str | None:
    """How the diff names its kernels when they are GPU kernels ("Triton", "GPU"), else None:
    said by the kernels found, else (none followed) by a GPU target."""
    backends = {f.info.written_for for f in found}
    if found and backends <= set(GPU_KERNELS):
        return "Triton" if backends == {"triton"} else "GPU"
    return "GPU" if not found and gpu is not None else None


def _trace(target: Target, chip: Chip):
    """The kernel's jaxpr, traced as ``chip`` (kernels that ask get_tpu_info() see it): (closed
    jaxpr, found pallas_calls, whether there is any pallas_call, a note when discovery failed)."""
    import jax

    fn = functools.partial(target.fn, **target.params)
    try:
        with ji.simulating(chip), recording_pipelines():
            closed = jax.make_jaxpr(fn)(*target.args, **target.kwargs)
    except Exception as err:
        raise TargetFailure(describe_error(err, target.file, f"raised while tracing {target.name}")) from err
    has_pallas = any(e.primitive.name in KERNEL_PRIMITIVES for e in walk_eqns(closed.jaxpr))
    try:
        return closed, find_pallas_calls(Program(closed_jaxpr=closed, example_values=example_values(target))), has_pallas, None
    except Exception as err:  # noqa: BLE001 - a kernel the discovery cannot follow (a dynamic grid, say)
        return closed, [], has_pallas, f"{type(err).__name__}: {err}"


def _check_memory(target: Target, closed, reference, ref_params):
    """Refuse (a usage error) a diff whose inputs, outputs and reference outputs would not fit in this machine's memory."""
    import jax

    try:
        ref_shapes = jax.eval_shape(functools.partial(reference, **ref_params), *target.args, **target.kwargs)
    except Exception:  # noqa: BLE001 - the reference's own error is reported when it runs
        ref_shapes = ()
    needed = memory_needed((target.args, target.kwargs), closed.out_avals, ref_shapes)
    check_memory(needed, inputs_.available_memory())


# ----------------------------------------------------------------------------- the diff


def run_diff(target: Target, *, seed: int = 0, atol: float | None = None, rtol: float | None = None,
             grad: bool = False, runs: int = 3, chip: str | Chip | None = None, strict: bool = False,
             start_devices: bool = False) -> DiffResult:
    """Run ``target`` and its reference on the same inputs and compare. ``chip``: the TPU that
    interpret mode simulates (default tpu-v5e), or the GPU whose kernels run in the interpreter;
    ``strict``: a kernel the interpreter cannot run is an error rather than an info finding; ``start_devices``: where jax has not started, start its CPU
    with as many devices as the target's mesh has (a process of its own, as the CLI's: the setting
    is the whole process's). Usage problems raise ValueError."""
    # a sharded target (INSPECT's or --mesh's axes) runs on as many CPU devices as its mesh has
    sizes, mesh_note = mesh_here(target, start_devices)
    with ji.mesh_axes(sizes):
        return _run_diff(target, seed=seed, atol=atol, rtol=rtol, grad=grad, runs=runs, chip=chip, strict=strict,
                         mesh_note=mesh_note)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Run:
    """What the kernel's runs share: the jitted kernel and reference, their inputs, the chip simulated."""

    target: Target
    kernel: Any
    reference: Any
    args: tuple
    kwargs: dict
    seed: int  # the inputs' (make_inputs), which a measurement on the chip draws again
    reference_target: Target  # the reference with the params it takes: what the chip's family measures
    sim: Chip
    interpret: bool  # in TPU interpret mode on the CPU (no accelerator, and Pallas kernels)
    gpu_kernels: str | None  # "Triton"/"GPU": the kernels are a GPU's (the plain interpreter runs them on the CPU)
    gpu: Chip | None  # the GPU target, where one was given
    found: list  # the pallas_calls found while tracing
    strict: bool
    tol: tuple  # (atol, rtol, the reference's accumulations)

    @property
    def cores(self) -> int:
        return interpreted.cores_of(self.sim)


def _traced(target: Target, sim: Chip):
    """_trace as ``sim``; a SparseCore program on a chip without them is traced as one that has them."""
    try:
        return sim, *_trace(target, sim)
    except TargetFailure as failure:
        if "SparseCore" not in str(failure) or sim.sparse_core_vmem_bytes is not None:
            raise
        sim = get_chip(SPARSE_CORE_CHIP)
        return sim, *_trace(target, sim)


def _run_diff(target: Target, *, seed, atol, rtol, grad, runs, chip, strict, mesh_note=None) -> DiffResult:
    import jax

    if target.reference is None:
        raise ValueError(f"{target.spec} has no reference: give --ref file.py:function or INSPECT's \"reference\"")
    atol = check_tolerance("atol", target.options.get("atol") if atol is None else atol)
    rtol = check_tolerance("rtol", target.options.get("rtol") if rtol is None else rtol)
    accelerator = _accelerator()
    try:
        sim, closed, found, has_pallas, discovery_note = _traced(target, simulated_chip(chip))
    except TargetFailure as failure:
        if mesh_note is None or not (mesh_note.data or {}).get("reduced"):
            raise
        raised = Finding("error", "kernel-raised", f"{target.name}: {failure}", view="diff")
        said = [mesh_note, mesh_failure(raised, mesh_note, strict)]
        return DiffResult(target=target.spec, reference=target.reference_name or "reference", seed=seed, mode="not run",
                          inputs=[], outputs=[], gradients=None, timing=None, findings=by_severity(said), ok=not strict)
    ref_params = _reference_params(target.reference, target.params)
    _check_memory(target, closed, target.reference, ref_params)
    args, kwargs = make_inputs(target, seed)
    reference = jax.jit(functools.partial(target.reference, **ref_params))
    findings: list[Finding] = []
    if mesh_note is not None:  # said, not hidden: a program that needs the mesh's real sizes fails or differs on a smaller one
        findings.append(mesh_note)
    if discovery_note and has_pallas:
        findings.append(Finding("info", "blocks-unknown", f"{target.name}: the error map uses an even grid, not the kernel's "
                                f"blocks: the pallas_call could not be followed ({discovery_note})", view="diff"))
    r_out, r_err = interpreted.plain(reference, args, kwargs)
    if r_err is not None:  # the analysed code failed (exit 1), not the command line
        raise TargetFailure(describe_error(r_err, target.file, f"raised while running the reference {target.reference_name}")) from r_err
    accs = accumulations_of(reference, args, kwargs)  # terms summed per output: the default tolerance grows with them
    run = _Run(target=target, kernel=jax.jit(functools.partial(target.fn, **target.params)), reference=reference, args=args,
               kwargs=kwargs, seed=seed, reference_target=dataclasses.replace(target, fn=target.reference, params=ref_params),
               sim=sim, interpret=accelerator is None and has_pallas, found=found, strict=strict,
               tol=(atol, rtol, accs), gpu_kernels=_gpu_kernels(found, _gpu_target(chip)), gpu=_gpu_target(chip))
    k_out, ran, run_findings, printed, run_options = _run_kernel(run, r_out, mesh_note)
    findings += run_findings
    outputs: list[LeafDiff] = []
    if ran:
        outputs, tree_findings = compare_trees(k_out, r_out, found, atol, rtol, accs=accs)
        findings += tree_findings
    grads = None
    if grad and ran:
        grads, grad_findings = gradients(target, run.kernel, reference, args, kwargs, atol, rtol, seed,
                                         sim if run.interpret else None)
        findings += grad_findings
    timing = _timing(run, accelerator, runs, run_options) if ran and runs > 0 else None
    findings += _mismatches(outputs + (grads or []), findings, run.interpret)
    inputs = [f"{name}: {getattr(a, 'dtype', '')}{list(getattr(a, 'shape', []))}" for name, a in zip(target.arg_names, args)]
    errors = any(f.severity == "error" for f in findings)
    unsupported = not ran and any(f.code in ("interpret-unsupported", "mesh-unavailable") for f in findings)  # nothing ran, nothing seen wrong
    ok = not errors and (unsupported or (ran and all(l.ok for l in outputs + (grads or []))))
    return DiffResult(target=target.spec, reference=target.reference_name or "reference", seed=seed, mode=_mode(run, accelerator),
                      inputs=inputs, outputs=outputs, gradients=grads, timing=timing, findings=by_severity(findings), ok=ok,
                      chip=sim.name if run.interpret and not run.gpu_kernels else None,
                      interpreter_output=interpreted.detail(ji.without_marks(printed)) if printed else "")


def _run_kernel(run: _Run, r_out, mesh_note: Finding | None):
    """(kernel outputs, whether it ran, findings, what the interpreter printed, the interpreter options it needed)."""
    import jax

    target, sim = run.target, run.sim
    findings: list[Finding] = []
    printed, run_options = "", {}
    sparse = [f.info.name for f in run.found if (f.info.core_type or "").startswith("SparseCore")] if run.interpret else []
    if sparse:  # measured with jax 0.10.2: only the first subcore's share is written, the rest left NaN
        findings.append(Finding("error" if run.strict else "info", "interpret-unsupported",
                                f"{', '.join(sparse)}: a SparseCore kernel (pl.kernel over a VectorSubcoreMesh or "
                                f"ScalarSubcoreMesh) cannot run here: jax {jax.__version__}'s TPU interpreter runs only the "
                                "first subcore of the mesh (the other subcores' output stays unwritten) and does not follow "
                                f"indirect (gather/scatter) DMAs, so its output would be wrong; the compile views still hold "
                                f"(inspector check/show --target {sim.name})", view="diff",
                                data={"reason": "SparseCore mesh not interpreted"}))
        k_out, ran = None, False
    elif run.interpret:
        k_out, findings_run, printed, run_options = interpret(run.kernel, run.args, run.kwargs, sim, run.cores, r_out, run.tol,
                                                              run.found, target.name, run.strict)
        findings += findings_run
        ran = k_out is not None
    else:
        k_out, err = interpreted.plain(run.kernel, run.args, run.kwargs)
        ran = err is None  # a function may return None: that is an output too
        if err is not None:
            findings.append(Finding("error", "kernel-raised", f"{target.name}: " + describe_error(err, target.file, "raised while running"),
                                    view="diff", data={"detail": interpreted.detail("".join(traceback.format_exception(err)))}))
    if not ran and mesh_note is not None and (mesh_note.data or {}).get("reduced"):
        findings = [mesh_failure(f, mesh_note, run.strict) if f.code in ("kernel-raised", "interpret-out-of-bounds") else f
                    for f in findings]
    return k_out, ran, findings, printed, run_options


def _accelerator() -> str | None:
    """The accelerator jax runs the diff on here ("gpu", "tpu"), or None: the CPU."""
    import jax

    return next((d.platform for d in jax.devices() if d.platform in ("gpu", "tpu")), None)


def _measured_on(run: _Run, accelerator: str | None) -> tuple[Chip, str] | None:
    """The chip whose family times the diff's run on the accelerator, and the name of the one
    attached: a TPU's (named "tpu" where the chip table does not know it), or a GPU target's where a
    GPU of its family is attached; None where wall-clock time is all there is."""
    chip = run.sim if accelerator == "tpu" else run.gpu if accelerator == "gpu" else None
    if chip is None:
        return None
    attached = family_of(chip).attached()
    if attached is not None:
        return chip, attached.name
    return (chip, "tpu") if accelerator == "tpu" else None


def _timing(run: _Run, accelerator: str | None, runs: int, run_options: dict) -> Timing:
    measured_on = _measured_on(run, accelerator)
    if measured_on is not None:
        return device_timing(run.target, run.reference_target, *measured_on, run.seed, runs)
    sim = run.sim if run.interpret else None
    return Timing(kernel_s=median_time(run.kernel, run.args, run.kwargs, runs, sim, run_options),
                  reference_s=median_time(run.reference, run.args, run.kwargs, runs, None), runs=runs,
                  note="Pallas kernel in interpret mode on the CPU: not representative of GPU speed" if run.interpret and run.gpu_kernels
                  else "Pallas kernel in TPU interpret mode on the CPU: not representative of TPU speed"
                  if run.interpret else f"measured on the {accelerator}" if accelerator else "XLA on the CPU")


def _mismatches(leaves: list[LeafDiff], findings: list[Finding], interpret: bool) -> list[Finding]:
    """A mismatch finding per leaf outside tolerance; in interpret mode, NaN the kernel has and the
    reference has not are named as never written (or read past the end, where a read was)."""
    said = []
    read_past = any(f.code == "interpret-out-of-bounds" for f in findings)
    for leaf in leaves:
        if leaf.ok:
            continue
        unwritten = leaf.nan_kernel - leaf.nan_reference
        extra = (f"; {unwritten} NaN elements in the kernel's output ("
                 + ("never written, or made from the NaN read past the end?)" if read_past else "never written?)")
                 if unwritten > 0 and interpret else "")
        why = f"; tolerance {leaf.tolerance.source}: {leaf.tolerance.reason}" if leaf.tolerance else ""
        said.append(Finding("error", "mismatch", f"{leaf.output or 'output'}: {leaf.bad} of {int(np.prod(leaf.shape))} "
                            f"elements outside atol={leaf.atol:g}, rtol={leaf.rtol:g} (worst at {tuple(leaf.worst_index)}: "
                            f"{leaf.worst_kernel:.4g} vs {leaf.worst_reference:.4g}){extra}{why}", view="diff"))
    return said


def _mode(run: _Run, accelerator: str | None) -> str:
    """How the kernel ran, as the diff's header says it."""
    if accelerator:
        return f"accelerator ({accelerator})"
    if not run.interpret:
        return "XLA on the CPU"
    on = ji.mesh_devices()
    if run.gpu_kernels:  # nothing simulated: jax's interpreter runs the kernel's grid in order
        return ("Pallas interpret mode on the CPU" + (f" for the {run.gpu.name}" if run.gpu else "")
                + f" ({run.gpu_kernels} kernels, one grid step at a time" + (f" on each of {on} devices" if on > 1 else "")
                + ", NaN for unwritten outputs; no GPU here)")
    return (f"TPU interpret mode on the CPU as {run.sim.name} ("
            + ("2 TensorCores share each grid" if run.cores > 1 else "1 TensorCore")
            + (f" on each of {on} devices" if on > 1 else "")
            + ", race detection, NaN for uninitialized memory)")
