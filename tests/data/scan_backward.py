"""A linear recurrence h_t = a_t * h_{t-1} + x_t as two Pallas TPU kernels under a custom_vjp:
the forward walks time in chunks, the backward walks it in reverse (index maps like
``lambda b, t: (b, NT - 1 - t, 0)``) and writes eight gradient outputs, among them one written
only under ``pl.when`` at the last step of the reversed axis (dh0), one revisited across every
step of it (dw, accumulated), and a 5-D one (gcarry: the carry's gradient at chunk boundaries 1..NT).

Written for issue 56 (trust, round five): the grid walk called eight of 72 output blocks of such a
kernel "never written", an error, though its gradients match the reference: the blocks are
gcarry's boundary 0, which the caller never reads (``boundary_gradients`` takes it from dh0).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CHUNK = 8  # time steps per grid step


def _forward_kernel(a_ref, x_ref, h0_ref, h_ref, last_ref, carry):
    t = pl.program_id(1)

    @pl.when(t == 0)
    def _():
        carry[...] = h0_ref[...]

    def step(i, h):
        h = a_ref[:, pl.ds(i, 1), :] * h + x_ref[:, pl.ds(i, 1), :]
        h_ref[:, pl.ds(i, 1), :] = h
        return h

    carry[...] = jax.lax.fori_loop(0, CHUNK, step, carry[...])

    @pl.when(t == pl.num_programs(1) - 1)
    def _():
        last_ref[...] = carry[...]


def forward(a, x, h0):
    """(h, h_T): every state, and the last."""
    batch, steps, width = x.shape
    nt = steps // CHUNK
    seq = pl.BlockSpec((1, CHUNK, width), lambda b, t: (b, t, 0))
    row = pl.BlockSpec((1, 1, width), lambda b, t: (b, 0, 0))
    return pl.pallas_call(
        _forward_kernel, grid=(batch, nt),
        in_specs=[seq, seq, row], out_specs=[seq, row],
        out_shape=[jax.ShapeDtypeStruct(x.shape, jnp.float32), jax.ShapeDtypeStruct((batch, 1, width), jnp.float32)],
        scratch_shapes=[pltpu.VMEM((1, 1, width), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        name="scan_forward",
    )(a, x, h0)


def _backward_kernel(a_ref, h_ref, hprev_ref, g_ref, gT_ref,
                     dx_ref, da_ref, dh0_ref, dw_ref, gcarry_ref, gh_ref, ga_ref, count_ref, carry):
    t = pl.program_id(1)  # t = 0 is the LAST chunk of time
    nt = pl.num_programs(1)

    @pl.when(t == 0)
    def _():
        carry[...] = gT_ref[...]  # the gradient flowing into h_T from outside
        dw_ref[...] = jnp.zeros_like(dw_ref)
        count_ref[...] = jnp.zeros_like(count_ref)

    # gcarry: the carry's gradient at the chunk's right boundary (nt - t), a 5-D block; boundary 0
    # is dh0, an output of its own, so no step writes gcarry's first block (the caller drops it)
    gcarry_ref[0, 0] = carry[...]

    def step(j, gnext):
        i = CHUNK - 1 - j  # rows of the chunk in reverse
        gh = g_ref[:, pl.ds(i, 1), :] + gnext  # dL/dh_i
        dx_ref[:, pl.ds(i, 1), :] = gh
        da_ref[:, pl.ds(i, 1), :] = gh * hprev_ref[:, pl.ds(i, 1), :]
        gh_ref[:, pl.ds(i, 1), :] = gh
        ga_ref[:, pl.ds(i, 1), :] = gh * a_ref[:, pl.ds(i, 1), :]
        return gh * a_ref[:, pl.ds(i, 1), :]  # what reaches h_{i-1}

    carry[...] = jax.lax.fori_loop(0, CHUNK, step, carry[...])
    dw_ref[...] += jnp.sum(h_ref[...], axis=1, keepdims=True)  # revisited at every step of the reversed axis
    count_ref[...] += 1.0

    @pl.when(t == nt - 1)  # the last step of the reversed axis: time chunk 0
    def _():
        dh0_ref[...] = carry[...]


def backward(a, h, hprev, g, gT):
    batch, steps, width = h.shape
    nt = steps // CHUNK
    rev = pl.BlockSpec((1, CHUNK, width), lambda b, t: (b, nt - 1 - t, 0))
    row = pl.BlockSpec((1, 1, width), lambda b, t: (b, 0, 0))
    carry5 = pl.BlockSpec((1, 1, 1, 1, width), lambda b, t: (b, nt - t, 0, 0, 0))
    seq_shape = jax.ShapeDtypeStruct(h.shape, jnp.float32)
    row_shape = jax.ShapeDtypeStruct((batch, 1, width), jnp.float32)
    return pl.pallas_call(
        _backward_kernel, grid=(batch, nt),
        in_specs=[rev, rev, rev, rev, row],
        out_specs=[rev, rev, row, row, carry5, rev, rev, row],
        out_shape=[seq_shape, seq_shape, row_shape, row_shape,
                   jax.ShapeDtypeStruct((batch, nt + 1, 1, 1, width), jnp.float32), seq_shape, seq_shape, row_shape],
        scratch_shapes=[pltpu.VMEM((1, 1, width), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        name="scan_backward",
    )(a, h, hprev, g, gT)


@jax.custom_vjp
def scan(a, x, h0):
    return forward(a, x, h0)[0]


def _scan_fwd(a, x, h0):
    h, _ = forward(a, x, h0)
    return h, (a, h, h0)


def _scan_bwd(saved, g):
    a, h, h0 = saved
    hprev = jnp.concatenate([h0, h[:, :-1, :]], axis=1)
    dx, da, dh0, _, gcarry, _, _, _ = backward(a, h, hprev, g, jnp.zeros_like(h0))
    return da, dx, boundary_gradients(dh0, gcarry)[:, 0, 0]


def boundary_gradients(dh0, gcarry):
    """The carry's gradient at every chunk boundary, 0 to NT: boundary 0 from dh0, the rest from
    the blocks of gcarry the kernel writes (its first block is never written, and never read)."""
    return jnp.concatenate([dh0[:, None, None], gcarry[:, 1:]], axis=1)


scan.defvjp(_scan_fwd, _scan_bwd)


def reference(a, x, h0):
    def step(h, ax):
        h = ax[0] * h + ax[1]
        return h, h

    _, hs = jax.lax.scan(step, h0[:, 0, :], (jnp.swapaxes(a, 0, 1), jnp.swapaxes(x, 0, 1)))
    return jnp.swapaxes(hs, 0, 1)


@functools.partial(jax.jit)
def train_step(a, x, h0):
    """Both kernels in one program: the gradients of a loss over the scan."""
    return jax.grad(lambda a, x, h0: jnp.sum(scan(a, x, h0) ** 2), argnums=(0, 1, 2))(a, x, h0)


def train_step_reference(a, x, h0):
    return jax.grad(lambda a, x, h0: jnp.sum(reference(a, x, h0) ** 2), argnums=(0, 1, 2))(a, x, h0)


def backward_only(a, h, hprev, g, gT):
    """The backward kernel alone, its eight outputs read as the custom_vjp reads them."""
    dx, da, dh0, dw, gcarry, gh, ga, count = backward(a, h, hprev, g, gT)
    return dx, da, boundary_gradients(dh0, gcarry), dw, gh, ga, count


def backward_picked(a, h, hprev, g, gT, first):
    """gcarry read from a boundary known only at run time: whether its first block is read is undecided."""
    dx, da, dh0, dw, gcarry, gh, ga, count = backward(a, h, hprev, g, gT)
    return dx, da, dh0, dw, jax.lax.dynamic_slice_in_dim(gcarry, first, gcarry.shape[1] - 1, axis=1), gh, ga, count


def backward_unsliced(a, h, hprev, g, gT):
    """The same kernel with gcarry returned whole: its first block is garbage the caller sees."""
    return backward(a, h, hprev, g, gT)


_ARGS = "f32[8,64,128] f32[8,64,128] f32[8,1,128]"
_BACKWARD_ARGS = "f32[8,64,128] f32[8,64,128] f32[8,64,128] f32[8,64,128] f32[8,1,128]"

INSPECT = {
    "scan": {"args": _ARGS, "reference": "reference"},
    "train_step": {"args": _ARGS, "reference": "train_step_reference"},
    "backward_only": {"args": _BACKWARD_ARGS},
    "backward_unsliced": {"args": _BACKWARD_ARGS},
    "backward_picked": {"args": _BACKWARD_ARGS + " i32[]"},
}
