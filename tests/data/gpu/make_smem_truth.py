"""Remakes tests/data/gpu/smem_truth.json: XLA:GPU's shared-memory verdict, deviceless, on Pallas
kernels of several shapes over block / num_stages / num_warps sweeps and three chips, beside the
inspector's estimate-only verdict on the same kernel (tests/test_gpu_verdict.py holds the two
against each other: the estimate may say "undecided", never the wrong thing).

Each row: the kernel (a name in KERNELS), its params, the chip, the compiler's verdict ("fits" with
the launch's dynamic shared memory, or "does not fit" with what it requested) and the estimate's
(verdict, low, high). jax's own GPU kernels (attention, softmax) are held out: nothing in the
estimate was written against them. Mosaic GPU kernels (Hopper) fail at lowering when over 227 KiB;
a fitting one's figure is its module's launch (kernels/mosaic_gpu.py). Compiles are cheap: small
arrays, compile only, about a second each.

    .venv/bin/python tests/data/gpu/make_smem_truth.py               # every compile (minutes)
    .venv/bin/python tests/data/gpu/make_smem_truth.py --estimates   # the estimate's columns only (seconds)
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = Path(__file__).with_name("smem_truth.json")
CHIPS = ("h100", "h200", "a100")
MOSAIC_CHIPS = ("h100", "h200")  # Mosaic GPU is Hopper's
# Mosaic GPU checks its kernels at lowering against this figure whatever the target (Hopper's opt-in
# limit per block): the row's verdict compares its figure with the target's own
_MOSAIC_REFUSAL = re.compile(r"Mosaic GPU kernel exceeds available shared memory: smem_bytes=(\d+)")
# what a change of which says "remake": the compiler is jaxlib's XLA:GPU and Triton, through the CUDA plugin
VERSIONED = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt")


# ------------------------------------------------------------------ the kernels (small arrays: one or two blocks)

def matmul_loop(bm: int, bn: int, bk: int, stages: int, warps: int):
    """samples/gpu_matmul.py's matmul: (bm, K) x (K, bn) blocks, the K loop in the kernel (two loop loads)."""
    sys.path.insert(0, str(ROOT / "samples"))
    import jax
    import jax.numpy as jnp
    from gpu_matmul import matmul

    k = 4 * bk
    args = [jax.ShapeDtypeStruct((bm, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, bn), jnp.bfloat16)]
    return (lambda x, y: matmul(x, y, bm=bm, bn=bn, bk=bk, stages=stages, warps=warps)), args


def matmul_whole(bm: int, bn: int, bk: int, stages: int, warps: int):
    """One dot of whole (bm, bk) x (bk, bn) blocks, no loop in the kernel."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = plt.dot(x_ref[...], y_ref[...]).astype(o_ref.dtype)

    def f(x, y):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((bm, bn), jnp.bfloat16), grid=(1,),
            in_specs=[pl.BlockSpec((bm, bk), lambda i: (0, 0)), pl.BlockSpec((bk, bn), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((bm, bn), lambda i: (0, 0)),
            compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(x, y)
    return f, [jax.ShapeDtypeStruct((bm, bk), jnp.bfloat16), jax.ShapeDtypeStruct((bk, bn), jnp.bfloat16)]


def elementwise(bm: int, bn: int, stages: int, warps: int):
    """x * 2 + y on (bm, bn) f32 blocks, a grid of two."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + y_ref[...]

    spec = pl.BlockSpec((bm, bn), lambda i: (i, 0))

    def f(x, y):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2 * bm, bn), jnp.float32), grid=(2,),
                              in_specs=[spec, spec], out_specs=spec,
                              compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(x, y)
    return f, [jax.ShapeDtypeStruct((2 * bm, bn), jnp.float32)] * 2


def row_sum(bm: int, bn: int, stages: int, warps: int):
    """The sum of each row of a (bm, bn) f32 block (a reduction across the threads of a block)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sum(x_ref[...], axis=1)

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2 * bm,), jnp.float32), grid=(2,),
                              in_specs=[pl.BlockSpec((bm, bn), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((bm,), lambda i: (i,)),
                              compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(x)
    return f, [jax.ShapeDtypeStruct((2 * bm, bn), jnp.float32)]


def row_sum_loop(bm: int, bn: int, bk: int, stages: int, warps: int):
    """Row sums of a (bm, 4 * bk) f32 block walked in (bm, bk) tiles by a loop (a loop load no dot reads)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    del bn
    k = 4 * bk

    def kernel(x_ref, o_ref):
        def step(i, acc):
            return acc + jnp.sum(x_ref[:, pl.ds(i * bk, bk)], axis=1)
        o_ref[...] = jax.lax.fori_loop(0, k // bk, step, jnp.zeros((bm,), jnp.float32))

    def f(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((bm,), jnp.float32), grid=(1,),
                              in_specs=[pl.BlockSpec((bm, k), lambda i: (0, 0))],
                              out_specs=pl.BlockSpec((bm,), lambda i: (0,)),
                              compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(x)
    return f, [jax.ShapeDtypeStruct((bm, k), jnp.float32)]


def attention(bq: int, bk: int, d: int, stages: int, warps: int):
    """Flash-attention-like: a (bq, d) q block, k and v blocks of (4 * bk, d) walked in bk tiles by a
    loop (two loop loads, two dots, a running softmax)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    n = 4 * bk

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q = q_ref[...]

        def step(i, carry):
            m, l, acc = carry
            k = k_ref[pl.ds(i * bk, bk), :]
            v = v_ref[pl.ds(i * bk, bk), :]
            s = plt.dot(q, k, trans_b=True)
            m_new = jnp.maximum(m, jnp.max(s, axis=1))
            p = jnp.exp(s - m_new[:, None])
            alpha = jnp.exp(m - m_new)
            acc = acc * alpha[:, None] + plt.dot(p.astype(v.dtype), v)
            return m_new, l * alpha + jnp.sum(p, axis=1), acc

        init = (jnp.full((bq,), -jnp.inf, jnp.float32), jnp.zeros((bq,), jnp.float32), jnp.zeros((bq, d), jnp.float32))
        _, l, acc = jax.lax.fori_loop(0, n // bk, step, init)
        o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)

    def f(q, k, v):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((bq, d), jnp.bfloat16), grid=(1,),
            in_specs=[pl.BlockSpec((bq, d), lambda i: (0, 0)), pl.BlockSpec((n, d), lambda i: (0, 0)),
                      pl.BlockSpec((n, d), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((bq, d), lambda i: (0, 0)),
            compiler_params=plt.CompilerParams(num_warps=warps, num_stages=stages))(q, k, v)
    return f, [jax.ShapeDtypeStruct((bq, d), jnp.bfloat16)] + [jax.ShapeDtypeStruct((n, d), jnp.bfloat16)] * 2


def mosaic_add(bm: int, bn: int, steps: int):
    """x + y on (bm, bn) f32 blocks over a grid of four, as a Mosaic GPU kernel (Hopper): its
    BlockSpecs are copied into shared memory, up to ``max_concurrent_steps`` steps at once."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((bm, bn), lambda i: (i, 0))

    def f(x, y):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4 * bm, bn), jnp.float32), grid=(4,),
                              in_specs=[spec, spec], out_specs=spec,
                              compiler_params=plgpu.CompilerParams(max_concurrent_steps=steps))(x, y)
    return f, [jax.ShapeDtypeStruct((4 * bm, bn), jnp.float32)] * 2


def jax_mha(bq: int, bk: int, d: int, stages: int, warps: int):
    """jax's own flash attention for GPUs (jax.experimental.pallas.ops.gpu.attention.mha), forward:
    a kernel none of this file's rules were written against."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import attention as jax_attention

    sizes = jax_attention.BlockSizes(block_q=bq, block_k=bk)
    args = [jax.ShapeDtypeStruct((1, 4 * max(bq, bk), 2, d), jnp.float16)] * 3
    return (lambda q, k, v: jax_attention.mha(q, k, v, None, block_sizes=sizes, num_stages=stages,
                                              num_warps=warps)), args


def jax_softmax(n: int, warps: int):
    """jax's own softmax for GPUs (jax.experimental.pallas.ops.gpu.softmax) over rows of n f32."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import softmax as jax_softmax_ops

    return (lambda x: jax_softmax_ops.softmax(x, axis=-1, num_warps=warps)), [jax.ShapeDtypeStruct((64, n), jnp.float32)]


KERNELS = {"jax_mha": jax_mha, "jax_softmax": jax_softmax, "mosaic_add": mosaic_add, "matmul_loop": matmul_loop, "matmul_whole": matmul_whole, "elementwise": elementwise,
           "row_sum": row_sum, "row_sum_loop": row_sum_loop, "attention": attention}


def plan() -> list[dict]:
    """Every (kernel, params, chip) the truth file holds, in its order."""
    sweeps: list[tuple[str, list[dict]]] = [
        ("matmul_loop", [dict(bm=bm, bn=bn, bk=bk, stages=s, warps=w)
                         for (bm, bn, bk), s, w in itertools.product(
                             [(64, 64, 32), (128, 128, 64), (128, 64, 128), (256, 128, 64), (256, 256, 128)],
                             [1, 2, 3, 4], [4, 8])]),
        ("matmul_whole", [dict(bm=bm, bn=bn, bk=bk, stages=s, warps=w)
                          for (bm, bn, bk), s, w in itertools.product(
                              [(64, 64, 64), (128, 128, 128), (128, 256, 256), (256, 256, 256)], [1, 3], [4, 8])]),
        ("elementwise", [dict(bm=bm, bn=bn, stages=s, warps=4)
                         for (bm, bn), s in itertools.product([(64, 128), (128, 256), (256, 256)], [1, 3])]),
        ("row_sum", [dict(bm=bm, bn=bn, stages=s, warps=w)
                     for (bm, bn), s, w in itertools.product([(64, 256), (128, 512)], [1, 3], [4, 8])]),
        ("row_sum_loop", [dict(bm=bm, bn=0, bk=bk, stages=s, warps=4)
                          for (bm, bk), s in itertools.product([(64, 128), (128, 256)], [1, 3, 4])]),
        ("attention", [dict(bq=bq, bk=bk, d=d, stages=s, warps=4)
                       for (bq, bk, d), s in itertools.product([(64, 64, 64), (128, 64, 128), (128, 128, 128)],
                                                               [1, 2, 3, 4])]),
        ("jax_mha", [dict(bq=bq, bk=bk, d=d, stages=s, warps=4)
                     for bq, bk, d, s in itertools.product([64, 128], [64, 128], [64, 128], [2, 3, 4])]),
        ("jax_softmax", [dict(n=n, warps=w) for n, w in itertools.product([1024, 4096, 16384], [4, 8])]),
    ]
    mosaic = [dict(bm=bm, bn=bn, steps=s) for (bm, bn), s in itertools.product([(64, 128), (128, 128), (128, 256)],
                                                                                [1, 2, 4])]
    return [{"kernel": kernel, "params": params, "chip": chip}
            for chip in CHIPS for kernel, grid in sweeps for params in grid] + \
        [{"kernel": "mosaic_add", "params": params, "chip": chip} for chip in MOSAIC_CHIPS for params in mosaic]


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def compiler_verdict(row: dict) -> dict:
    """XLA:GPU's verdict on the row's kernel and chip: fits with the launch's shared memory, or
    does not with what it requested (its RESOURCE_EXHAUSTED refusal)."""
    import jax

    from inspector.base.chips import get_chip
    from inspector.families.gpu.compile.deviceless import compile_deviceless
    from inspector.families.gpu.compile.errors import shared_memory_refusal
    from inspector.families.gpu.jax.target_configs import spec_text
    from inspector.families.gpu.kernels.mosaic_gpu import mosaic_launches
    from inspector.families.gpu.kernels.thunks import kernels

    fn, args = KERNELS[row["kernel"]](**row["params"])
    limit = get_chip(row["chip"]).shared_mem_per_block
    try:
        compiled = compile_deviceless(fn, args, spec_text(get_chip(row["chip"]).target_config))
        # a Mosaic GPU kernel is a custom call the thunk sequence gives no launch for: its module does
        launched = kernels(compiled.thunk_sequence) + mosaic_launches(compiled.stablehlo)
    except ValueError as err:  # Mosaic GPU's own check, at lowering
        match = _MOSAIC_REFUSAL.search(str(err))
        if match is None:
            raise
        asked = int(match.group(1))
        return {"compiler": "fits" if asked <= limit else "does not fit", "compiler_bytes": asked,
                "available_bytes": limit}
    except jax.errors.JaxRuntimeError as err:
        refusal = shared_memory_refusal(str(err))
        if refusal is None:
            raise
        return {"compiler": "does not fit", "compiler_bytes": refusal.requested_bytes,
                "available_bytes": refusal.available_bytes}
    return {"compiler": "fits", "compiler_bytes": max(k.shared_memory_bytes or 0 for k in launched)}


@functools.lru_cache(maxsize=None)
def _traced(kernel: str, params: tuple):
    """The kernel's pallas_call as the inspector reads it (one trace serves every chip)."""
    import jax

    from inspector.pallas.discovery import find_pallas_calls

    fn, args = KERNELS[kernel](**dict(params))
    (found,) = find_pallas_calls(jax.make_jaxpr(fn)(*args))
    return found.info


def estimate_verdict(row: dict) -> dict:
    """The estimate-only verdict (no compile): the inspector's shared-memory budget of the kernel on the chip."""
    from inspector.base.chips import get_chip
    from inspector.pallas.budgets import budget

    b = budget(_traced(row["kernel"], tuple(sorted(row["params"].items()))), get_chip(row["chip"]))
    assert b is not None
    return {"estimate": {"fits": "fits", "over": "does not fit"}.get(b.verdict, "undecided"),
            "estimate_low": b.certain_bytes, "estimate_high": b.total_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimates", action="store_true", help="keep the compiler's columns, remake the estimate's")
    opts = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import inspector  # noqa: F401  (sets up the environment the inspector's compiles run in)

    warnings.simplefilter("ignore", DeprecationWarning)
    old = json.loads(OUT.read_text()) if opts.estimates else None
    if old is not None and old["versions"] != versions():
        sys.exit(f"{OUT.name} was made with {old['versions']}, this environment has {versions()}: remake it whole")
    rows = []
    if old is not None and len(old["rows"]) != len(plan()):
        sys.exit("the plan changed: remake it whole")
    for i, row in enumerate(plan()):
        if old is not None:
            kept = old["rows"][i]
            assert {k: kept[k] for k in ("kernel", "params", "chip")} == row, "the plan changed: remake it whole"
            row = {**row, **{k: kept[k] for k in kept if k.startswith("compiler") or k == "available_bytes"}}
        else:
            row.update(compiler_verdict(row))
        row.update(estimate_verdict(row))
        rows.append(row)
        print(i, row, flush=True)
    from inspector.base.atomic import write_atomic

    head = {"what": "XLA:GPU's shared-memory verdict on Pallas kernels, compiled deviceless, beside the inspector's "
                    "estimate-only verdict (tests/data/gpu/make_smem_truth.py)", "versions": versions()}
    # a row a line: a remake's diff shows the rows that changed
    write_atomic(OUT, json.dumps(head)[:-1] + ', "rows": [\n' + ",\n".join(json.dumps(r) for r in rows) + "\n]}\n")


if __name__ == "__main__":
    main()
