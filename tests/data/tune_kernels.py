"""Small kernels for the tune tests: a tiled matmul whose candidates end every way a sweep knows.

bn=64 is refused by Mosaic (a block's last dim must be a multiple of 128); pad_mib adds a VMEM
scratch of that many MiB, so pad_mib=40 passes v5e's 16 MiB scoped limit on the estimate alone
(pruned, never compiled); bm=96 does not divide the rows (the function raises: failed)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(a_ref, b_ref, o_ref, acc_ref, *pad):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def mm(a, b, bm: int = 256, bn: int = 256, bk: int = 256, pad_mib: int = 0):
    (m, k), (_, n) = a.shape, b.shape
    if m % bm or n % bn or k % bk:
        raise ValueError(f"mm: blocks ({bm}, {bn}, {bk}) do not divide ({m}, {n}, {k})")
    scratch = [pltpu.VMEM((bm, bn), jnp.float32)]
    if pad_mib:
        scratch.append(pltpu.VMEM((pad_mib * 256, 1024), jnp.float32))  # pad_mib MiB
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=scratch,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="mm",
    )(a, b)


INSPECT = {
    "mm": {
        "args": "bf16[512,512] bf16[512,512]",
        "params": {"bm": [256, 128], "bn": [256, 64], "bk": [512], "pad_mib": [0, 40]},
        "shapes": ["bf16[512,512] bf16[512,512]", "bf16[256,512] bf16[512,256]"],
    },
}
