"""Inputs XLA may hand a kernel whole in VMEM: which operands the program computes before the
kernel (jax_internals/operand_origins.py), and the estimate's unsure term for them. The kernels
are tests/data/xla_placed.py; what libtpu does with each was measured on v5e (its docstrings)."""
import pytest

from conftest import DATA
from inspector.compilation.backends import Backend
from inspector.verbs.checking import run_check
from inspector.base.chips import get_chip
from inspector.pallas.discovery import find_pallas_calls
from inspector.pallas.budgets import budget
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

KERNELS = str(DATA / "xla_placed.py")
V5E = get_chip("tpu-v5e")
MiB = 2**20
SMALL_WORK = "bf16[1024,8192] f32[768,2048]"  # z's fusion writes 6 MiB: too little to hide x's 16 MiB copy


def info_of(name: str, args: str | None = None):
    target = load_target(f"{KERNELS}:{name}", args=args)
    [call] = find_pallas_calls(capture(target, Backend(get_chip("cpu")), compile=False).program)
    return call.info


def test_an_argument_passed_straight_is_not_made_by_an_op():
    info = info_of("argument")
    assert [(o.operand, o.made_by_op) for o in info.operands if o.role == "input"] == [
        ("x_ref", False), ("z_hbm_ref", False)]
    assert info.work_before_bytes == 0


def test_an_input_a_fusion_makes_is_made_by_an_op():
    info = info_of("computed")
    assert [o.made_by_op for o in info.operands if o.role == "input"] == [True, False]
    assert info.work_before_bytes == 16 * MiB


def test_work_before_the_kernel_counts_what_it_writes():
    assert info_of("copied_meanwhile").work_before_bytes == 8 * MiB
    assert info_of("copied_meanwhile", SMALL_WORK).work_before_bytes == 6 * MiB


def test_an_input_xla_may_place_is_placed_when_it_fits_beside():
    """x is computed, or copied while 8 MiB are written: XLA places it whole (libtpu fits both), so
    its 16 MiB of blocks leave the limit; the body holds nothing else unsure."""
    for name, args in (("computed", None), ("copied_meanwhile", None)):
        b = budget(info_of(name, args), V5E)
        assert b.verdict == "fits", name
        [x] = [i for i in b.items if i.what == "x_ref"]
        assert x.maybe_outside and b.placed_bytes == 16 * MiB and b.outside_bytes == 0
    for name, args in (("argument", None), ("copied_meanwhile", SMALL_WORK)):
        assert budget(info_of(name, args), V5E).verdict == "over", name


def test_placement_is_not_relied_on_beside_a_softmax_the_body_sums():
    """Beside a body value, placement is relied on (flax's LayerNorm fits on v5e in 6.49 MiB, its
    32 MiB input and output placed), but not beside a softmax the VPU sums, which kept up to 2.8
    scores (splash attention and JetStream's prefill ran out on v5e with their inputs placed): the
    operand is an unsure term again."""
    import dataclasses

    computed = info_of("computed")
    info = dataclasses.replace(computed, body=dataclasses.replace(computed.body, largest_value_bytes=2 * MiB),
                               vmem_limit_bytes=24 * MiB)
    b = budget(info, V5E)
    assert b.verdict == "fits" and b.placed_bytes == 16 * MiB and b.outside_bytes == 0
    summed = dataclasses.replace(info, body=dataclasses.replace(info.body, held_bytes=2 * MiB, summed_bytes=2 * MiB))
    b = budget(summed, V5E)
    assert b.verdict == "unsure" and b.placed_bytes == 0 and b.outside_bytes == 16 * MiB


def test_what_xla_makes_a_bitcast_passes_an_operand_through():
    """A pad by nothing before, a dim of size 1 added, reduced and transposed after: no work on
    the buffers, so x and the output are placed as if handed straight (libtpu refuses, 32 MiB)."""
    info = info_of("through_views")
    assert [(o.operand, o.made_by_op, o.read_by_op) for o in info.operands if o.operand != "z_hbm_ref"] == [
        ("x_ref", False, False), ("o_ref", False, False)]
    assert budget(info, V5E).verdict == "over"


def test_an_output_an_op_reads_next_is_placed():
    """XLA can write the output into VMEM for the fusion that reads it (libtpu fits read_after)."""
    [read] = [o.read_by_op for o in info_of("read_after").operands if o.role == "output"]
    [returned] = [o.read_by_op for o in info_of("argument").operands if o.role == "output"]
    assert read and not returned
    b = budget(info_of("read_after"), V5E)
    assert b.verdict == "fits" and b.placed_bytes == 16 * MiB


def test_an_argument_xla_copies_out_of_its_tpu_layout_is_placed():
    """A (2, 16384, 64) f32 argument is stored with 16384 minor on a TPU: XLA copies it into the
    kernel's layout and can write the copy into VMEM, and the output back (libtpu fits narrow with
    0 B of scoped VMEM where its blocks are 32 MiB of v5e's 16); a 128-wide one is not copied."""
    info = info_of("narrow")
    assert [(o.role, o.made_by_op, o.read_by_op) for o in info.operands] == [("input", True, False),
                                                                            ("output", False, True)]
    b = budget(info, V5E)
    assert b.verdict == "fits" and b.placed_bytes == 32 * MiB
    wide = info_of("narrow", "f32[2,16384,128]")
    assert not any(o.made_by_op or o.read_by_op for o in wide.operands)
    assert budget(wide, V5E).verdict == "over"


def test_operands_xla_places_must_fit_beside_the_scoped_region_together():
    """Of four 32 MiB operands with 16 MiB of blocks each, at most three fit in v5e's 112 MiB
    beside its scoped 16: at least one's blocks stay in the limit (fused recurrent GLA's did)."""
    from inspector.pallas.vmem import _taken_out

    for v5e in ((False, False), (True, False)):
        assert _taken_out([(32 * MiB, 16 * MiB)] * 4, 112 * MiB, *v5e) == (0, 48 * MiB)
        assert _taken_out([(100 * MiB, 1 * MiB), (20 * MiB, 8 * MiB)], 110 * MiB, *v5e) == (0, 8 * MiB)
        assert _taken_out([], 112 * MiB, *v5e) == (0, 0)
    # all of them when they fit together
    assert _taken_out([(8 * MiB, 4 * MiB)] * 2, 22 * MiB, True, False) == (8 * MiB, 8 * MiB)
    assert _taken_out([(8 * MiB, 4 * MiB)] * 2, 22 * MiB, False, False) == (0, 8 * MiB)
    # TPU7x: else the smallest first while they fit (the two of 4 MiB, not the 16 beside one of them)
    assert _taken_out([(16 * MiB, 8 * MiB), (4 * MiB, 2 * MiB), (4 * MiB, 2 * MiB)], 22 * MiB, True, True) == (
        4 * MiB, 4 * MiB)
    assert _taken_out([(14 * MiB, 8 * MiB), (6 * MiB, 1 * MiB), (6 * MiB, 1 * MiB)], 22 * MiB, True, True) == (
        2 * MiB, 2 * MiB)


@pytest.mark.libtpu
@pytest.mark.slow
@pytest.mark.parametrize("name, args, libtpu_fits", [
    ("argument", None, False), ("computed", None, True), ("copied_meanwhile", None, True),
    ("copied_meanwhile", SMALL_WORK, False), ("through_views", None, False), ("read_after", None, True),
    ("narrow", None, True), ("narrow", "f32[2,16384,128]", False)])
def test_the_estimate_agrees_with_libtpu(name, args, libtpu_fits):
    """libtpu's compile on v5e, against the estimate: they agree on each."""
    target = load_target(f"{KERNELS}:{name}", args=args)
    row = run_check(target, [V5E]).targets[0]
    assert row.compiler_fits is libtpu_fits, row.compiler_message
    guess = run_check(target, [V5E], estimate_only=True).targets[0]
    assert guess.fits is libtpu_fits


def test_placement_is_not_relied_on_for_a_kernel_in_a_branch_or_a_shard_map():
    """In a lax.cond branch or a shard_map, an operand's origin is assumed, not followed: libtpu kept
    the blocks of both in the scoped limit on v5e (128 KiB for in_cond's kernel, 12 MiB for the
    whole-shard copy), so they stay an unsure term, never taken out."""
    for spec in (f"{DATA / 'real_patterns.py'}:in_cond", f"{DATA / 'sharded.py'}:whole_shard_kernel"):
        for call in find_pallas_calls(capture(load_target(spec), Backend(get_chip("cpu")), compile=False).program):
            b = budget(call.info, V5E)
            assert not call.info.origins_followed and b.placed_bytes == 0 and b.outside_bytes > 0, spec
    assert info_of("computed").origins_followed


@pytest.mark.libtpu
def test_the_views_say_which_blocks_xla_places():
    """An estimate of 0 B says why: the Pallas view's needs column names the blocks placed, and
    check's table says its estimate leaves them out."""
    import io

    from rich.console import Console

    from inspector.views.pallas import budget_table, check_view

    result = run_check(load_target(f"{KERNELS}:narrow"), [V5E], estimate_only=True)
    out = io.StringIO()
    console = Console(file=out, width=200)
    console.print(check_view(result))
    console.print(budget_table(result.kernels[0]))
    text = out.getvalue()
    assert "estimate: without the blocks of operands XLA hands a kernel whole in VMEM" in text
    assert "0 B (32 MiB placed)" in text
