"""A Pallas kernel's roofline counts each unit of the TensorCore: its HBM traffic, its MXU flops, its
VPU (VALU), EUP and XLU instructions, one a register, from the kernel body; a top-level pl.when at the
grid steps that take it; each unit at the chip table's rate, none guessed. And the bytes of a
kernel with a pl.CostEstimate are compared with XLA's like with like."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from conftest import DATA
from inspector.base.chips import CHIPS, get_chip
from inspector.hlo.fusions import PallasFigures, VectorWork, _roofline, analyse_fusions
from inspector.jax_internals.branches import branch_steps
from inspector.jax_internals.kernel_body import Body
from inspector.jax_internals.vector_work import grid_work, vregs
from inspector.jax_internals.tracing import sub_jaxprs

GRID = (4, 4)


def _guarded_body(x_ref, o_ref):
    """exp and a multiply of an (8, 256) f32 block (2 registers each) on the steps with j <= i."""
    i, j = pl.program_id(0), pl.program_id(1)

    @pl.when(j <= i)
    def _():
        o_ref[...] = jnp.exp(x_ref[...]) * 2.0


def _kernel_jaxpr():
    block = pl.BlockSpec((8, 256), lambda i, j: (0, 0))
    call = pl.pallas_call(_guarded_body, grid=GRID, in_specs=[block], out_specs=block,
                          out_shape=jax.ShapeDtypeStruct((8, 256), jnp.float32))
    eqn = jax.make_jaxpr(call)(jnp.zeros((8, 256), jnp.float32)).jaxpr.eqns[0]
    return eqn.params["jaxpr"]


def test_registers_are_8_by_128_tiles_with_16_bit_values_packed():
    shaped = jax.core.ShapedArray
    assert vregs(shaped((512, 512), jnp.float32)) == 256
    assert vregs(shaped((512, 1), jnp.float32)) == 64  # a column of statistics: one register per 8 rows
    assert vregs(shaped((512, 512), jnp.bfloat16)) == 128
    assert vregs(shaped((2, 8, 128), jnp.float32)) == 2
    assert vregs(shaped((), jnp.float32)) == 0  # a scalar: the scalar unit's


def test_a_guarded_body_counts_its_units_at_the_steps_that_run_it():
    jaxpr = _kernel_jaxpr()
    steps = sum(j <= i for i in range(GRID[0]) for j in range(GRID[1]))  # 10 of 16
    taken = branch_steps(jaxpr, GRID)
    assert list(taken.values()) == [[16 - steps, steps]]
    body = Body({})
    body.visit(jaxpr, (1.0, 1.0))
    work = grid_work(body, jaxpr, 16, taken)
    # exp: one EUP instruction a register and two VALU ones (the scaling by log2 e, the pop of the
    # EUP's result); the multiply one VALU instruction a register
    assert work["eup"] == [2 * steps, 2 * steps]
    assert work["vpu"] == [3 * 2 * steps, 3 * 2 * steps]
    # not knowing which steps take it, the least is the branch never taken, the most every step
    assert grid_work(body, jaxpr, 16, {})["eup"] == [0, 2 * 16]


def _work(kernel, grid, *operands, in_specs, out_spec, out_shape):
    call = pl.pallas_call(kernel, grid=grid, in_specs=in_specs, out_specs=out_spec, out_shape=out_shape)
    eqn = next(e for e in jax.make_jaxpr(call)(*operands).jaxpr.eqns if e.primitive.name == "pallas_call")
    jaxpr = eqn.params["jaxpr"]
    body = Body({})
    body.visit(jaxpr, (1.0, 1.0))
    return grid_work(body, jaxpr, 1, branch_steps(jaxpr, grid))


def test_what_the_compiler_folds_or_drops_is_not_counted():
    def kernel(x_ref, k_ref, o_ref):
        x = x_ref[...]
        zeros = jnp.zeros_like(x)
        y = (zeros >> 16) * 3 + x  # folds to x: no instruction
        _unused = x * 5  # dropped
        key = jnp.broadcast_to(k_ref[...], x.shape)  # one row, replicated down the sublanes
        o_ref[...] = y ^ (key * 7)  # key * 7 on one register, the xor on the block's 2

    u32 = jax.ShapeDtypeStruct((16, 128), jnp.uint32)
    block, row = pl.BlockSpec((16, 128), lambda i: (0, 0)), pl.BlockSpec((1, 128), lambda i: (0, 0))
    work = _work(kernel, (1,), jnp.zeros((16, 128), jnp.uint32), jnp.zeros((1, 128), jnp.uint32),
                 in_specs=[block, row], out_spec=block, out_shape=u32)
    assert work["vpu"] == [3, 3]


def test_philox_counts_no_more_valu_instructions_than_libtpu_issues():
    """jax's Philox kernel (samples/jax_kernels.py:philox_bits, 256 x 256 blocks): libtpu 0.0.42.1's
    bundles issue 20.72k VALU instructions a grid step on the v5e (`show --view bundles`); its jaxpr
    holds 26.5k a step before the first round's products of zeros fold, the last round's unused
    half drops and the key's broadcast rounds stay one register."""
    from jax.experimental.pallas.ops.tpu.random import philox

    jaxpr = jax.make_jaxpr(lambda key: philox.philox_4x32_kernel(key, (512, 512), (512, 512), block_size=(256, 256)))
    eqn = _find_pallas(jaxpr(jnp.zeros((2,), jnp.uint32)).jaxpr)
    kernel, grid = eqn.params["jaxpr"], eqn.params["grid_mapping"].grid
    body = Body({})
    body.visit(kernel, (1.0, 1.0))
    per_step = grid_work(body, kernel, 1, branch_steps(kernel, grid))["vpu"][0]
    assert 0.95 * 20_720 < per_step <= 20_720


def _find_pallas(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            return eqn
        for sub in sub_jaxprs(eqn.params):
            if (found := _find_pallas(sub)) is not None:
                return found
    return None


def test_vector_work_bounds_the_roofline_when_it_takes_longest():
    v5e = get_chip("tpu-v5e")
    register = v5e.sublanes * v5e.lanes
    # 1 MB of HBM traffic (1.2 us) against 10k VALU instructions (10k x 1024 / 6.1e12 = 1.7 us)
    _, seconds, bound = _roofline(v5e, 0.0, 1_000_000, vector=VectorWork(vpu=10_000))
    assert bound == "VPU" and seconds == pytest.approx(10_000 * register / v5e.vpu_ops_per_s)
    _, seconds, bound = _roofline(v5e, 0.0, 1_000_000, vector=VectorWork(eup=10_000))
    assert bound == "EUP" and seconds == pytest.approx(10_000 * register / v5e.eup_ops_per_s)
    _, _, bound = _roofline(v5e, 0.0, 10_000_000, vector=VectorWork(vpu=10_000))
    assert bound == "memory"


def test_vector_rates_come_from_the_chip_table_with_their_sources():
    # the scaling book's v5p: 4 ALUs x 8 x 128 x 1.75 GHz x 2 TensorCores = 1.4e13 ops/s
    assert get_chip("tpu-v5p").vpu_ops_per_s == pytest.approx(1.4e13, rel=0.03)
    for chip in CHIPS:
        if chip.is_tpu:
            assert all(chip.sources[f] for f in ("valu_slots", "eup_slots", "xlu_units", "xlu_cycles", "valu_bf16"))
            assert chip.eup_ops_per_s and chip.xlu_ops_per_s
    # v5e: 3 XLUs, an instruction holding one 401/64 cycles (libtpu's bundles), at 1.5 GHz
    assert get_chip("tpu-v5e").xlu_ops_per_s == pytest.approx(3 / (401 / 64) * 1.5e9)
    assert get_chip("h100").vpu_ops_per_s is None and get_chip("h100").xlu_ops_per_s is None


def test_a_unit_without_a_figure_is_left_out_and_the_row_says_so():
    hlo = (DATA / "hlo" / "tpu_small.hlo").read_text()
    work = {"flops": [0.0, 0.0], "mxu": [0.0, 0.0], "vpu": [1e6, 1e6], "eup": [1e6, 1e6], "xlu": [1e6, 1e6],
            "vpu16": [0.0, 0.0]}
    figures = [PallasFigures("kernel", 1000, 1000, 0.0, 0.0, 0.0, 2000, work=work)]
    v5e = get_chip("tpu-v5e")
    unknown = dataclasses.replace(v5e, xlu_units=None)
    kernel = next(k for k in analyse_fusions(hlo, unknown, None, figures).kernels if k.name == "kernel")
    assert kernel.bound == "EUP" and "XLU left out" in kernel.note and "floor" in kernel.note
    known = next(k for k in analyse_fusions(hlo, v5e, None, figures).kernels if k.name == "kernel")
    assert known.bound == "XLU" and "left out" not in known.note  # an XLU instruction holds one of 3 for 6.3 cycles


def _body_work(kernel, *blocks, out):
    """One grid step's work of ``kernel`` on whole-array blocks ``blocks`` (shapes, f32), writing ``out``."""
    specs = [pl.BlockSpec(b, lambda i: (0,) * len(b)) for b in blocks]
    return _work(kernel, (1,), *(jnp.zeros(b, jnp.float32) for b in blocks), in_specs=specs,
                 out_spec=pl.BlockSpec(out, lambda i: (0,) * len(out)), out_shape=jax.ShapeDtypeStruct(out, jnp.float32))


def test_a_lane_reduction_folds_on_the_valu_and_ends_on_the_xlu():
    """libtpu's bundles of x.max(axis=-1) on a (512, 512) f32 block: 192 vmax.f32 fold the 4 registers
    of each 8 rows into one, 64 vmax.xlane finish them; a reduction down the sublanes takes no XLU."""
    def rows(x_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(x_ref[...].max(axis=-1, keepdims=True), o_ref.shape)

    def columns(x_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(x_ref[...].sum(axis=0, keepdims=True), o_ref.shape)

    work = _body_work(rows, (512, 512), out=(512, 128))
    assert (work["vpu"], work["xlu"]) == ([192, 192], [64, 64])  # its result is in every lane: no broadcast
    assert _body_work(columns, (512, 512), out=(8, 512))["xlu"] == [0, 0]


def test_a_column_taken_from_a_ref_is_broadcast_across_the_lanes_once():
    """flash attention's m_sc[:, :1]: one lane of each register; libtpu's bundles of this body
    broadcast it, and exp of it, with one vperm a register of rows (128 for two columns of 512 rows),
    each once though the block's sub and mul both use m; and issue 513 VALU instructions."""
    def kernel(x_ref, m_ref, o_ref):
        m = m_ref[:, :1]
        o_ref[...] = (x_ref[...] - m) * m + jnp.exp(m)

    work = _body_work(kernel, (512, 256), (512, 128), out=(512, 256))
    assert work["xlu"] == [2 * 64, 2 * 64]
    # exp of the column: 64 registers; sub, mul, add on the block's 128 each; exp's scaling and pop
    assert (work["eup"], work["vpu"]) == ([64, 64], [3 * 128 + 2 * 64, 3 * 128 + 2 * 64])


def test_bf16_arithmetic_counts_twice_on_a_chip_without_bf16_valu_ops():
    """libtpu's bundles of bf16 y * y + y on a (512, 512) block: 128 vmul.bf16 and 128 vadd.bf16 on
    v6e; 256 vmul.f32 and 256 vadd.f32 on v5e (and v4, v5p), one on each f32 half."""
    def kernel(x_ref, o_ref):
        y = x_ref[...]
        o_ref[...] = (y * y + y).astype(jnp.float32)

    call = pl.pallas_call(kernel, grid=(1,), in_specs=[pl.BlockSpec((512, 512), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((512, 512), lambda i: (0, 0)),
                          out_shape=jax.ShapeDtypeStruct((512, 512), jnp.float32))
    eqn = _find_pallas(jax.make_jaxpr(call)(jnp.zeros((512, 512), jnp.bfloat16)).jaxpr)
    body = Body({})
    body.visit(eqn.params["jaxpr"], (1.0, 1.0))
    work = grid_work(body, eqn.params["jaxpr"], 1, {})
    assert (work["vpu"], work["vpu16"]) == ([128 + 128 + 256, 128 + 128 + 256], [256, 256])  # the cast: 256 f32 registers
    vector = VectorWork(vpu=work["vpu"][0], vpu16=work["vpu16"][0])
    for name, valu in (("tpu-v6e", 512), ("tpu-7x", 512), ("tpu-v5e", 768), ("tpu-v5p", 768), ("tpu-v4", 768)):
        chip = get_chip(name)
        assert vector.seconds(chip)["VPU"] == pytest.approx(valu * chip.sublanes * chip.lanes / chip.vpu_ops_per_s)


def test_an_iota_is_counted_along_the_dim_it_varies():
    """The causal mask's row and column numbers: Mosaic keeps each replicated along the other dim,
    so adding an offset to them takes 64 + 4 registers, not 2 x 256 (libtpu's bundles: 134 vadd.s32
    of the flash sample's mask)."""
    def kernel(x_ref, o_ref):
        s = x_ref[...]
        rows = pl.program_id(0) * 512 + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = pl.program_id(0) * 512 + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        o_ref[...] = jnp.where(rows >= cols, s, -1e30)

    work = _body_work(kernel, (512, 512), out=(512, 512))
    assert work["vpu"] == [64 + 4 + 256 + 256, 64 + 4 + 256 + 256]  # the offsets, the compare, the select


def _report(spec: str, chip: str, args: str | None = None, sets: list[str] | None = None):
    from inspector.base.chips import get_chip as chip_of
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target
    from inspector.results.report import build_report

    target = load_target(spec, args=args, sets=sets)
    return build_report(target, chip_of(chip), capture(target, Backend(chip_of(chip))), fusions=True, pallas=True)


CAUSAL_FLASH = ("samples/attention.py:flash", "bf16[1,2048,128] bf16[1,2048,128] bf16[1,2048,128]")


@pytest.mark.libtpu
def test_causal_flash_counts_the_steps_under_the_mask_and_its_vector_work():
    """Of the (1, 4, 4) grid of 512 x 512 blocks, the 10 on or below the diagonal run the body:
    the flops are theirs (what the kernel's pl.CostEstimate says), and on the v6e, whose MXU is
    fast, the VALU work bounds the roofline (labelled memory-bound before, at the HBM's time)."""
    report = _report(*CAUSAL_FLASH[:1], "tpu-v6e", CAUSAL_FLASH[1])
    kernel = next(k for k in report.fusions.kernels if k.kind == "custom-call:pallas")
    assert kernel.flops == 10 * 4 * 512 * 512 * 128
    assert kernel.bound == "VPU"
    v6e = get_chip("tpu-v6e")
    assert kernel.roofline_s > max(kernel.hbm_bytes / v6e.hbm_bytes_per_s, kernel.flops / v6e.bf16_flops)
    assert report.fusions.agreement["flops_ratio"] == pytest.approx(1.0)


@pytest.mark.libtpu
def test_a_cost_estimate_is_compared_with_the_walks_traffic():
    """XLA takes a pl.CostEstimate's bytes_accessed for the kernel (every re-read block): the bytes
    compared are the BlockSpec walk's, not the kernel's results alone (-93% before)."""
    report = _report("samples/matmul.py:tiled", "tpu-v5e")
    agree = report.fusions.agreement
    assert agree["bytes_ratio"] == pytest.approx(1.0, abs=0.05)
    assert "differ by" not in agree["note"] and "pl.CostEstimate" in agree["note"]


def test_causal_flash_counts_the_eup_and_xlu_instructions_libtpu_issues():
    """The flash sample's 512 x 512 blocks, (1, 4, 4) grid: libtpu 0.0.42.1's v5e bundles issue,
    per grid step that runs the body, 320 EUP instructions (vpow2: exp of the scores and of the
    rescale) and 320 XLU ones (64 vmax.xlane, 64 vadd.xlane; 192 vperm broadcasting m_new, the new
    l and alpha across the lanes), and per q block's last step 128 EUP (vrcp, vlog2) and 64 XLU
    (l broadcast for the division). 10 steps run the body, 4 finish a q block."""
    from inspector.compilation.target import load_target

    target = load_target(CAUSAL_FLASH[0], args=CAUSAL_FLASH[1])
    eqn = _find_pallas(jax.make_jaxpr(target.call)(*target.args).jaxpr)
    kernel, grid = eqn.params["jaxpr"], eqn.params["grid_mapping"].grid
    body = Body({})
    body.visit(kernel, (1.0, 1.0))
    work = grid_work(body, kernel, 16, branch_steps(kernel, grid))
    assert work["eup"] == [10 * 320 + 4 * 128] * 2
    assert work["xlu"] == [10 * 320 + 4 * 64] * 2


def test_the_graph_colours_a_vector_bound_kernel_as_such():
    from inspector.hlo.graph import BOUND_FILL, VECTOR_FILL, node_fill
    from inspector.hlo.graph_model import Node

    node = lambda bound: Node(id="k", kind="kernel", title="k", order=0, group=None, kernels=["k"], folded=[], detail="",
                              source=None, ops=[], hbm_bytes=1, flops=0.0, time_s=1e-6, bound=bound)
    fills = {bound: node_fill(node(bound), "bound", 1.0)[0] for bound in ("memory", "compute", "VPU", "EUP", "XLU")}
    assert fills["VPU"] == fills["EUP"] == fills["XLU"] == VECTOR_FILL != BOUND_FILL[None]
    assert len({fills["memory"], fills["compute"], VECTOR_FILL}) == 3


@pytest.mark.libtpu
def test_causal_flash_with_narrow_kv_blocks_is_bound_by_its_xlu_work():
    """The flash sample at block_k=128 on the v5e: each step's lane reductions and broadcasts of its
    512 rows (320 XLU instructions, as libtpu's bundles issue) against a quarter of the 512 x 512
    step's matmul: the XLU bounds it, 0.24x of the 1,094 us the chip took (`compute`, 0.09x, before)."""
    import json

    report = _report("samples/attention.py:flash", "tpu-v5e", sets=["block_k=128"])
    kernel = next(k for k in report.fusions.kernels if k.kind == "custom-call:pallas")
    corpus = json.loads((DATA / "chip" / "v5e_corpus.json").read_text())
    measured = next(k for k in corpus["entries"]["sweep.flash:block_q=512,block_k=128"]["measured"]["kernels"]
                    if k["name"] == kernel.name)
    assert kernel.bound == "XLU"
    assert 0.2 < kernel.roofline_s / (measured["seconds"] / measured["launches"]) < 1.0
