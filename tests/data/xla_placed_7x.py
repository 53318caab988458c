"""Kernels that vary one thing at a time to see which operands XLA hands a Pallas kernel whole in
VMEM (`S(1)` in the optimized HLO, outside its scoped limit) on TPU7x, against v6e: an argument
passed straight, an input a fusion computes, an argument with work before, an output read after;
the whole operand's size (``mib``), the number of inputs (``n``), a whole block at a constant
index (``const``). Each input is f32[mib * 256, 1024] read in ``steps`` row blocks (or whole at
block index 0 where ``const``); the output is the sum of the inputs, in the same row blocks.
Measured with libtpu 0.0.42.1 (tests/test_vmem_xla_placed_7x.py, BENCHMARKS.md)."""

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _sum(n_in, const):
    def kernel(*refs):
        ins, o_ref = refs[:n_in], refs[n_in]
        rows = o_ref.shape[0]
        acc = None
        for k, r in enumerate(ins):
            v = r[pl.ds(0, rows), :] if k in const else r[...]  # a whole block: its first rows
            acc = v if acc is None else acc + v
        o_ref[...] = acc * 2
    return kernel


def _kernel(xs, steps, const=(), extra=None, limit=None):
    """``extra``: an operand passed in HBM only to be computed before the kernel; ``limit``: the
    kernel's vmem_limit_bytes in MiB (None: the chip's default scoped limit)."""
    rows, dim = xs[0].shape
    block = rows // steps
    row_spec = pl.BlockSpec((block, dim), lambda i: (i, 0))
    specs = [pl.BlockSpec(x.shape, lambda i: (0, 0)) if k in const else row_spec for k, x in enumerate(xs)]
    kernel = _sum(len(xs), set(const))
    operands = list(xs)
    if extra is not None:
        specs.append(pl.BlockSpec(memory_space=pltpu.HBM))
        operands.append(extra)
        inner = kernel

        def kernel(*refs):
            inner(*refs[:len(xs)], refs[-1])
    return pl.pallas_call(
        kernel, grid=(steps,), in_specs=specs, out_specs=row_spec,
        out_shape=jax.ShapeDtypeStruct((rows, dim), xs[0].dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit and limit * 2**20))(*operands)


def argument(*xs, steps=8, const=(), limit=None):
    """Every input passed straight from the caller; the kernel starts the program."""
    return _kernel(xs, steps, const, limit=limit)


def computed(*xs, steps=8, const=(), limit=None):
    """Every input made by a fusion (``x + 1``) just before the kernel."""
    return _kernel([x + 1 for x in xs], steps, const, limit=limit)


def computed_first(*xs, steps=8, const=(), limit=None):
    """The first input made by a fusion, the others passed straight."""
    return _kernel([xs[0] + 1, *xs[1:]], steps, const, limit=limit)


def work_before(*xs, steps=8, const=(), limit=None):
    """Inputs passed straight; the last argument z, computed first (``z * 3``), goes to the
    kernel in HBM: work before the kernel that writes z's size."""
    *ins, z = xs
    return _kernel(ins, steps, const, extra=z * 3, limit=limit)


def read_after(*xs, steps=8, const=(), limit=None):
    """Inputs passed straight; the kernel's output doubled by a fusion after it."""
    return _kernel(xs, steps, const, limit=limit) * 2


def _f32(mib, n=1):
    return " ".join([f"f32[{mib * 256},1024]"] * n)


INSPECT = {
    "argument": {"args": _f32(4)},
    "computed": {"args": _f32(4)},
    "computed_first": {"args": _f32(4, 2)},
    "work_before": {"args": f"{_f32(4)} f32[1024,1024]"},
    "read_after": {"args": _f32(4)},
}
