"""Two kernels in a row: `forward` writes blocks 1..4 of its (5, 8, 128) output (block 0 never),
and the next kernel loads every block of it, last step first. Whether block 0 is an error depends
on whether the second kernel reads it before writing it, as axlearn's Mamba scan backward does not
(it zeroes the state before the first chunk at its last step, then reads it)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

N = 4


def forward(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return pl.pallas_call(kernel, grid=(N,), in_specs=[pl.BlockSpec((None, 8, 128), lambda s: (s, 0, 0))],
                          out_specs=pl.BlockSpec((None, 8, 128), lambda s: (s + 1, 0, 0)),
                          out_shape=jax.ShapeDtypeStruct((N + 1, 8, 128), x.dtype), interpret=True)(x)


def _backward(states, body):
    return pl.pallas_call(body, grid=(N,), in_specs=[pl.BlockSpec((None, 8, 128), lambda s: (N - 1 - s, 0, 0))],
                          out_specs=pl.BlockSpec((None, 8, 128), lambda s: (s, 0, 0)),
                          out_shape=jax.ShapeDtypeStruct((N, 8, 128), states.dtype), interpret=True)(states)


def zeroed_first(x):
    """Block 0 is loaded at the last step only, and written there before it is read."""
    def body(h_ref, o_ref):
        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            h_ref[...] = jnp.zeros_like(h_ref)

        o_ref[...] = h_ref[...] + 1.0

    return _backward(forward(x), body)


def zeroed_every_step(x):
    def body(h_ref, o_ref):
        h_ref[...] = jnp.zeros_like(h_ref)
        o_ref[...] = h_ref[...] + 1.0

    return _backward(forward(x), body)


def read_first(x):
    """The write comes after the read: block 0's garbage reaches the result."""
    def body(h_ref, o_ref):
        o_ref[...] = h_ref[...] + 1.0

        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            h_ref[...] = jnp.zeros_like(h_ref)

    return _backward(forward(x), body)


def zeroed_at_the_wrong_step(x):
    """The write is guarded by the first step, but block 0 is loaded at the last."""
    def body(h_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            h_ref[...] = jnp.zeros_like(h_ref)

        o_ref[...] = h_ref[...] + 1.0

    return _backward(forward(x), body)


def partly_zeroed(x):
    def body(h_ref, o_ref):
        @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
        def _():
            h_ref[0:4, :] = jnp.zeros((4, 128), h_ref.dtype)

        o_ref[...] = h_ref[...] + 1.0

    return _backward(forward(x), body)


_ARGS = "f32[4,8,128]"
INSPECT = {name: {"args": _ARGS} for name in
           ("zeroed_first", "zeroed_every_step", "read_first", "zeroed_at_the_wrong_step", "partly_zeroed")}
