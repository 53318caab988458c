"""The kernel library against its references, in TPU interpret mode on the CPU (small shapes),
and compiled for real for tpu-v5e and tpu-v6e at the default block sizes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from inspector.backends import Backend
from inspector.chips import get_chip
from inspector.kernels import block_sparse_attention as bsa
from inspector.kernels import flash_attention as fa
from inspector.kernels import matmul as mm
from inspector.kernels import ragged_dot as rd

TOL = {jnp.float32: 5e-5, jnp.bfloat16: 3e-2}


def normal(key, shape, dtype):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


def close(a, b, dtype):
    err = float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))
    assert err <= TOL[dtype] * max(1.0, float(jnp.max(jnp.abs(b.astype(jnp.float32))))), err


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_flash_attention_and_its_gradients(dtype, causal):
    q, k, v, do = (normal(i, (2, 256, 128), dtype) for i in range(4))
    blocks = fa.BlockSizes(128, 64)
    loss = lambda f: lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32) * do.astype(jnp.float32))
    kernel = lambda q, k, v: fa.flash_attention(q, k, v, causal=causal, block_sizes=blocks)
    ref = lambda q, k, v: fa.reference(q, k, v, causal=causal)
    with pltpu.force_tpu_interpret_mode():
        out = kernel(q, k, v)
        grads = jax.grad(loss(kernel), argnums=(0, 1, 2))(q, k, v)
    close(out, ref(q, k, v), dtype)
    for g, r in zip(grads, jax.grad(loss(ref), argnums=(0, 1, 2))(q, k, v)):
        close(g, r, dtype)


def test_flash_attention_rejects_blocks_that_do_not_divide():
    q = jax.ShapeDtypeStruct((1, 200, 128), jnp.float32)
    with pytest.raises(ValueError, match="block_q=128 must divide the sequence length 200"):
        jax.eval_shape(lambda q: fa.flash_attention(q, q, q), q)
    short = jax.ShapeDtypeStruct((1, 64, 128), jnp.float32)  # blocks longer than the sequence shrink to it
    assert jax.eval_shape(lambda q: fa.flash_attention(q, q, q), short).shape == (1, 64, 128)


def test_causal_blocks_above_the_diagonal_are_never_fetched():
    from inspector.pallas.grid_walk import walk_grid
    from inspector.pallas.discovery import find_pallas_calls

    q = jax.ShapeDtypeStruct((1, 1024, 128), jnp.bfloat16)
    causal, full = (find_pallas_calls(jax.jit(lambda q, c=c: fa.flash_attention(q, q, q, causal=c)).trace(q).jaxpr)[0]
                    for c in (True, False))
    fetches = lambda call: {w.operand: w.transfers for w in walk_grid(call).operands}["k_ref"]
    assert fetches(full) == 8 * 8 and fetches(causal) < 8 * 8 / 2 + 8


@pytest.mark.parametrize("mask", [bsa.LocalGlobalMask(100, 8, True), bsa.LocalGlobalMask(64, 0, False)],
                         ids=["local-global-causal", "window"])
@pytest.mark.parametrize("segments", [False, True], ids=["", "segments"])
def test_block_sparse_equals_dense_masked_attention(mask, segments):
    q, k, v = (normal(i, (2, 512, 128), jnp.float32) for i in range(3))
    seg = jnp.repeat(jnp.array([[0, 1]], jnp.int32), 256, axis=1).repeat(2, axis=0) if segments else None
    with pltpu.force_tpu_interpret_mode():
        out = bsa.block_sparse_attention(q, k, v, mask=mask, segment_ids=seg)
        grad = jax.grad(lambda q: bsa.block_sparse_attention(q, k, v, mask=mask, segment_ids=seg).sum())(q)
    close(out, bsa.reference(q, k, v, mask=mask, segment_ids=seg), jnp.float32)
    close(grad, jax.grad(lambda q: bsa.reference(q, k, v, mask=mask, segment_ids=seg).sum())(q), jnp.float32)


def test_block_layout_skips_empty_blocks_and_marks_full_ones():
    ids, kinds, dense = bsa.block_layout(bsa.LocalGlobalMask(100, 8, True), 512, 512, 128, 128)
    assert dense.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 1]]  # 0 empty, 1 partial
    assert ids[3].tolist() == [0, 2, 3] and kinds[3].tolist() == [1, 1, 1]
    assert ids[0].tolist() == [0, 0, 0] and kinds[0].tolist() == [1, 0, 0]  # padding repeats the block, kind 0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_matmul(dtype):
    a, b = normal(0, (256, 384), dtype), normal(1, (384, 256), dtype)
    with pltpu.force_tpu_interpret_mode():
        out = mm.matmul(a, b, mm.TileSizes(128, 128, 128))
    close(out, mm.reference(a, b), dtype)
    with pytest.raises(ValueError, match="k=384 is not a multiple of its tile 256"):
        mm.matmul(a, b, mm.TileSizes(128, 256, 128))


@pytest.mark.parametrize("sizes", [[100, 0, 300, 112], [512, 0, 0, 0], [0, 0, 0, 200], [128, 128, 128, 128]],
                         ids=["straddling", "one-group", "short-sum", "aligned"])
def test_ragged_dot_matches_lax_ragged_dot(sizes):
    lhs, rhs = normal(0, (512, 128), jnp.float32), normal(1, (4, 128, 256), jnp.float32)
    group_sizes = jnp.array(sizes, jnp.int32)
    with pltpu.force_tpu_interpret_mode():
        out = rd.ragged_dot(lhs, rhs, group_sizes)
    np.testing.assert_allclose(out, rd.reference(lhs, rhs, group_sizes), atol=1e-4, rtol=1e-4)


@pytest.mark.tpu
@pytest.mark.parametrize("chip", ["tpu-v5e", "tpu-v6e"])
def test_every_kernel_compiles_for_tpu_at_its_defaults(chip):
    backend = Backend(get_chip(chip))
    s = jax.ShapeDtypeStruct
    bf = lambda *shape: s(shape, jnp.bfloat16)
    cases = {
        "flash fwd+bwd": (jax.grad(lambda q, k, v: fa.flash_attention(q, k, v, block_sizes=fa.DEFAULT_BLOCK_SIZES[chip])
                                   .astype(jnp.float32).sum(), argnums=(0, 1, 2)), (bf(2, 2048, 128),) * 3),
        "block sparse": (lambda q, k, v: bsa.block_sparse_attention(q, k, v), (bf(2, 1024, 128),) * 3),
        "matmul": (lambda a, b: mm.matmul(a, b, mm.DEFAULT_TILES[chip]), (bf(1024, 1024), bf(1024, 1024))),
        "ragged dot": (lambda a, b, g: rd.ragged_dot(a, b, g), (bf(512, 256), bf(4, 256, 256), s((4,), jnp.int32))),
    }
    for name, (fn, args) in cases.items():
        with backend.context():
            text = jax.jit(fn).lower(*backend.place(args)).compile().as_text()
        assert "tpu_custom_call" in text, name
