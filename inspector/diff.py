"""Run a function and its reference on the same inputs and say where they differ.

On a machine with an accelerator both run natively. On the CPU, Pallas TPU kernels run under TPU
interpret mode with race detection, two simulated cores (so a "parallel" axis really is split)
and NaN-filled uninitialized memory (facts.md s3): elements no grid step wrote come back NaN.
Out-of-bounds reads, revisit errors and races the interpreter reports become findings with the
grid point. The comparison folds the errors onto the output BlockSpec's blocks.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect as pyinspect
import re
import statistics
import time

import numpy as np

from .findings import Finding, by_severity
from .target import Target, describe_error

# (atol, rtol) per dtype: a few units in the last place of typical O(1) values
TOLERANCES = {"float64": (1e-10, 1e-10), "float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}
MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
MAP_CELLS = (32, 64)  # rows, columns of the printed error map


@dataclasses.dataclass
class BadBlock:
    block: list[int]
    bad: int  # elements outside tolerance
    nan: int  # of which NaN in the kernel's output (never written, or a NaN computed)
    max_abs: float
    grid_points: list[list[int]]  # the grid steps that wrote this block (first few)


@dataclasses.dataclass
class ErrorMap:
    basis: str  # "blockspec" (the kernel's output blocks) or "coarse" (an even grid)
    kernel: str | None
    block_shape: list[int]
    blocks: list[int]  # number of blocks per dim
    bad_blocks: list[BadBlock]  # worst first, at most 32
    bad_block_count: int
    rows: list[str]  # a character map of the last two block dims: '.' ok, 'x' wrong, 'N' NaN


@dataclasses.dataclass
class LeafDiff:
    output: str
    shape: list[int]
    dtype: str
    atol: float
    rtol: float
    max_abs: float
    max_rel: float
    max_ulp: float | None  # at the element with the largest absolute error
    bad: int
    bad_fraction: float
    nan_kernel: int
    nan_reference: int
    inf_kernel: int
    inf_reference: int
    worst_index: list[int]
    worst_kernel: float
    worst_reference: float
    error_map: ErrorMap | None

    @property
    def ok(self) -> bool:
        return self.bad == 0 and self.nan_kernel <= self.nan_reference


@dataclasses.dataclass
class Timing:
    kernel_s: float | None
    reference_s: float | None
    runs: int
    note: str


@dataclasses.dataclass
class DiffResult:
    target: str
    reference: str
    seed: int
    mode: str  # "accelerator (gpu)" or "TPU interpret mode on the CPU"
    inputs: list[str]
    outputs: list[LeafDiff]
    gradients: list[LeafDiff] | None
    timing: Timing | None
    findings: list[Finding]
    ok: bool


# ----------------------------------------------------------------------------- inputs


def make_inputs(target: Target, seed: int):
    """Concrete arrays for every input: INSPECT's arrays as given, random ones for shape specs
    (normal floats; integers in [0, 16) unless INSPECT's "int_ranges" names a range)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    ranges = target.options.get("int_ranges", {})

    def fill(name, leaf):
        if isinstance(leaf, (jax.Array, np.ndarray)):
            return jnp.asarray(leaf)
        if not hasattr(leaf, "shape"):
            return leaf
        dtype = np.dtype(leaf.dtype)
        if np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16":
            return jnp.asarray(rng.standard_normal(leaf.shape, dtype=np.float32)).astype(leaf.dtype)
        if dtype == np.bool_:
            return jnp.asarray(rng.random(leaf.shape) < 0.5)
        lo, hi = ranges.get(name, (0, 16))
        return jnp.asarray(rng.integers(lo, hi, leaf.shape)).astype(leaf.dtype)

    args = tuple(jax.tree.map(functools.partial(fill, name), a) for name, a in zip(target.arg_names, target.args))
    kwargs = {k: jax.tree.map(functools.partial(fill, k), v) for k, v in target.kwargs.items()}
    return args, kwargs


def _reference_params(reference, params: dict) -> dict:
    try:
        sig = pyinspect.signature(reference)
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return dict(params)
    return {k: v for k, v in params.items() if k in sig.parameters}


# ----------------------------------------------------------------------------- running


def _interpret_params(check: bool):
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.InterpretParams(detect_races=check, uninitialized_memory="nan", num_cores_or_threads=2 if check else 1)


_INTERPRETER_ERRORS = [
    (re.compile(r"Out-of-bounds block index \(([^)]*)\) for (\w+) \"(\w+)\" in iteration \(([^)]*)\)"), "interpret-out-of-bounds",
     lambda m: f"{m[3]} ({m[2]}): block index ({m[1]}) is out of bounds at grid point ({m[4]})"),
    (re.compile(r"[Rr]evisit\w* block[^\n]*"), "interpret-revisit",
     lambda m: f"the interpreter refused a non-consecutive output revisit: {m[0].strip()}"),
]


def _interpreter_finding(err: Exception, what: str) -> Finding:
    text = str(err)
    for pattern, code, describe in _INTERPRETER_ERRORS:
        m = pattern.search(text)
        if m:
            return Finding("error", code, f"{what}: {describe(m)}", view="diff")
    return Finding("error", "kernel-raised", f"{what}: " + describe_error(err, None, "raised while running"), view="diff")


def _block(tree):
    import jax

    return jax.tree.map(lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x, tree)


def _run(fn, args, kwargs, interpret: bool, check: bool):
    """fn(*args, **kwargs) under interpret mode if asked; (result, finding or None)."""
    import contextlib

    from jax.experimental.pallas import tpu as pltpu

    context = pltpu.force_tpu_interpret_mode(_interpret_params(check)) if interpret else contextlib.nullcontext()
    try:
        with context:
            return _block(fn(*args, **kwargs)), None
    except Exception as err:
        if interpret:
            pltpu.reset_tpu_interpret_mode_state()  # the interpreter's state is unusable after a raise
        return None, err


def _races_found() -> bool:
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    return bool(getattr(ipc, "races", None) is not None and ipc.races.races_found)


def _median_time(fn, args, kwargs, runs: int, interpret: bool) -> float | None:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out, err = _run(fn, args, kwargs, interpret, check=False)
        if err is not None:
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times) if times else None


# ----------------------------------------------------------------------------- comparing


def _ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    bits = MANTISSA_BITS.get(dtype, 23)
    mag = np.maximum(np.abs(x), np.finfo(np.float32).tiny)
    return np.exp2(np.floor(np.log2(mag)) - bits)


def compare(name: str, kernel, reference, atol: float | None, rtol: float | None):
    """(LeafDiff, bad mask, kernel NaN mask, absolute error) of one output."""
    dtype = str(reference.dtype)
    a = np.asarray(kernel).astype(np.float64)
    b = np.asarray(reference).astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"output {name}: the kernel gives shape {a.shape}, the reference {b.shape}")
    default = TOLERANCES.get(dtype, (0.0, 0.0))
    atol = default[0] if atol is None else atol
    rtol = default[1] if rtol is None else rtol
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only is as wrong as it gets
    bad = diff > atol + rtol * np.abs(np.nan_to_num(b))
    # relative error only where the reference is not ~0 (|b| > atol): near zero it means nothing
    significant = np.abs(np.nan_to_num(b)) > max(atol, np.finfo(np.float32).tiny)
    rel = np.where(significant, diff / np.where(significant, np.abs(np.nan_to_num(b)), 1.0), 0.0)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    finite = np.isfinite(diff)
    # ulps of the output dtype at the worst element: "the largest error is N units in the last place"
    ulp = float(diff[worst] / _ulp(np.abs(b[worst]), dtype)) if dtype in MANTISSA_BITS and diff.size and finite[worst] else None
    return LeafDiff(
        output=name, shape=list(a.shape), dtype=dtype, atol=atol, rtol=rtol,
        max_abs=float(diff.max()) if diff.size else 0.0,
        max_rel=float(np.where(finite, rel, 0).max()) if diff.size else 0.0,
        max_ulp=ulp,
        bad=int(bad.sum()), bad_fraction=float(bad.mean()) if bad.size else 0.0,
        nan_kernel=int(np.isnan(a).sum()), nan_reference=int(np.isnan(b).sum()),
        inf_kernel=int(np.isinf(a).sum()), inf_reference=int(np.isinf(b).sum()),
        worst_index=[int(i) for i in worst], worst_kernel=float(a[worst]) if diff.size else 0.0,
        worst_reference=float(b[worst]) if diff.size else 0.0, error_map=None,
    ), bad, np.isnan(a), diff


def _coarse_blocks(shape: tuple[int, ...]) -> list[int]:
    return [max(1, -(-d // 8)) for d in shape]


def error_map(bad: np.ndarray, nan: np.ndarray, diff: np.ndarray, block_shape: list[int], basis: str,
              kernel: str | None = None, writers=None) -> ErrorMap:
    """Fold element errors onto blocks; ``writers(block) -> grid points`` names who wrote a block."""
    shape = bad.shape
    blocks = [-(-d // b) for d, b in zip(shape, block_shape)]
    pad = [(0, n * b - d) for d, b, n in zip(shape, block_shape, blocks)]
    split = [x for n, b in zip(blocks, block_shape) for x in (n, b)]
    axes = tuple(range(1, 2 * len(shape), 2))
    fold = lambda x, fill: np.pad(x, pad, constant_values=fill).reshape(split)
    bad_per = fold(bad, False).sum(axis=axes)
    nan_per = fold(nan, False).sum(axis=axes)
    max_per = fold(np.where(np.isfinite(diff), diff, 0.0), 0.0).max(axis=axes)
    order = np.argsort(-bad_per, axis=None)
    found = []
    for flat in order[:32]:
        idx = np.unravel_index(int(flat), bad_per.shape)
        if bad_per[idx] == 0:
            break
        found.append(BadBlock([int(i) for i in idx], int(bad_per[idx]), int(nan_per[idx]), float(max_per[idx]),
                              writers([int(i) for i in idx]) if writers else []))
    return ErrorMap(basis, kernel, list(block_shape), blocks, found, int((bad_per > 0).sum()), _char_map(bad_per, nan_per))


def _char_map(bad_per: np.ndarray, nan_per: np.ndarray) -> list[str]:
    """The last two block dims (leading dims folded by max), '.' ok, 'x' wrong, 'N' all-NaN wrong."""
    b, n = bad_per, nan_per
    while b.ndim > 2:
        b, n = b.max(axis=0), n.max(axis=0)
    if b.ndim == 1:
        b, n = b[None, :], n[None, :]
    if b.ndim == 0:
        b, n = b.reshape(1, 1), n.reshape(1, 1)
    rows = []
    sr, sc = -(-b.shape[0] // MAP_CELLS[0]), -(-b.shape[1] // MAP_CELLS[1])
    for r in range(0, b.shape[0], sr):
        line = []
        for c in range(0, b.shape[1], sc):
            cb, cn = b[r:r + sr, c:c + sc], n[r:r + sr, c:c + sc]
            line.append("." if cb.max() == 0 else "N" if (cn >= cb).all() else "x")
        rows.append("".join(line))
    return rows


# ----------------------------------------------------------------------------- the diff


def _output_blockspec(found_calls, shape: tuple[int, ...], dtype: str):
    """The pallas_call output that has this leaf's shape: (call, operand index)."""
    for call in found_calls:
        for i, op in enumerate(call.info.operands):
            if op.role == "output" and tuple(op.array_shape) == tuple(shape) and op.dtype == dtype:
                return call, i
    return None, None


def _writers(call, operand: int):
    """block -> the first grid points whose output block it is."""
    from .pallas.grid_walk import MAX_STEPS, _grid_points

    info = call.info
    if info.steps > MAX_STEPS // 4 or (info.scalar_prefetch and not call.prefetch_known):
        return None
    points = _grid_points(info.grid, 0, info.steps)
    blocks = [np.broadcast_to(np.asarray(b), (info.steps,)) for b in call.index_maps[operand](*points)]

    def find(block: list[int]) -> list[list[int]]:
        hit = np.ones(info.steps, bool)
        for b, want in zip(blocks, block):
            hit &= b == want
        return [[int(p[i]) for p in points] for i in np.flatnonzero(hit)[:4]]

    return find


def _leaf_name(path) -> str:
    import jax

    return jax.tree_util.keystr(path) or "output"


def _compare_trees(kernel_out, ref_out, found_calls, atol, rtol, label: str) -> list[LeafDiff]:
    import jax

    k_leaves = jax.tree_util.tree_flatten_with_path(kernel_out)[0]
    r_leaves = jax.tree.leaves(ref_out)
    if len(k_leaves) != len(r_leaves):
        raise ValueError(f"{label}: the kernel returns {len(k_leaves)} arrays, the reference {len(r_leaves)}")
    diffs = []
    for (path, k), r in zip(k_leaves, r_leaves):
        leaf, bad, nan, diff = compare(label + _leaf_name(path).replace("output", ""), k, r, atol, rtol)
        call, operand = _output_blockspec(found_calls, tuple(np.shape(k)), str(np.asarray(k).dtype))
        if call is not None:
            op = call.info.operands[operand]
            block = [b or 1 for b in op.block_shape]
            leaf.error_map = error_map(bad, nan, diff, block, "blockspec", call.info.name, _writers(call, operand))
        elif bad.ndim:
            leaf.error_map = error_map(bad, nan, diff, _coarse_blocks(bad.shape), "coarse")
        diffs.append(leaf)
    return diffs


def run_diff(target: Target, *, seed: int = 0, atol: float | None = None, rtol: float | None = None,
             grad: bool = False, runs: int = 3) -> DiffResult:
    import jax

    from .backends import Backend
    from .chips import get_chip
    from .pallas.discovery import find_pallas_calls
    from .stages import capture

    if target.reference is None:
        raise ValueError(f"{target.spec} has no reference: give --ref file.py:function or INSPECT's \"reference\"")
    atol = target.options.get("atol") if atol is None else atol
    rtol = target.options.get("rtol") if rtol is None else rtol
    accelerator = next((d.platform for d in jax.devices() if d.platform in ("gpu", "tpu")), None)
    interpret = accelerator is None
    found = find_pallas_calls(capture(target, Backend(get_chip("cpu")), compile=False).program)
    interpret = interpret and bool(found)
    args, kwargs = make_inputs(target, seed)
    kernel = jax.jit(functools.partial(target.fn, **target.params))
    reference = jax.jit(functools.partial(target.reference, **_reference_params(target.reference, target.params)))
    findings: list[Finding] = []

    from jax.experimental.pallas import tpu as pltpu

    if interpret:
        pltpu.reset_tpu_interpret_mode_state()
    k_out, err = _run(kernel, args, kwargs, interpret, check=interpret)
    if err is not None:
        findings.append(_interpreter_finding(err, target.name))
    elif interpret and _races_found():
        findings.append(Finding("error", "race-detected", f"{target.name}: the interpreter's race detector saw two cores "
                                "touch the same buffer without ordering (a \"parallel\" axis that is not parallel?)", view="diff"))
    r_out, r_err = _run(reference, args, kwargs, False, False)
    if r_err is not None:
        raise ValueError(describe_error(r_err, target.file, f"raised while running the reference {target.reference_name}"))
    outputs = _compare_trees(k_out, r_out, found, atol, rtol, "") if k_out is not None else []
    gradients = None
    if grad and k_out is not None:
        gradients, grad_findings = _gradients(target, kernel, reference, args, kwargs, found, atol, rtol, seed, interpret)
        findings += grad_findings
    timing = None
    if k_out is not None and runs > 0:
        timing = Timing(_median_time(kernel, args, kwargs, runs, interpret), _median_time(reference, args, kwargs, runs, False),
                        runs, "Pallas kernel in TPU interpret mode on the CPU: not representative of TPU speed"
                        if interpret else f"on the {accelerator}" if accelerator else "XLA on the CPU")
    for leaf in (outputs or []) + (gradients or []):
        if not leaf.ok:
            unwritten = leaf.nan_kernel - leaf.nan_reference
            extra = f"; {unwritten} NaN elements in the kernel's output (never written?)" if unwritten > 0 and interpret else ""
            findings.append(Finding("error", "mismatch", f"{leaf.output or 'output'}: {leaf.bad} of {int(np.prod(leaf.shape))} "
                                    f"elements outside atol={leaf.atol:g}, rtol={leaf.rtol:g} (max abs error {leaf.max_abs:.3g} at "
                                    f"{tuple(leaf.worst_index)}){extra}", view="diff"))
    mode = f"accelerator ({accelerator})" if accelerator else ("TPU interpret mode on the CPU" if interpret else "XLA on the CPU")
    inputs = [f"{name}: {getattr(a, 'dtype', '')}{list(getattr(a, 'shape', []))}" for name, a in zip(target.arg_names, args)]
    ok = k_out is not None and all(l.ok for l in outputs + (gradients or [])) and not any(f.severity == "error" for f in findings)
    return DiffResult(target.spec, target.reference_name or "reference", seed, mode, inputs, outputs, gradients, timing,
                      by_severity(findings), ok)


def _gradients(target, kernel, reference, args, kwargs, found, atol, rtol, seed, interpret):
    """vjp of kernel and reference with the same random cotangent, w.r.t. every float input."""
    import jax
    import jax.numpy as jnp

    wrt = [i for i, a in enumerate(args) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating)]

    def vjp_of(fn):
        def grads():  # called inside _run, so the kernel's backward pass is traced in interpret mode too
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

    k_grads, err = _run(vjp_of(kernel), (), {}, interpret, check=False)
    if err is not None:
        return None, [_interpreter_finding(err, f"{target.name} (gradient)")]
    r_grads, r_err = _run(vjp_of(reference), (), {}, False, False)
    if r_err is not None:
        raise ValueError(describe_error(r_err, target.file, f"raised while differentiating the reference {target.reference_name}"))
    names = [target.arg_names[i] for i in wrt]
    diffs = []
    for name, k, r in zip(names, k_grads, r_grads):
        leaf, bad, nan, diff = compare(f"d/d{name}", k, r, atol, rtol)
        leaf.error_map = error_map(bad, nan, diff, _coarse_blocks(bad.shape), "coarse") if bad.ndim else None
        diffs.append(leaf)
    return diffs, []
