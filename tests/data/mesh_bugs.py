"""pl.kernel kernels with emit_pipeline, for the tests: one whose output index map misses half
the output blocks, one whose index map reads the core index (a value of the kernel), one with
complementary pl.when guards, one with run-time sized blocks, one that raises when run."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def half_written(x):
    """Copies (256, 256) blocks, but the output index map returns column block 0 only: block
    column 1 of the output is never written (and column 0 is revisited out of order)."""
    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(_copy, grid=(2, 2),
                            in_specs=[pl.BlockSpec((256, 256), lambda i, j: (i, j))],
                            out_specs=pl.BlockSpec((256, 256), lambda i, j: (i, 0)))(x_hbm, o_hbm)

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     mesh=pltpu.create_tensorcore_mesh("core"))(x)


def core_indexed(x):
    """Each core's pipeline offsets its blocks by the core index: a value of the kernel, which an
    index map outside the kernel cannot evaluate."""
    def kernel(x_hbm, o_hbm):
        core = jax.lax.axis_index("core")
        pltpu.emit_pipeline(_copy, grid=(2,),
                            in_specs=[pl.BlockSpec((256, 256), lambda i: (i + core, 0))],
                            out_specs=pl.BlockSpec((256, 256), lambda i: (i + core, 0)))(x_hbm, o_hbm)

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     mesh=pltpu.create_tensorcore_mesh("core"))(x)


def bounded_tail(x):
    """Copies a (1000, 128) array in row blocks of 256 with pl.BoundedSlice: the last block is
    a 232-row slice (a DMA whose size is computed in the kernel), as tokamax's loss blocks are."""
    n, block = x.shape[0], 256

    def rows(i):
        return (pl.ds(i * block, jnp.minimum(block, n - i * block)), 0)

    def kernel(x_hbm, o_hbm):
        pltpu.emit_pipeline(_copy, grid=(pl.cdiv(n, block),),
                            in_specs=[pl.BlockSpec((pl.BoundedSlice(block), 128), rows)],
                            out_specs=pl.BlockSpec((pl.BoundedSlice(block), 128), rows))(x_hbm, o_hbm)

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     mesh=pltpu.create_tensorcore_mesh("core"))(x)


def when_complement(x, y):
    """tokamax's accumulation: pl.when(k == 0) sets, pl.when(k != 0) adds; one dot per step runs."""
    def body(x_ref, y_ref, o_ref):
        k = pl.program_id(2)

        @pl.when(k == 0)
        def _():
            o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(k != 0)
        def _():
            o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    def kernel(x_hbm, y_hbm, o_hbm):
        pltpu.emit_pipeline(body, grid=(2, 2, 2),
                            in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
                            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)))(x_hbm, y_hbm, o_hbm)

    return pl.kernel(kernel, out_type=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), jnp.float32),
                     mesh=pltpu.create_tensorcore_mesh("core"))(x, y)


def matmul_reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


def _boom(a):
    raise ValueError("boom from the host")


def raises_on_host(x):
    """Raises only when run (a host callback): diff reports it, and --debug shows the traceback."""
    return jax.pure_callback(_boom, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def reference(x):
    return x


INSPECT = {
    "half_written": {"args": "f32[512,512]", "reference": "reference"},
    "core_indexed": {"args": "f32[512,256]", "reference": "reference"},
    "raises_on_host": {"args": "f32[8]", "reference": "reference"},
    "bounded_tail": {"args": "f32[1000,128]", "reference": "reference"},
    "when_complement": {"args": "f32[256,256] f32[256,256]", "reference": "matmul_reference"},
}
