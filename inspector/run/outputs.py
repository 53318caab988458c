"""Compare a kernel's outputs with the reference's: tree structure, shapes and dtypes first (each
difference a finding), then the values of every leaf, folded onto the output blocks."""
from __future__ import annotations

import numpy as np

from ..base.findings import Finding
from .result import BadBlock, ErrorMap, LeafDiff
from .tolerance import choose

MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}
MAP_CELLS = (32, 64)  # rows, columns of the printed error map


def _ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    bits = MANTISSA_BITS.get(dtype, 23)
    mag = np.maximum(np.abs(x), np.finfo(np.float32).tiny)
    return np.exp2(np.floor(np.log2(mag)) - bits)


def compare(name: str, kernel, reference, atol: float | None, rtol: float | None, accumulation=None):
    """(LeafDiff, bad mask, kernel NaN mask, absolute error: NaN where either side is NaN) of one
    output of the same shape.
    ``accumulation`` (jax_internals.accumulation.Accumulation): the terms the reference summed to
    make it, from which a tolerance not given is derived."""
    dtype = str(reference.dtype)
    # complex compared as complex (a cast to float64 would drop the imaginary part)
    wide = np.complex128 if np.iscomplexobj(kernel) or np.iscomplexobj(reference) else np.float64
    a = np.asarray(kernel).astype(wide)
    b = np.asarray(reference).astype(wide)
    if a.shape != b.shape:
        raise ValueError(f"output {name}: the kernel gives shape {a.shape}, the reference {b.shape}")
    tol = choose(dtype, atol, rtol, accumulation.terms if accumulation else 1, accumulation.wide if accumulation else False,
                 b if accumulation and accumulation.terms > 1 else None, accumulation.op if accumulation else "")
    atol, rtol = tol.atol, tol.rtol
    both_nan = np.isnan(a) & np.isnan(b)
    # the error where both sides are numbers (inf against a number: inf); NaN where one side is NaN
    with np.errstate(invalid="ignore"):  # inf - inf: equal infinities are equal, not NaN
        err = np.where(both_nan | (a == b), 0.0, np.abs(a - b))
    diff = np.where(np.isnan(err), np.inf, err)  # NaN on one side only is as wrong as it gets
    bad = diff > atol + rtol * np.abs(np.nan_to_num(b))
    # relative error only where the reference is not ~0 (|b| > atol): near zero it means nothing
    significant = np.abs(np.nan_to_num(b)) > max(atol, np.finfo(np.float32).tiny)
    with np.errstate(invalid="ignore"):
        rel = np.where(significant, err / np.where(significant, np.abs(np.nan_to_num(b)), 1.0), 0.0)
    empty = diff.size == 0
    worst = () if empty else np.unravel_index(int(np.argmax(diff)), diff.shape)
    # max abs and max rel: over the elements where both sides are numbers, NaN (shown "-") where none is
    numbers = ~(np.isnan(a) | np.isnan(b))
    # ulps of the output dtype at the worst element: "the largest error is N units in the last place"
    ulp = float(diff[worst] / _ulp(np.abs(b[worst]), dtype)) if dtype in MANTISSA_BITS and not empty and np.isfinite(diff[worst]) else None
    return LeafDiff(
        output=name, shape=list(a.shape), dtype=dtype, atol=atol, rtol=rtol,
        max_abs=0.0 if empty else float(err[numbers].max()) if numbers.any() else float("nan"),
        max_rel=0.0 if empty else float(rel[numbers].max()) if numbers.any() else float("nan"),
        max_ulp=ulp,
        bad=int(bad.sum()), bad_fraction=0.0 if empty else float(bad.mean()),
        nan_kernel=int(np.isnan(a).sum()), nan_reference=int(np.isnan(b).sum()),
        inf_kernel=int(np.isinf(a).sum()), inf_reference=int(np.isinf(b).sum()),
        worst_index=[int(i) for i in worst], worst_kernel=0.0 if empty else _real(a[worst]),
        worst_reference=0.0 if empty else _real(b[worst]), error_map=None, tolerance=tol,
    ), bad, np.isnan(a), np.where(numbers, err, np.nan)


def value_notes(leaf: LeafDiff) -> list[Finding]:
    """What a verdict of "ok" would hide: an output with no elements (nothing was compared) and
    one that is NaN everywhere on both sides (they agree, but on no value)."""
    name = leaf.output or "output"
    size = int(np.prod(leaf.shape, dtype=np.int64))
    if size == 0:
        return [Finding("info", "no-elements", f"{name}: no elements ({leaf.dtype}{leaf.shape}): nothing to compare",
                        view="diff", data={"shape": list(leaf.shape)})]
    if leaf.nan_kernel == leaf.nan_reference == size:
        return [Finding("warning", "all-nan", f"{name}: all {size} elements are NaN in the kernel and in the reference: "
                        "they agree, but no value was compared (check the inputs and both functions)", view="diff",
                        data={"count": size})]
    return []


def _real(x) -> float:
    """A float for the report: complex values by their magnitude."""
    return float(np.abs(x)) if np.iscomplexobj(x) else float(x)


def coarse_blocks(shape: tuple[int, ...]) -> list[int]:
    return [max(1, -(-d // 8)) for d in shape]


def error_map(bad: np.ndarray, nan: np.ndarray, diff: np.ndarray, block_shape: list[int], basis: str,
              kernel: str | None = None, writers=None) -> ErrorMap | None:
    """Fold element errors onto blocks; ``writers(block) -> grid points`` names who wrote a block.
    None for an empty output (nothing to fold)."""
    if bad.size == 0:
        return None
    shape = bad.shape
    blocks = [-(-d // b) for d, b in zip(shape, block_shape)]
    pad = [(0, n * b - d) for d, b, n in zip(shape, block_shape, blocks)]
    split = [x for n, b in zip(blocks, block_shape) for x in (n, b)]
    axes = tuple(range(1, 2 * len(shape), 2))
    fold = lambda x, fill: np.pad(x, pad, constant_values=fill).reshape(split)
    bad_per = fold(bad, False).sum(axis=axes)
    nan_per = fold(nan, False).sum(axis=axes)
    # the largest error over the block's elements that are numbers on both sides; NaN where none is
    max_per = np.fmax.reduce(fold(diff, np.nan), axis=axes)
    order = np.argsort(-bad_per, axis=None)
    found = []
    for flat in order[:32]:
        idx = np.unravel_index(int(flat), bad_per.shape)
        if bad_per[idx] == 0:
            break
        found.append(BadBlock(block=[int(i) for i in idx], bad=int(bad_per[idx]), nan=int(nan_per[idx]), max_abs=float(max_per[idx]),
                              grid_points=writers([int(i) for i in idx]) if writers else []))
    return ErrorMap(basis=basis, kernel=kernel, block_shape=list(block_shape), blocks=blocks, bad_blocks=found,
                    bad_block_count=int((bad_per > 0).sum()), rows=_char_map(bad_per, nan_per))


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
    sr, sc = max(1, -(-b.shape[0] // MAP_CELLS[0])), max(1, -(-b.shape[1] // MAP_CELLS[1]))
    for r in range(0, b.shape[0], sr):
        line = []
        for c in range(0, b.shape[1], sc):
            cb, cn = b[r:r + sr, c:c + sc], n[r:r + sr, c:c + sc]
            line.append("." if cb.max() == 0 else "N" if (cn >= cb).all() else "x")
        rows.append("".join(line))
    return rows


# ----------------------------------------------------------------------------- structure


def _kind(tree) -> str:
    if isinstance(tree, dict):
        return f"a dict with keys {sorted(map(str, tree))}"
    if isinstance(tree, (tuple, list)):
        return f"a {type(tree).__name__} of {len(tree)}"
    if hasattr(tree, "shape"):
        return "one array"
    return f"a {type(tree).__name__}"


def _spec(x) -> str:
    return f"{np.asarray(x).dtype}{list(np.shape(x))}"


def _lists_as_tuples(tree):
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):  # a namedtuple keeps its type
        return tuple(_lists_as_tuples(x) for x in tree)
    if type(tree) is dict:
        return {k: _lists_as_tuples(v) for k, v in tree.items()}
    return tree


def pair_leaves(kernel_out, ref_out, label: str):
    """Match the kernel's output leaves with the reference's: ([(name, kernel leaf, ref leaf)],
    findings). Leaves pair by key path; trees that differ in structure are findings, and where they
    still hold the same number of leaves these pair by position so the values are compared too."""
    import jax

    keystr = jax.tree_util.keystr
    k_leaves = jax.tree_util.tree_flatten_with_path(kernel_out)[0]
    r_leaves = jax.tree_util.tree_flatten_with_path(ref_out)[0]
    name = lambda path: label + (keystr(path) or ("" if label else "output"))
    what = label.strip() or "output"
    findings: list[Finding] = []
    # a list against a tuple is no difference: pallas_call returns a tuple for a list out_shape
    if jax.tree.structure(_lists_as_tuples(kernel_out)) == jax.tree.structure(_lists_as_tuples(ref_out)):  # type: ignore[operator]  # jaxlib's PyTreeDef: no type here
        return [(name(kp), k, r) for (kp, k), (_, r) in zip(k_leaves, r_leaves)], findings
    k_paths = {keystr(p): (p, v) for p, v in k_leaves}
    r_paths = {keystr(p): (p, v) for p, v in r_leaves}
    common = [p for p in k_paths if p in r_paths]
    missing = [p for p in r_paths if p not in k_paths]
    extra = [p for p in k_paths if p not in r_paths]
    if isinstance(kernel_out, dict) and isinstance(ref_out, dict):
        parts = ([f"missing {', '.join(missing)} (the reference has them)"] if missing else []) + \
                ([f"has {', '.join(extra)} the reference lacks"] if extra else [])
        message = f"{what}: the kernel's dict " + "; ".join(parts)
    else:
        message = f"{what}: the kernel returns {_kind(kernel_out)}, the reference {_kind(ref_out)}"
    if len(k_leaves) != len(r_leaves):
        message += f" ({len(k_leaves)} arrays against {len(r_leaves)})"
    findings.append(Finding("error", "output-structure", message + ": return the same structure as the reference "
                            "(same container types, dict keys and number of arrays)", view="diff",
                            data={"kernel": str(jax.tree.structure(kernel_out)), "reference": str(jax.tree.structure(ref_out))}))
    if common:
        return [(name(k_paths[p][0]), k_paths[p][1], r_paths[p][1]) for p in common], findings
    if len(k_leaves) == len(r_leaves):  # e.g. a tuple against a dict: compare in order, named after both
        return [(f"{name(kp)} vs reference{keystr(rp)}", k, r) for (kp, k), (rp, r) in zip(k_leaves, r_leaves)], findings
    return [], findings


def leaf_findings(name: str, kernel, reference) -> tuple[bool, list[Finding]]:
    """(values comparable, findings) for one pair of leaves: shapes must agree, dtypes should."""
    findings = []
    k_shape, r_shape = tuple(np.shape(kernel)), tuple(np.shape(reference))
    if k_shape != r_shape:
        findings.append(Finding("error", "output-shape", f"{name}: the kernel gives {_spec(kernel)}, the reference "
                                f"{_spec(reference)}: check out_shape and the grid (or the reference)", view="diff"))
        return False, findings
    k_dtype, r_dtype = np.asarray(kernel).dtype, np.asarray(reference).dtype
    if k_dtype != r_dtype:
        findings.append(Finding("error", "output-dtype", f"{name}: the kernel gives {k_dtype}, the reference {r_dtype}: "
                                "set out_shape's dtype (or cast the reference) so both agree; values are still compared "
                                f"at the reference's tolerance", view="diff"))
    return True, findings
