"""Kernels written with ``pl.kernel`` / ``pl.core_map`` over a core mesh rather than with
``pallas_call``: the style of tokamax and qwix. The kernel gets its operands in HBM and moves
blocks itself (``pltpu.emit_pipeline``, ``pltpu.sync_copy``, run_scoped VMEM).

    inspector check samples/mesh_kernels.py:pipelined_matmul --target tpu-v5e,tpu-v6e,tpu-7x
    inspector show samples/mesh_kernels.py:quantized_matmul --view pallas --target tpu-v5e
    inspector diff samples/mesh_kernels.py:pipelined_matmul
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

_CORES = "core"


def _matmul_body(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def pipelined_matmul(x, y, bm: int = 256, bk: int = 512, bn: int = 256):
    """x @ y with pl.kernel on the chip's TensorCores, emit_pipeline walking (m, n, k) blocks."""
    m, k = x.shape
    n = y.shape[1]

    def kernel(x_hbm, y_hbm, o_hbm, acc_ref):
        pltpu.emit_pipeline(
            functools.partial(_matmul_body, acc_ref=acc_ref),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            core_axis_name=_CORES,
            dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL, pltpu.ARBITRARY),
        )(x_hbm, y_hbm, o_hbm)

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct((m, n), x.dtype),
                     mesh=pltpu.create_tensorcore_mesh(_CORES),
                     scratch_types=[pltpu.VMEM((bm, bn), jnp.float32)])(x, y)


def xla_matmul(x, y, bm: int = 256, bk: int = 512, bn: int = 256):
    del bm, bk, bn
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


INSPECT = {
    "pipelined_matmul": {
        "args": "bf16[1024,2048] bf16[2048,1024]",
        "reference": "xla_matmul",
        "params": {"bm": [256, 512, 1024], "bk": [512, 1024, 2048], "bn": [256, 512, 1024]},
    },
}


def quantized_matmul(x, sx, y, sy, bm: int = 256, bk: int = 512, bn: int = 256):
    """int8 x int8 -> f32 with per-row (sx) and per-column (sy) scales, qwix's style: pl.kernel on
    the TensorCores, emit_pipeline over (m, n, k), an int32 accumulator in VMEM scratch."""
    m, k = x.shape
    n = y.shape[1]

    def body(x_ref, sx_ref, y_ref, sy_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.int32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = (acc_ref[...].astype(jnp.float32) * sx_ref[:, :1] * sy_ref[:1, :]).astype(o_ref.dtype)

    def kernel(x_hbm, sx_hbm, y_hbm, sy_hbm, o_hbm, acc_ref):
        pltpu.emit_pipeline(
            functools.partial(body, acc_ref=acc_ref),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bm, 128), lambda i, j, kk: (i, 0)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
                      pl.BlockSpec((8, bn), lambda i, j, kk: (0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            core_axis_name=_CORES,
            dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL, pltpu.ARBITRARY),
        )(x_hbm, sx_hbm, y_hbm, sy_hbm, o_hbm)

    sx = jnp.broadcast_to(sx, (m, 128))  # lane-dense scales: one block per row block
    sy = jnp.broadcast_to(sy, (8, n))
    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                     mesh=pltpu.create_tensorcore_mesh(_CORES), name="quantized_matmul_kernel",
                     scratch_types=[pltpu.VMEM((bm, bn), jnp.int32)])(x, sx, y, sy)


def quantized_reference(x, sx, y, sy, bm: int = 256, bk: int = 512, bn: int = 256):
    del bm, bk, bn
    acc = jnp.dot(x, y, preferred_element_type=jnp.int32).astype(jnp.float32)
    return (acc * sx * sy).astype(jnp.bfloat16)


def _quantized_args():
    import numpy as np

    rng = np.random.default_rng(0)
    return (jnp.asarray(rng.integers(-8, 8, (512, 1024)), jnp.int8), jnp.asarray(rng.random((512, 1)) / 64, jnp.float32),
            jnp.asarray(rng.integers(-8, 8, (1024, 512)), jnp.int8), jnp.asarray(rng.random((1, 512)) / 64, jnp.float32))


def scaled_add(x, y):
    """x + 2 y with pl.core_map: each TensorCore copies its share of rows into run_scoped VMEM,
    adds, and copies the result back (the caller's refs, through pl.run_state)."""
    rows = x.shape[0]
    mesh = pltpu.create_tensorcore_mesh(_CORES)
    cores = mesh.shape[_CORES]
    chunk = 64

    def stateful(refs):
        x_ref, y_ref, o_ref = refs

        @pl.core_map(mesh)
        def _():
            share = rows // cores
            base = jax.lax.axis_index(_CORES) * share

            def step(c, carry):
                sl = pl.ds(pl.multiple_of(base + c * chunk, chunk), chunk)

                def scoped(xv, yv):
                    pltpu.sync_copy(x_ref.at[sl], xv)
                    pltpu.sync_copy(y_ref.at[sl], yv)
                    xv[...] = xv[...] + 2 * yv[...]
                    pltpu.sync_copy(xv, o_ref.at[sl])

                pl.run_scoped(scoped, pltpu.VMEM((chunk, x.shape[1]), x.dtype), pltpu.VMEM((chunk, x.shape[1]), x.dtype))
                return carry

            jax.lax.fori_loop(0, share // chunk, step, 0)

    return pl.run_state(stateful)((x, y, jnp.zeros_like(x)))[2]


def scaled_add_reference(x, y):
    return x + 2 * y


def sparse_core_gather(x, indices):
    """Rows of x at ``indices`` on the SparseCore's vector subcores (pl.kernel over a
    VectorSubcoreMesh): each subcore copies its share of the indices into VMEM and gathers those
    rows with one indirect DMA. SparseCores exist on v5p, v6e and TPU7x (not v5e)."""
    from jax.experimental.pallas import tpu_sc as plsc

    mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore")
    workers = mesh.num_cores * mesh.num_subcores
    per = indices.shape[0] // workers

    def kernel(x_hbm, i_hbm, o_hbm, i_vmem, rows_vmem):
        w = jax.lax.axis_index("core") * mesh.num_subcores + jax.lax.axis_index("subcore")
        share = pl.ds(w * per, per)
        pltpu.sync_copy(i_hbm.at[share], i_vmem)
        pltpu.sync_copy(x_hbm.at[i_vmem], rows_vmem)
        pltpu.sync_copy(rows_vmem, o_hbm.at[share])

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct((indices.shape[0], x.shape[1]), x.dtype), mesh=mesh,
                     name="sc_gather",
                     scratch_types=[pltpu.VMEM((per,), jnp.int32), pltpu.VMEM((per, x.shape[1]), x.dtype)])(x, indices)


def gather_reference(x, indices):
    return x[indices]


def _gather_args():
    import numpy as np

    rng = np.random.default_rng(0)
    return jnp.asarray(rng.standard_normal((4096, 128)), jnp.float32), jnp.asarray(rng.integers(0, 4096, 1024), jnp.int32)


INSPECT.update({
    "quantized_matmul": {"args": _quantized_args, "reference": "quantized_reference",
                         "params": {"bm": [256, 512], "bk": [512, 1024], "bn": [256, 512]}},
    "scaled_add": {"args": "f32[1024,256] f32[1024,256]", "reference": "scaled_add_reference"},
    "sparse_core_gather": {"args": _gather_args, "reference": "gather_reference"},
})
