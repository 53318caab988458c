"""Small kernels for tests/test_diff.py: each exercises one thing the diff must get right."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 8


def _boom(i):
    if int(i) == 2:
        raise ValueError(f"boom at step {int(i)}")


def _raising_kernel(x_ref, o_ref):
    jax.debug.callback(_boom, pl.program_id(0))
    o_ref[...] = x_ref[...] * 2


def raises_inside(x):
    """A kernel whose body raises (through a host callback) at grid point (2,)."""
    return pl.pallas_call(_raising_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (i, 0)))(x)


def double(x):
    return x * 2


def _same_block_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def benign_race(x):
    """Every step of a "parallel" axis writes the same values to the same output block: two cores
    race on it, but whichever write lands last, the output is right."""
    return pl.pallas_call(_same_block_kernel, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype), grid=(4,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (0, 0)),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)


def first_block_doubled(x):
    return x[:ROWS] * 2


def _accumulate_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def harmful_race(x):
    """A sum over a "parallel" axis: on one core it is right, split over two each core keeps its
    own partial sum and the last one written wins."""
    return pl.pallas_call(_accumulate_kernel, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((ROWS, 128), lambda i: (0, 0)),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)


def block_sum(x):
    return x.reshape(-1, ROWS, 128).sum(axis=0)


def _inner(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _outer(x_hbm, o_hbm):
    pltpu.emit_pipeline(_inner, grid=(x_hbm.shape[0] // ROWS,),
                        in_specs=[pl.BlockSpec((ROWS, 128), lambda i: (i, 0))],
                        out_specs=pl.BlockSpec((ROWS, 128), lambda i: (i, 0)))(x_hbm, o_hbm)


def pipelined(x):
    """pltpu.emit_pipeline inside a kernel: it asks get_tpu_info() for the chip while tracing."""
    return pl.pallas_call(_outer, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)], out_specs=pl.BlockSpec(memory_space=pl.ANY))(x)


def as_dict(x):
    return {"a": x * 2, "b": x + 1}


def as_dict_other_keys(x):
    return {"a": x * 2, "c": x + 1}


def as_tuple(x):
    return (x * 2, x + 1)


def as_f32(x):
    return (x * 2).astype(jnp.float32)


def as_bf16(x):
    return (x * 2).astype(jnp.bfloat16)


def wrong_shape(x):
    return x[:, :64] * 2


def empty_rows(x):
    return x[:0] * 2


INSPECT = {
    "raises_inside": {"args": "f32[32,128]", "reference": "double"},
    "benign_race": {"args": "f32[32,128]", "reference": "first_block_doubled"},
    "harmful_race": {"args": "f32[32,128]", "reference": "block_sum"},
    "pipelined": {"args": "f32[32,128]", "reference": "double"},
    "as_dict": {"args": "f32[8,128]", "reference": "as_dict_other_keys"},
    "as_tuple": {"args": "f32[8,128]", "reference": "as_dict"},
    "as_f32": {"args": "f32[8,128]", "reference": "as_bf16"},
    "wrong_shape": {"args": "f32[8,128]", "reference": "double"},
    "empty_rows": {"args": "f32[8,128]", "reference": "empty_rows"},
    "reshaped_dma": {"args": "f32[1024]", "reference": "flat_doubled"},
}


def _reshaped_dma(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm.reshape(ROWS, 128), buf, sem)
    copy.start()
    copy.wait()
    o_ref[...] = buf[...] * 2


def reshaped_dma(x):
    """A DMA through a reshaped HBM ref: libtpu compiles it, the 0.10.2 interpreter cannot run it."""
    return pl.pallas_call(_reshaped_dma, out_shape=jax.ShapeDtypeStruct((ROWS, 128), x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          scratch_shapes=[pltpu.VMEM((ROWS, 128), x.dtype), pltpu.SemaphoreType.DMA(())])(x)


def flat_doubled(x):
    return x.reshape(ROWS, 128) * 2


# ----------------------------------------------------------------------------- issue 28: kernels written elsewhere, in their styles

def gmm_f32(lhs, rhs):
    """JAX's megablox grouped matmul in float32 (equal groups): K = 1024 summed in 128-wide tiles,
    against XLA's own order: they differ by rounding alone, more than atol = rtol = 1e-5 allows."""
    from jax.experimental.pallas.ops.tpu.megablox import gmm

    groups = rhs.shape[0]
    sizes = jnp.full((groups,), lhs.shape[0] // groups, jnp.int32)
    return gmm(lhs, rhs, sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128))


def grouped_einsum(lhs, rhs):
    groups = rhs.shape[0]
    return jnp.einsum("gmk,gkn->gmn", lhs.reshape(groups, -1, lhs.shape[1]), rhs).reshape(lhs.shape[0], rhs.shape[2])


PAGE, PAGES_PER_SEQ, SEQS = 8, 4, 2


def _paged_sum_kernel(tables_ref, lengths_ref, k_hbm, o_ref, buf, sem):
    b = pl.program_id(0)
    length = lengths_ref[b]
    pages = length // PAGE + 1  # BUG (true positive): one page too many when the length is a whole number of pages

    def body(i, acc):
        page = tables_ref[b, i]  # i == PAGES_PER_SEQ reads past the block table's row
        copy = pltpu.make_async_copy(k_hbm.at[page], buf, sem)
        copy.start()
        copy.wait()
        rows = i * PAGE + jax.lax.broadcasted_iota(jnp.int32, buf.shape, 0)
        return acc + jnp.where(rows < length, buf[...], 0.0)  # the extra page is masked: the output stays right

    o_ref[0] = jax.lax.fori_loop(0, pages, body, jnp.zeros(buf.shape, jnp.float32))


def _paged_inputs(k_pages):
    tables = jnp.arange(SEQS * PAGES_PER_SEQ, dtype=jnp.int32).reshape(SEQS, PAGES_PER_SEQ)
    lengths = jnp.full((SEQS,), PAGES_PER_SEQ * PAGE, jnp.int32)  # full sequences: the off-by-one page is read
    return tables, lengths


def paged_sum(k_pages):
    """Paged-attention style: per sequence, gather its KV pages by a scalar-prefetched block table
    with manual DMAs and sum the valid rows. The loop runs one page too far: an out-of-bounds read
    of the block table (and of the cache), masked out of the result."""
    tables, lengths = _paged_inputs(k_pages)
    return pl.pallas_call(
        _paged_sum_kernel, out_shape=jax.ShapeDtypeStruct((SEQS, PAGE, k_pages.shape[2]), k_pages.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=(SEQS,), in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((1, PAGE, k_pages.shape[2]), lambda b, *_: (b, 0, 0)),
            scratch_shapes=[pltpu.VMEM((PAGE, k_pages.shape[2]), k_pages.dtype), pltpu.SemaphoreType.DMA(())]),
    )(tables, lengths, k_pages)


def paged_sum_ref(k_pages):
    tables, _ = _paged_inputs(k_pages)
    return k_pages[tables].sum(axis=1)


WIDTH, CHUNK = 4, 8  # conv taps, rows per grid step


def _conv_kernel(x_ref, w_ref, state_ref, o_ref, new_state_ref, win, sem):
    t = pl.program_id(0)

    @pl.when(t == 0)
    def _():
        win[pl.ds(0, WIDTH - 1), :] = state_ref[...]

    win[pl.ds(WIDTH - 1, CHUNK), :] = x_ref[...]
    acc = jnp.zeros(x_ref.shape, jnp.float32)
    for k in range(WIDTH):
        acc += win[pl.ds(k, CHUNK), :] * w_ref[pl.ds(k, 1), :]
    o_ref[...] = acc
    # the history the next step needs: the last WIDTH-1 rows of the window. The rows of the old
    # history still to keep (max(0, WIDTH-1-CHUNK) = 0 of them) are copied from where they start:
    # a zero-length local DMA at the end of the history buffer (offset WIDTH-1 == its size)
    keep = max(0, WIDTH - 1 - CHUNK)
    start = jnp.minimum(CHUNK + 0 * t, WIDTH - 1)
    stale = pltpu.make_async_copy(new_state_ref.at[pl.ds(start, keep)], win.at[pl.ds(0, keep)], sem)
    stale.start()
    stale.wait()
    win[pl.ds(0, WIDTH - 1), :] = win[pl.ds(CHUNK, WIDTH - 1), :]
    new_state_ref[...] = win[pl.ds(0, WIDTH - 1), :]


def causal_conv1d(x, w, state):
    """Causal depthwise conv1d over a sequence in chunks, carrying the last WIDTH-1 rows between
    grid steps, as the TPU ports of causal-conv1d do: correct, but it copies a zero-length slice at
    the end of a buffer, which the interpreter (its race detector) trips on."""
    seq, dim = x.shape
    return pl.pallas_call(
        _conv_kernel, grid=(seq // CHUNK,),
        out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(state.shape, state.dtype)),
        in_specs=[pl.BlockSpec((CHUNK, dim), lambda t: (t, 0)), pl.BlockSpec((WIDTH, dim), lambda t: (0, 0)),
                  pl.BlockSpec((WIDTH - 1, dim), lambda t: (0, 0))],
        out_specs=(pl.BlockSpec((CHUNK, dim), lambda t: (t, 0)), pl.BlockSpec((WIDTH - 1, dim), lambda t: (0, 0))),
        scratch_shapes=[pltpu.VMEM((CHUNK + WIDTH - 1, dim), x.dtype), pltpu.SemaphoreType.DMA(())],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(x, w, state)


def causal_conv1d_ref(x, w, state):
    xp = jnp.concatenate([state, x])
    out = sum(xp[k:k + x.shape[0]] * w[k] for k in range(WIDTH))
    return out, xp[-(WIDTH - 1):]


STATE = 128  # GDN-style recurrent state per sequence: [STATE, STATE]


def _decode_kernel(k_ref, s_hbm, o_hbm, buf, sems):
    b = pl.program_id(0)
    steps = pl.num_programs(0)

    @pl.when(b == 0)
    def _():
        pltpu.make_async_copy(s_hbm.at[0], buf, sems.at[0]).start()

    pltpu.make_async_copy(s_hbm.at[b], buf, sems.at[0]).wait()  # this step's state, prefetched

    @pl.when(b > 0)
    def _():  # the previous step's writeback, waited only now: after this step's prefetch landed in buf
        pltpu.make_async_copy(buf, o_hbm.at[b - 1], sems.at[1]).wait()

    buf[...] = buf[...] * 0.5 + k_ref[0]  # the store
    pltpu.make_async_copy(buf, o_hbm.at[b], sems.at[1]).start()  # its writeback

    @pl.when(b + 1 < steps)
    def _():  # BUG: the next prefetch into the same buffer, while the writeback still reads it
        pltpu.make_async_copy(s_hbm.at[b + 1], buf, sems.at[0]).start()

    @pl.when(b + 1 == steps)
    def _():
        pltpu.make_async_copy(buf, o_hbm.at[b], sems.at[1]).wait()


def gdn_decode(state, k):
    """A decode step with manual DMAs in the style of gated-delta-net decode kernels: each sequence's
    state is prefetched into VMEM, updated, and written back; one buffer serves both."""
    return pl.pallas_call(
        _decode_kernel, out_shape=jax.ShapeDtypeStruct(state.shape, state.dtype), grid=(state.shape[0],),
        in_specs=[pl.BlockSpec((1, 1, STATE), lambda b: (b, 0, 0)), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((STATE, STATE), state.dtype), pltpu.SemaphoreType.DMA((2,))],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))(k, state)


def gdn_decode_ref(state, k):
    return state * 0.5 + k


SHARD = 24  # rows per device: 8 per piece on a mesh of 4


def _shift_kernel(x_ref, o_ref, buf, send_sem, recv_sem):
    n = jax.lax.axis_size("x")
    rows = SHARD // (n - 1)  # sent in n - 1 pieces, as a ring's hops would: on one device, n - 1 == 0
    right = jax.lax.rem(jax.lax.axis_index("x") + 1, n)
    for piece in range(SHARD // rows):
        copy = pltpu.make_async_remote_copy(x_ref.at[pl.ds(piece * rows, rows)], buf.at[pl.ds(piece * rows, rows)],
                                            send_sem, recv_sem, device_id=(right,), device_id_type=pl.DeviceIdType.MESH)
        copy.start()
        copy.wait()
    o_ref[...] = buf[...] * 2


def _shift(x):
    return pl.pallas_call(
        _shift_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)], out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA(()), pltpu.SemaphoreType.DMA(())],
        compiler_params=pltpu.CompilerParams(collective_id=0))(x)


def ring_shift(x):
    """A collective kernel: each device sends its shard to its right neighbour by a remote DMA
    (the first hop of a ring all-gather). On a one-device mesh it has no neighbour: n - 1 == 0."""
    from jax.sharding import PartitionSpec as P

    return jax.shard_map(_shift, mesh=jax.sharding.get_abstract_mesh(), in_specs=P("x", None), out_specs=P("x", None),
                         check_vma=False)(x)


def ring_shift_ref(x):
    return jnp.roll(x, SHARD, axis=0) * 2


def _copy_doubled(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def runtime_parallel_grid(x):
    """x doubled over a "parallel" grid whose extent is a traced value (the count of rows to
    write, as jax-llm-examples' KV-cache insert sizes its grid): jax 0.10.2's interpreter
    shuffles parallel dimensions and cannot trace one of unknown size."""
    steps = jnp.where(x[0, 0] > -jnp.inf, x.shape[0] // ROWS, 0)
    spec = pl.BlockSpec((ROWS, 128), lambda i: (i, 0))
    return pl.pallas_call(_copy_doubled, grid=(steps,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)


INSPECT.update({
    "gmm_f32": {"args": "f32[256,1024] f32[2,1024,128]", "reference": "grouped_einsum"},
    "paged_sum": {"args": f"f32[{SEQS * PAGES_PER_SEQ},{PAGE},128]", "reference": "paged_sum_ref"},
    "causal_conv1d": {"args": f"f32[32,128] f32[{WIDTH},128] f32[{WIDTH - 1},128]", "reference": "causal_conv1d_ref"},
    "gdn_decode": {"args": f"f32[4,{STATE},{STATE}] f32[4,1,{STATE}]", "reference": "gdn_decode_ref"},
    "ring_shift": {"args": f"f32[{4 * SHARD},128]", "reference": "ring_shift_ref", "mesh": {"x": 4}},
    "ring_shift_unsized": {"args": f"f32[{4 * SHARD},128]", "reference": "ring_shift_ref", "mesh": {"x": -1}},
    "runtime_parallel_grid": {"args": "f32[32,128]", "reference": "double"},
})
ring_shift_unsized = ring_shift
