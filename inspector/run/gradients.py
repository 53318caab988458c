"""The gradients checked too: the vjp of kernel and reference with the same random cotangent,
w.r.t. every float input, compared leaf by leaf; jax's own autodiff of a pallas_call that raises
is said as such (the kernel needs a custom_vjp)."""
from __future__ import annotations

import dataclasses
import traceback

import numpy as np

from ..base.chips import Chip
from ..base.findings import Finding
from ..base.user_code import describe_error
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .outputs import coarse_blocks, compare, error_map, leaf_findings, value_notes
from .trees import accumulations_of, by_leaf


def _autodiff_rule(err: BaseException) -> str | None:
    """'JVP rule' / 'transpose rule' when jax's own autodiff of pallas_call raised (e.g. an
    AssertionError with no message for a kernel that reads pl.program_id)."""
    names = [f.name for f in traceback.extract_tb(err.__traceback__)] if err.__traceback__ else []
    for name, rule in (("_pallas_call_jvp_rule", "JVP rule"), ("_pallas_call_transpose_rule", "transpose rule")):
        if name in names:
            return rule
    return None


def gradients(target, kernel, reference, args, kwargs, atol, rtol, seed, sim: Chip | None):
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
        (k_grads, err), text = interpreted.plain(vjp_of(kernel), (), {}), ""
    if err is not None:
        if (rule := _autodiff_rule(err)) is not None:
            return None, [Finding("error", "kernel-raised",
                                  f"{target.name} (gradient): jax cannot differentiate this pallas_call by itself: its {rule} "
                                  f"raised {type(err).__name__}{': ' + str(err).strip() if str(err).strip() else ''} (a kernel "
                                  "that reads pl.program_id, or writes an output in place, needs a jax.custom_vjp with a "
                                  "backward kernel)", view="diff", data={"type": type(err).__name__, "message": str(err)})]
        return None, [interpreted.failure_finding(err, text, f"{target.name} (gradient)", sim, False) if sim is not None else
                      Finding("error", "kernel-raised", f"{target.name} (gradient): " + describe_error(err, target.file, "raised"), view="diff")]
    r_grads, r_err = interpreted.plain(vjp_of(reference), (), {})
    accs = accumulations_of(vjp_of(reference), (), {}) if r_err is None else None
    accumulated = by_leaf(r_grads, accs)
    if r_err is not None:
        raise ValueError(describe_error(r_err, target.file, f"raised while differentiating the reference {target.reference_name}"))
    names = [target.arg_names[i] for i in wrt]
    diffs, findings = [], []
    for name, k, r in zip(names, k_grads, r_grads):
        comparable, notes = leaf_findings(f"d/d{name}", k, r)
        findings += notes
        if not comparable:
            continue
        leaf, bad, nan, diff = compare(f"d/d{name}", k, r, atol, rtol, accumulated.get(id(r)))
        findings += value_notes(leaf)
        if bad.ndim:
            leaf = dataclasses.replace(leaf, error_map=error_map(bad, nan, diff, coarse_blocks(bad.shape), "coarse"))
        diffs.append(leaf)
    return diffs, findings
