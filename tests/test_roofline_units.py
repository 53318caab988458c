"""A Pallas kernel's roofline counts each unit of the TensorCore: its HBM traffic, its MXU flops, its
VPU (VALU) and EUP instructions, one a register, from the kernel body; a top-level pl.when at the
grid steps that take it; each unit at the chip table's rate, none guessed. And the bytes of a
kernel with a pl.CostEstimate are compared with XLA's like with like."""
from __future__ import annotations

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
    # exp: one EUP instruction a register; the multiply one VALU instruction a register
    assert work["eup"] == [2 * steps, 2 * steps]
    assert work["vpu"] == [2 * steps, 2 * steps]
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
            assert chip.sources["valu_slots"] and chip.sources["eup_slots"]
    v4 = get_chip("tpu-v4")
    assert v4.eup_slots is None and v4.eup_ops_per_s is None and "no source" in v4.sources["eup_slots"]
    assert get_chip("h100").vpu_ops_per_s is None


def test_a_unit_without_a_figure_is_left_out_and_the_row_says_so():
    hlo = (DATA / "hlo" / "tpu_small.hlo").read_text()
    work = {"flops": [0.0, 0.0], "mxu": [0.0, 0.0], "vpu": [1e6, 1e6], "eup": [1e6, 1e6]}
    figures = [PallasFigures("kernel", 1000, 1000, 0.0, 0.0, 0.0, 2000, work=work)]
    v4 = analyse_fusions(hlo, get_chip("tpu-v4"), None, figures)
    kernel = next(k for k in v4.kernels if k.name == "kernel")
    assert kernel.bound == "VPU" and "EUP left out" in kernel.note and "tpu-v4" in kernel.note
    v5e = next(k for k in analyse_fusions(hlo, get_chip("tpu-v5e"), None, figures).kernels if k.name == "kernel")
    assert v5e.bound == "EUP" and "left out" not in v5e.note  # the EUP's one instruction a cycle is the slower


def _report(spec: str, chip: str, args: str | None = None):
    from inspector.base.chips import get_chip as chip_of
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target
    from inspector.results.report import build_report

    target = load_target(spec, args=args)
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
