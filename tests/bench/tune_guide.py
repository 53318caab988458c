"""The blocked bf16 matmul with a fused right-hand-side transpose, as JAX's Pallas TPU matmul guide
times it on a v5e (docs/pallas/tpu/matmul: "Fused right-hand-side transpose"): x (m, k) times y
given as (n, k), contracted on k inside the kernel, an f32 accumulator in VMEM, the k axis last
and "arbitrary". Written here for bench_tune.py: a kernel the tuner's tests never compile.

INSPECT offers the 48 candidates of the 4096^3 sweep (bm x bk x bn), the guide's two
configurations among them (128/128/128, its default, and 512/1024/1024)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _body(x_ref, y_ref, z_ref, acc_ref, *, steps):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jax.lax.dot_general(x_ref[...], y_ref[...], (((1,), (1,)), ((), ())),
                                        preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == steps - 1)
    def _write():
        z_ref[...] = acc_ref[...].astype(z_ref.dtype)


def matmul_t(x, y_t, bm: int = 128, bk: int = 128, bn: int = 128):
    """x @ y_t.T, with y_t of shape (n, k) (the physical transposed layout the guide times)."""
    (m, k), (n, _) = x.shape, y_t.shape
    return pl.pallas_call(
        functools.partial(_body, steps=k // bk),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="matmul_t",
    )(x, y_t)


INSPECT = {
    "matmul_t": {
        "args": "bf16[4096,4096] bf16[4096,4096]",
        "params": {"bm": [128, 256, 512, 1024], "bk": [128, 256, 512, 1024], "bn": [128, 512, 1024]},
    },
}
