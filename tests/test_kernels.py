"""The kernel library against its references, in TPU interpret mode on the CPU (small shapes),
and compiled for real for tpu-v5e and tpu-v6e at the default block sizes; the cost estimates
each kernel passes against the inspector's own BlockSpec walk."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.kernels import block_sparse_attention as bsa
from inspector.kernels import flash_attention as fa
from inspector.kernels import matmul as mm
from inspector.kernels import ragged_dot as rd
from inspector.kernels.block_sizes import LANES, BlockSizes, TileSizes
from inspector.jax_internals.pallas import pallas_eqns
from inspector.pallas.analysis import analyse_pallas
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

TOL = {jnp.float32: 5e-5, jnp.bfloat16: 3e-2}


def normal(key, shape, dtype):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


def close(a, b, dtype):
    err = float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))
    assert err <= TOL[dtype] * max(1.0, float(jnp.max(jnp.abs(b.astype(jnp.float32))))), err


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_matmul(dtype):
    a, b = normal(0, (256, 384), dtype), normal(1, (384, 256), dtype)
    with pltpu.force_tpu_interpret_mode():
        out = mm.matmul(a, b, mm.TileSizes(128, 128, 128))
    close(out, mm.reference(a, b), dtype)
    with pytest.raises(ValueError, match="k=384 is not a multiple of its tile 256"):
        mm.matmul(a, b, mm.TileSizes(128, 256, 128))


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [[100, 0, 300, 112], [512, 0, 0, 0], [0, 0, 0, 200], [128, 128, 128, 128]],
                         ids=["straddling", "one-group", "short-sum", "aligned"])
def test_ragged_dot_matches_lax_ragged_dot(sizes):
    lhs, rhs = normal(0, (512, 128), jnp.float32), normal(1, (4, 128, 256), jnp.float32)
    group_sizes = jnp.array(sizes, jnp.int32)
    with pltpu.force_tpu_interpret_mode():
        out = rd.ragged_dot(lhs, rhs, group_sizes)
    np.testing.assert_allclose(out, rd.reference(lhs, rhs, group_sizes), atol=1e-4, rtol=1e-4)


@pytest.mark.libtpu
@pytest.mark.parametrize("chip", ["tpu-v5e", "tpu-v6e"])
def test_every_kernel_compiles_for_tpu_at_its_defaults(chip):
    backend = Backend(get_chip(chip))
    s = jax.ShapeDtypeStruct
    bf = lambda *shape: s(shape, jnp.bfloat16)
    cases = {
        "flash fwd+bwd": (jax.grad(lambda q, k, v: fa.flash_attention(q, k, v, block_sizes=BlockSizes.for_chip(chip))
                                   .astype(jnp.float32).sum(), argnums=(0, 1, 2)), (bf(2, 2048, 128),) * 3),
        "block sparse": (lambda q, k, v: bsa.block_sparse_attention(q, k, v), (bf(2, 1024, 128),) * 3),
        "matmul": (lambda a, b: mm.matmul(a, b, TileSizes.for_chip(chip)), (bf(1024, 1024), bf(1024, 1024))),
        "ragged dot": (lambda a, b, g: rd.ragged_dot(a, b, g), (bf(512, 256), bf(4, 256, 256), s((4,), jnp.int32))),
    }
    for name, (fn, args) in cases.items():
        with backend.context():
            text = jax.jit(fn).lower(*backend.place(args)).compile().as_text()
        assert "tpu_custom_call" in text, name


# ----------------------------------------------------------------------------- block sizes


def test_block_sizes_per_chip_come_from_the_chip_table():
    assert BlockSizes.for_chip("tpu-v5e") == BlockSizes(512, 512, 512, 512, 512, 512)  # 16 MiB scoped, MXU 128
    assert BlockSizes.for_chip("tpu-v6e") == BlockSizes(1024, 512, 1024, 512, 1024, 512)  # 32 MiB scoped, MXU 256
    assert BlockSizes.for_chip("cpu") == BlockSizes()  # no VMEM figure: the class defaults
    assert TileSizes.for_chip("tpu-v5e") == TileSizes(256, 512, 256)
    assert TileSizes.for_chip("tpu-v6e") == TileSizes(512, 512, 512)
    assert bsa.BlockSizes is fa.BlockSizes is BlockSizes and mm.TileSizes is rd.TileSizes is TileSizes  # one per family
    fitted = BlockSizes(128, 64, block_q_dkv=256).fit(512, 512)  # backward fields left None take the forward's
    assert (fitted.dkv, fitted.dq) == ((256, 64), (128, 64))
    with pytest.raises(ValueError, match="block_k_dq=96 must divide the sequence length 512"):
        BlockSizes(block_k_dq=96).fit(512, 512)


@pytest.mark.slow
def test_flash_attention_backward_blocks_differ_from_the_forward():
    q, k, v = (normal(i, (1, 256, 128), jnp.float32) for i in range(3))
    blocks = BlockSizes(128, 64, block_q_dkv=64, block_k_dkv=128, block_q_dq=256, block_k_dq=128)
    loss = lambda f: lambda q, k, v: jnp.sum(f(q, k, v) ** 2)
    with pltpu.force_tpu_interpret_mode():
        grads = jax.grad(loss(lambda q, k, v: fa.flash_attention(q, k, v, block_sizes=blocks)), argnums=(0, 1, 2))(q, k, v)
    for g, r in zip(grads, jax.grad(loss(lambda q, k, v: fa.reference(q, k, v)), argnums=(0, 1, 2))(q, k, v)):
        close(g, r, jnp.float32)


# ----------------------------------------------------------------------------- fully masked rows


@dataclasses.dataclass(frozen=True)
class HiddenRows:
    """A LocalGlobalMask under which queries in [start, stop) see no key at all (padding, say)."""

    inner: bsa.LocalGlobalMask
    start: int
    stop: int

    def __call__(self, q, k):
        return self.inner(q, k) & ~((q >= self.start) & (q < self.stop))


@pytest.mark.slow
@pytest.mark.parametrize("hidden", [(200, 256), (384, 512)], ids=["rows-inside-a-block", "a-whole-q-block"])
def test_a_fully_masked_row_gives_zeros_not_nan(hidden):
    # rows-inside-a-block: the q block is computed, so without zeroing masked probabilities each
    # hidden row would average v (exp(MASK - MASK) = 1). a-whole-q-block: every kv block is empty,
    # nothing runs and l stays 0: without the guard 0 / 0 = NaN.
    mask = HiddenRows(bsa.LocalGlobalMask(100, 8, True), *hidden)
    q, k, v = (normal(i, (2, 512, 128), jnp.float32) for i in range(3))
    with pltpu.force_tpu_interpret_mode():
        out = bsa.block_sparse_attention(q, k, v, mask=mask)
        grad = jax.grad(lambda q: bsa.block_sparse_attention(q, k, v, mask=mask).sum())(q)
    assert not jnp.isnan(out).any() and not jnp.isnan(grad).any()
    assert float(jnp.abs(out[:, hidden[0]:hidden[1]]).max()) == 0.0
    close(out, bsa.reference(q, k, v, mask=mask), jnp.float32)


# ----------------------------------------------------------------------------- SMEM tables


def test_block_sparse_tables_are_the_smallest_ints_that_hold_them():
    assert bsa.small_ints(np.array([0, 127], np.int32)).dtype == np.int8
    assert bsa.small_ints(np.array([0, 128], np.int32)).dtype == np.int16
    assert bsa.small_ints(np.array([0, 40_000], np.int32)).dtype == np.int32
    q = jax.ShapeDtypeStruct((1, 512, 128), jnp.bfloat16)
    [eqn] = pallas_eqns(jax.make_jaxpr(lambda q: bsa.block_sparse_attention(q, q, q))(q))
    assert [str(v.aval.dtype) for v in eqn.invars[:2]] == ["int8", "int8"]  # kv block ids, block kinds


# ----------------------------------------------------------------------------- cost estimates
# Each kernel's pl.CostEstimate against what the inspector's BlockSpec walk computes
# (report.cost_estimate): HBM bytes agree exactly. Flops and transcendentals agree where every
# grid step computes; where the kernel skips work (causal blocks above the diagonal, block-sparse
# padding steps) the inspector's figure is an upper bound (every pl.when branch taken at every
# step) and the kernel's is the real count, so the test checks the ratio the skipped steps explain.


def cost_reports(program) -> dict:
    reports, unread = analyse_pallas(program, [], [])
    assert not unread
    return {r.call.name: r for r in reports}


def sample(spec, args, *sets):
    return capture(load_target(spec, args=args, sets=list(sets)), Backend(get_chip("cpu")), compile=False).program


def causal_fraction(grid, bq, bk, transpose=False) -> float:
    """Steps of a causal flash grid (b, q blocks, kv blocks) that compute (kv block <= last needed)."""
    nq, nk = (grid[2], grid[1]) if transpose else (grid[1], grid[2])
    i, j = np.meshgrid(np.arange(nq), np.arange(nk), indexing="ij")
    return float((j * bk <= i * bq + bq - 1).mean())


@pytest.mark.parametrize("sets", [[], ["bk=1792"], ["bk=1792", "bn=4608"]], ids=["k-tiled", "one-k-tile", "one-k-and-n-tile"])
def test_matmul_cost_estimate_matches_the_walk(sets):
    [report] = cost_reports(sample("samples/matmul.py:tiled", "bf16[1024,1792] bf16[1792,4608]", *sets)).values()
    assert report.call.cost_estimate == report.cost_estimate


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_forward_cost_estimate_matches_the_walk(causal):
    program = sample("samples/attention.py:flash", "bf16[2,1024,128] bf16[2,1024,128] bf16[2,1024,128]",
                     "block_q=256", "block_k=128", f"causal={causal}")
    report = cost_reports(program)["flash_attention_fwd"]
    given, walk, (bh, nq, _) = report.call.cost_estimate, report.cost_estimate, report.call.grid
    frac = causal_fraction(report.call.grid, 256, 128) if causal else 1.0
    assert given["bytes_accessed"] == walk["bytes_accessed"]  # clamped kv indices: the same fetches
    assert given["flops"] == pytest.approx(walk["flops"] * frac)
    # the walk also counts the last step's log(l) (bq x 128) at every step of the q block
    per_step_log = 256 * LANES
    assert given["transcendentals"] == pytest.approx(
        (walk["transcendentals"] - report.call.steps * per_step_log) * frac + bh * nq * per_step_log)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_backward_cost_estimates_match_the_walk(causal):
    q = jax.ShapeDtypeStruct((2, 512, 128), jnp.bfloat16)
    blocks = BlockSizes(128, 128, block_q_dkv=64, block_k_dkv=128, block_q_dq=128, block_k_dq=64)
    loss = lambda q, k, v: fa.flash_attention(q, k, v, causal=causal, block_sizes=blocks).astype(jnp.float32).sum()
    reports = cost_reports(jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(q, q, q))
    for name, (bq, bk), transpose in (("flash_attention_bwd_dkdv", blocks.dkv, True),
                                      ("flash_attention_bwd_dq", blocks.dq, False)):
        report = reports[name]
        given, walk = report.call.cost_estimate, report.cost_estimate
        frac = causal_fraction(report.call.grid, bq, bk, transpose) if causal else 1.0
        assert given["bytes_accessed"] == walk["bytes_accessed"], name
        assert given["flops"] == pytest.approx(walk["flops"] * frac), name
        assert given["transcendentals"] == pytest.approx(walk["transcendentals"] * frac), name


@pytest.mark.parametrize("segments", [False, True], ids=["", "segments"])
def test_block_sparse_cost_estimate_matches_the_walk(segments):
    mask = bsa.LocalGlobalMask(256, 64, True)
    q = jax.ShapeDtypeStruct((2, 1024, 128), jnp.bfloat16)
    seg = jax.ShapeDtypeStruct((2, 1024), jnp.int32) if segments else None
    fn = lambda q, seg: bsa.block_sparse_attention(q, q, q, mask=mask, segment_ids=seg)
    report = cost_reports(jax.make_jaxpr(fn)(q, seg))["block_sparse_attention"]
    given, walk = report.call.cost_estimate, report.cost_estimate
    _, kinds, _ = bsa.block_layout(mask, 1024, 1024, 128, 128)
    # the walk takes both pl.when branches (full, partial) at every step; the kernel runs one,
    # and only on the non-empty blocks (padding steps compute nothing)
    frac = (kinds != bsa.EMPTY).mean() / 2
    assert given["bytes_accessed"] == walk["bytes_accessed"]
    assert given["flops"] == pytest.approx(walk["flops"] * frac)
    assert given["transcendentals"] == pytest.approx(walk["transcendentals"] * frac)


def test_ragged_dot_cost_estimate_matches_the_walk():
    # The estimate is static (work items depend on group_sizes at run time): all m_tiles + groups
    # items, every one a full tile; that is also the walk's upper bound for flops. With more than
    # one k tile every step fetches both operand tiles, padding items too.
    [report] = cost_reports(sample("samples/moe.py:experts", None)).values()
    given, walk = report.call.cost_estimate, report.cost_estimate
    assert given["flops"] == walk["flops"] and given["transcendentals"] == walk["transcendentals"] == 0
    fetched = {w.operand: w.bytes for w in report.walk.operands}
    m, n = 2048, 1024
    assert given["bytes_accessed"] == fetched["lhs_ref"] + fetched["rhs_ref"] + m * n * 2  # each output tile once


def test_ragged_dot_walk_sees_every_output_tile_written():
    """jax shares one jaxpr between call sites (work_items' two jnp.where): values are evaluated per call site."""
    [report] = cost_reports(sample("samples/moe.py:experts", None)).values()
    assert "output-not-written" not in {f.code for f in report.findings}
    assert report.call.cost_estimate["bytes_accessed"] == report.cost_estimate["bytes_accessed"]


@pytest.mark.libtpu
def test_the_fusions_view_gives_a_pallas_kernel_the_transcendentals_of_its_body():
    """The flash sample's exps: the fusions view said 0 (XLA counts nothing inside a custom call)
    while the Pallas view's suggested CostEstimate counted them."""
    from inspector.report import make_report
    from inspector.view_table import Needs

    target = load_target("samples/attention.py:flash", args="bf16[1,512,128] bf16[1,512,128] bf16[1,512,128]",
                         sets=["block_q=128", "block_k=128"])
    report = make_report(target, get_chip("tpu-v5e"), Needs(compile=True, fusions=True, pallas=True))
    [kernel] = [k for k in report.fusions.kernels if k.kind == "custom-call:pallas"]
    [pallas] = report.pallas
    assert kernel.transcendentals == pallas.cost_estimate["transcendentals"] > 0
