"""The VMEM estimate's body terms (jax_internals/body_dots.py, pallas/vmem.py): which matmul
results a kernel keeps, what an unrolled loop keeps live, and the verdicts they give. The kernels
are tests/data/body_values.py; the shares are measured against libtpu (BENCHMARKS.md)."""
import dataclasses

import pytest

from conftest import DATA
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.pallas.analysis import analyse_pallas
from inspector.pallas.discovery import find_pallas_calls
from inspector.pallas.budgets import budget
from inspector.pallas.vmem import VREG_FILE_BYTES
from inspector.pallas.vmem_rules import rule, share
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

KERNELS = str(DATA / "body_values.py")
MiB = 2**20
V5E = get_chip("tpu-v5e")
BODY_MARGIN = share("body_margin", V5E)


def traced(name: str, args: str, sets=None):
    program = capture(load_target(f"{KERNELS}:{name}", args=args, sets=sets), Backend(get_chip("cpu")),
                      compile=False).program
    [call] = find_pallas_calls(program)
    return call.info, program


def test_a_matmul_accumulated_into_a_ref_is_not_kept():
    info, _ = traced("accumulated", "f32[512,128] f32[1024,128]")
    assert (info.body.held_bytes, info.body.unrolled_bytes) == (0, 0)
    assert budget(info, V5E).held_bytes == 0


def test_scores_a_softmax_reduces_and_sums_are_kept_whole_less_the_registers():
    info, _ = traced("softmax_scores", "f32[512,128] f32[1024,128]")
    assert info.body.held_bytes == info.body.summed_bytes == 2 * MiB  # the (512, 1024) f32 scores
    b = budget(info, V5E)
    assert b.held_bytes == int(share("summed_dot", V5E) * (2 * MiB - VREG_FILE_BYTES)) and b.verdict == "fits"
    assert b.certain_bytes == b.total_bytes - b.body_bytes + b.held_bytes


def test_scores_whose_exponentials_the_mxu_sums_are_kept_in_part():
    """One reduction (the max), the sum a matmul with ones: libtpu kept 0.61x of such scores less
    the registers (maxdiffusion's cross attention on v6e), so only rule held_dot is certain."""
    info, _ = traced("mxu_sum", "f32[512,128] f32[1024,128] f32[1024,128]")
    assert (info.body.held_bytes, info.body.summed_bytes) == (2 * MiB, 0)
    assert budget(info, V5E).held_bytes == int(share("held_dot", V5E) * (2 * MiB - VREG_FILE_BYTES))


def test_half_the_summed_scores_of_straight_line_code_are_certain():
    """Four heads in a Python loop, each softmax summed on the VPU: their scores and outputs in one
    stretch (4 x (2 MiB + 256 KiB)); half of it, less the registers, is certain."""
    info, _ = traced("heads_softmax", "f32[512,512] f32[1024,512] f32[1024,512]")
    assert info.body.summed_bytes == 2 * MiB and info.body.unrolled_bytes == 9 * MiB
    b = budget(info, V5E)
    assert b.body_unrolled and b.held_bytes == int(share("unrolled_summed", V5E) * (9 * MiB - VREG_FILE_BYTES))
    assert "straight-line" in b.held_what


def test_scores_too_large_to_hold_are_over_the_limit_with_the_reason():
    """(2048, 4096) f32 scores are 32 MiB, summed on the VPU: all but the registers' share of them is
    over v5e's 16 MiB; libtpu refuses."""
    info, program = traced("softmax_scores", "f32[2048,128] f32[4096,128]")
    b = budget(info, V5E)
    assert b.verdict == "over" and b.certain_bytes > b.limit_bytes
    [report], _ = analyse_pallas(program, [V5E], [V5E])
    [f] = [f for f in report.findings if f.code == "vmem-over-limit"]
    assert f.severity == "error" and "a matmul result whose softmax the body sums" in f.message


def test_a_softmax_stored_whole_is_held_beside_its_output_block():
    """PallasBench's qk-softmax (held out): its scores reach the output block through element-wise
    ops alone, yet libtpu kept 0.93x of them or more beside the block (its q and k placed in VMEM),
    as the team's log-softmax of matmul scores kept 1.0x: the result is held, 0.9 of it certain
    (rule stored_dot), whole in a "fits"."""

    info, _ = traced("softmax_out", "f32[512,128] f32[1024,128]")
    assert info.body.held_bytes == 0 and info.body.in_ref_bytes == info.body.stored_held_bytes == 2 * MiB  # (512, 1024) f32
    assert info.intermediates_bytes[0] == 2 * MiB and info.body.largest_value_bytes <= VREG_FILE_BYTES  # (512, 1) sums
    b = budget(info, V5E)
    assert b.body_bytes == 2 * MiB and b.held_bytes == int(share("stored_dot", V5E) * (2 * MiB - VREG_FILE_BYTES))
    assert "stores whole" in b.held_what
    # written in part ([:, :128]), the same softmax has no block to be built in: the scores count
    kept, _ = traced("softmax_scores", "f32[512,128] f32[1024,128]")
    assert kept.body.in_ref_bytes <= VREG_FILE_BYTES and kept.body.largest_value_bytes == 2 * MiB and not kept.body.stored_held_bytes


def test_an_unrolled_loop_without_matmuls_is_counted_as_certain():
    """sglang's biased top-k kept all its unrolled trips' values (1.01-1.18x) in every compile that
    ran out: they count toward "does not fit", not only against "fits"."""
    info, _ = traced("top_rounds", "f32[512,1024]")
    b = budget(info, V5E)
    assert b.body_unrolled and b.held_bytes == b.body_bytes == 4 * 2 * MiB and b.verdict == "fits"
    big, _ = traced("top_rounds", "f32[1024,2048]")  # 4 trips of 8 MiB: 32 MiB of 16
    b = budget(big, V5E)
    assert b.certain_bytes > b.limit_bytes and b.verdict == "over"


def test_scores_of_a_matmul_on_3d_values_are_held():
    """jnp.matmul on (1, S, D) values is a 2-D dot broadcast back to 3-D: still the scores."""
    info, _ = traced("batched_attention", "f32[2,1024,128] f32[2,1024,128] f32[2,1024,128]")
    assert info.body.held_bytes == 1024 * 1024 * 4


def test_an_unrolled_loop_keeps_its_chunks_scores_together():
    info, program = traced("chunked_scores", "f32[1024,128] f32[8192,128]", sets=["chunk=1024"])
    # a running max only reduces each chunk: none is held whole (libtpu: 1.31 MiB beyond the blocks)
    assert info.body.held_bytes == 0 and info.body.unrolled_bytes == 8 * 4 * MiB
    b = budget(info, V5E)
    assert b.body_unrolled and b.body_bytes == int(share("unrolled_dots", V5E) * 32 * MiB)
    assert b.verdict == "unsure"  # the chunks are over the limit together, one alone is not
    [report], _ = analyse_pallas(program, [V5E], [V5E])
    [f] = [f for f in report.findings if f.code == "vmem-may-exceed"]
    assert "the values of straight-line code" in f.message


def test_an_unrolled_loop_without_matmuls_counts_each_trips_value():
    info, _ = traced("top_rounds", "f32[512,1024]")
    assert info.body.unrolled_bytes == 0 and info.body.unrolled_values_bytes == 4 * 2 * MiB


@pytest.mark.parametrize("name, args, verdict", [
    ("softmax_scores", "f32[512,128] f32[1024,128]", "unsure"),
    ("accumulated", "f32[512,128] f32[1024,128]", "unsure"),
    ("softmax_out", "f32[512,128] f32[1024,128]", "unsure"),
    ("scaled", "f32[512,1024]", "fits"),
    ("softmax_scores", "f32[8,128] f32[256,128]", "fits"),
])
def test_a_total_exactly_at_the_limit_fits_unless_a_held_value_takes_it_there(name, args, verdict):
    """Scores held whole that take the total to the very limit leave no room for the compiler's
    temporaries (libtpu refused flash attention at exactly 16 MiB on v4, v5e, v5p), but what is
    certain of them is all but the registers' share, under the limit: only a compile decides
    (below); a matmul result built in its ref may not leave room either (JAX's matmul at exactly
    32 MiB: refused on v6e, fitted on TPU7x), so only a compile decides; blocks alone (libtpu's
    figure matches them to the byte) and an element-wise result built in its output block (a copy
    at exactly 32 MiB fits on v6e and TPU7x) leave room."""
    info, _ = traced(name, args)
    total = budget(info, V5E).total_bytes
    assert budget(dataclasses.replace(info, vmem_limit_bytes=total), V5E).verdict == verdict


def test_a_fits_with_body_values_leaves_a_margin_for_temporaries():
    """Within BODY_MARGIN of the limit with values of the body counted, three compiles of four ran
    out (BENCHMARKS.md): undecided there, "fits" below it."""
    info, _ = traced("softmax_scores", "f32[512,128] f32[1024,128]")
    b = budget(info, V5E)
    assert b.body_bytes == 2 * MiB
    near = int(b.total_bytes / (1 - BODY_MARGIN / 2))  # the total is 99% of this limit
    clear = int(b.total_bytes / (1 - 2 * BODY_MARGIN))
    assert budget(dataclasses.replace(info, vmem_limit_bytes=near), V5E).verdict == "unsure"
    assert budget(dataclasses.replace(info, vmem_limit_bytes=clear), V5E).verdict == "fits"


def test_the_warning_says_why_a_total_under_or_at_the_limit_is_undecided():
    """The finding names the term that makes it undecided: the body's value within the margin, a
    matmul result built in its ref at the very limit."""
    from inspector.pallas.analysis import _budget_findings

    info, _ = traced("softmax_scores", "f32[512,128] f32[1024,128]")
    near = int(budget(info, V5E).total_bytes / (1 - BODY_MARGIN / 2))
    [f] = _budget_findings(budget(dataclasses.replace(info, vmem_limit_bytes=near), V5E), V5E)
    assert f.code == "vmem-may-exceed" and f"within {BODY_MARGIN:.0%} of it" in f.message
    info, _ = traced("accumulated", "f32[512,128] f32[1024,128]")
    at = budget(info, V5E).total_bytes
    [f] = _budget_findings(budget(dataclasses.replace(info, vmem_limit_bytes=at), V5E), V5E)
    assert "a matmul result built in the ref it is stored into (2.00 MiB)" in f.message and ", at it" in f.message


def test_a_does_not_fit_rests_on_what_is_certain_alone():
    """Blocks and the held share that take the whole limit, or all of it but less than the register
    file, beside a value the body builds beyond the registers: undecided, not "does not fit" (that
    rested on the body's value, an unsure term: tests/data/block_scaled.py's fp8_block2d_whole fit in
    14.46 MiB of v5e's 16 with 15.88 certain), and the warning says a compile decides; a byte over
    it, "does not fit"."""
    from inspector.pallas.analysis import _budget_findings

    info, _ = traced("softmax_scores", "f32[512,128] f32[1024,128]")
    certain = budget(info, V5E).certain_bytes
    for limit in (certain, certain + VREG_FILE_BYTES // 2):
        b = budget(dataclasses.replace(info, vmem_limit_bytes=limit), V5E)
        assert b.certain_bytes == certain and b.body_bytes > b.held_bytes and b.verdict == "unsure"
        [f] = _budget_findings(b, V5E)
        assert f.code == "vmem-may-exceed" and "a deviceless libtpu compile" in f.message
    b = budget(dataclasses.replace(info, vmem_limit_bytes=certain - 1), V5E)
    assert b.verdict == "over"
    [f] = _budget_findings(b, V5E)
    assert f.code == "vmem-over-limit" and "(over by 0.00 MiB)" in f.message
    # blocks alone at the very limit still fit (libtpu's figure matches them to the byte)
    info, _ = traced("scaled", "f32[512,1024]")
    assert budget(dataclasses.replace(info, vmem_limit_bytes=budget(info, V5E).total_bytes), V5E).verdict == "fits"


def test_a_value_computed_element_wise_is_held_whole():
    """2x over a (512, 2048) f32 block, whose max a reduction takes before 2x - max goes on, is
    4 MiB no ref is built in and no matmul result as large is held: certain, all but the registers'
    share (nine held-out compiles it decided all ran out; AMLeng's softmax fitted at 11.83 MiB where
    blocks and such a value less the registers are 11.75), so a limit below blocks + 4 MiB is "does
    not fit", and the error says what it counted. 2x - max and its exponentials stream into the sum
    (body_dots._streams_into_reductions): not certain. Without a matmul, "fits" leaves no room for a
    second value of that size (libtpu kept one: tests/data/second_values.py)."""
    from inspector.pallas.analysis import _budget_findings

    info, _ = traced("row_logsumexp", "f32[512,2048]")
    assert info.body.computed_value_bytes == info.body.second_computed_bytes == 4 * MiB and info.body.held_bytes == 0
    b = budget(info, V5E)
    assert b.held_bytes == 4 * MiB - VREG_FILE_BYTES and b.body_bytes == 4 * MiB and b.room_for == []
    assert b.certain_bytes == b.total_bytes - VREG_FILE_BYTES
    tight = budget(dataclasses.replace(info, vmem_limit_bytes=b.certain_bytes - MiB), V5E)
    assert tight.verdict == "over"
    [f] = _budget_findings(tight, V5E)
    assert "3.75 MiB of it a value the body computes whole, all but what the registers hold" in f.message
    assert budget(dataclasses.replace(info, vmem_limit_bytes=b.total_bytes + MiB), V5E).verdict == "fits"


def test_tpu7x_leaves_room_for_the_bf16_parts_of_highest_precision_f32_matmuls():
    """An f32 (512, 1024) @ (1024, 1024) at HIGHEST precision: 1.5x its 6 MiB of operands as bf16
    parts, unsure on TPU7x (tops' chunk_fwd_o needed 0.84-1.36x of that beyond its blocks), not
    counted on v5e (which needed none)."""
    info, _ = traced("highest_matmul", "f32[512,1024] f32[1024,1024]")
    assert info.body.split_operand_bytes == 9 * MiB
    seven = get_chip("tpu-7x")
    b = budget(info, seven)
    assert [size for _, size in b.room_for] == [9 * MiB] and b.certain_bytes == b.total_bytes - b.body_bytes
    assert budget(info, V5E).room_for == []
    assert budget(dataclasses.replace(info, vmem_limit_bytes=b.total_bytes - MiB), seven).verdict == "unsure"


def test_a_concatenation_and_its_cast_are_their_parts():
    """Four (256, 1024) f32 parts of 1 MiB concatenated and cast to bf16: the body's largest value
    is a part (and the matmul result), not the 4 MiB concatenation nor its 2 MiB cast."""
    info, _ = traced("stacked", "f32[256,1024] f32[1024,128]")
    assert info.intermediates_bytes[0] == 4 * MiB  # the concatenation, as a plain count sees it
    assert info.body.largest_value_bytes == info.body.computed_value_bytes == 1 * MiB


def test_a_softmax_stored_into_a_narrower_block_is_held():
    """f32 exponentials summed, divided and stored as bf16: not built in the bf16 output block (it
    has half their bytes), so the (512, 2048) f32 value is held, less the registers (AMLeng's
    softmax said "fits" at the limit where libtpu needed the blocks and one f32 block more)."""
    info, _ = traced("softmax_narrow", "bf16[512,2048]")
    assert info.body.largest_value_bytes == info.body.computed_value_bytes == 4 * MiB  # the f32 values: not in the block
    assert budget(info, V5E).held_bytes == 4 * MiB - VREG_FILE_BYTES
    info, _ = traced("softmax_out", "f32[512,128] f32[1024,128]")  # f32 into f32: built there
    assert info.body.in_ref_bytes == 2 * MiB and info.body.largest_value_bytes < 2 * MiB


def test_a_fits_leaves_room_for_matmul_operands_the_body_computes():
    """q and k rotated before the scores' matmul: the MXU needs them whole beside the (2048, 512)
    f32 scores, room a "fits" leaves (pallasflash's fused RoPE: 1.73x the scores beyond the
    blocks); cast only, they feed the MXU as they go (maxtext's ragged attention)."""
    rotated, _ = traced("rotated_attention", "bf16[2048,128] bf16[512,128] f32[512,128]")
    assert rotated.body.summed_bytes == 4 * MiB and rotated.body.summed_operand_bytes == (2048 + 512) * 128 * 4
    room = dict(budget(rotated, V5E).room_for)
    assert room["the matmul operands the body computes beside the scores (not blocks read or cast)"] == (
        rotated.body.summed_operand_bytes)
    cast, _ = traced("rotated_attention", "bf16[2048,128] bf16[512,128] f32[512,128]", sets=["rotate=False"])
    assert cast.body.summed_bytes == 4 * MiB and cast.body.summed_operand_bytes == 0


def test_a_stack_is_its_parts():
    """Four (512, 1024) f32 rolled copies stacked (8 MiB), weighted and summed over the stack: no
    8 MiB value is held (libtpu needed nothing beyond the blocks for xma's causal conv, which does
    so; counted, it was a false "does not fit" on three chips)."""
    info, _ = traced("stacked_taps", "f32[512,1024] f32[4,1024]")
    assert info.body.largest_value_bytes == info.body.computed_value_bytes == 2 * MiB


def test_a_fits_leaves_room_for_a_loops_carries():
    """A fori_loop carrying a (2048, 128) f32 accumulator and two (2048, 1) statistics: each takes
    256 vregs (a statistic 512 bytes a row in its tiles), 3 MiB in all; a "fits" leaves room for
    the carries a step reads and those it writes (Pallas-Unbound's flash attention said "fits"
    where libtpu needed five or six such values)."""

    info, _ = traced("looped_attention", "f32[2048,128] f32[1024,128] f32[1024,128]")
    assert info.body.loop_carry_bytes == 3 * MiB
    room = dict(budget(info, V5E).room_for)
    assert room["the carries of a loop in the body, those a step reads and those it writes"] == share("loop_carry_copies", V5E) * 3 * MiB


def test_a_loops_carries_are_certain_beside_the_scores_a_step_keeps():
    """Between two steps of a rolled loop its carries are whole values: what the registers cannot
    hold of them is in VMEM, beside the scores each step keeps (the (2048, 256) f32 chunk whose
    softmax the body sums). Counted so, Pallas-Unbound's flash attention is "does not fit" on the
    six compiles where libtpu needs 26.81-138.57 MiB (held out, round nine)."""
    info, _ = traced("looped_attention", "f32[2048,128] f32[1024,128] f32[1024,128]")
    b = budget(info, V5E)
    scores = int(share("summed_dot", V5E) * (info.body.summed_bytes - VREG_FILE_BYTES))
    assert info.body.summed_bytes == 2 * MiB and b.held_bytes == scores + 3 * MiB
    blocks = sum(i.bytes for i in b.items[:4])
    assert b.certain_bytes == blocks + b.held_bytes


@pytest.mark.parametrize("clip", [True, False])
def test_a_dense_epilogue_is_built_in_its_output_block(clip):
    """x @ w.T, SiLU, jnp.clip (a jitted helper, followed in place), stored whole: the (256, 2048)
    transposed weight is no value of its own (the MXU takes it transposed), and the 4 MiB result
    is built in the output block, so nothing of the body is counted. MaxKernel's Dense kernels
    (held out, round ten) were false "does not fit" with the transpose or clip's values held, and
    undecided with room for 0.8 of the result; libtpu needed their blocks alone."""
    info, _ = traced("dense_epilogue", "f32[512,256] f32[2048,256]", sets=[f"clip={clip}"])
    assert info.body.unrolled_bytes == 4 * MiB and info.body.unrolled_unbuilt_bytes == 0
    assert info.body.computed_value_bytes < VREG_FILE_BYTES and info.body.in_ref_bytes == 4 * MiB
    b = budget(info, V5E)
    assert (b.body_bytes, b.held_bytes) == (0, 0)
    # beside the blocks, only what the matmul's lowering may spill (an unsure term, rule matmul_lowering):
    # the f32 x and the transposed w are read again from their blocks, the whole result's partial sums
    # are 512 x 2048 x 4 bytes
    assert b.spill_bytes == 4 * MiB and b.certain_bytes == (512 + 2048) * 256 * 4 + 4 * MiB  # one step: one buffer each
    assert b.total_bytes == sum(i.bytes for i in b.items) == b.certain_bytes + b.spill_bytes


def test_a_softmax_built_in_its_output_block_keeps_its_room():
    """A reduction on the way to the store (qk-softmax's pattern): the result is built in the ref
    but libtpu kept up to 0.78x of it beyond the blocks (PallasBench's qk-softmax on v6e), so its
    straight-line room stays."""
    info, _ = traced("softmax_out", "f32[512,128] f32[1024,128]")
    assert info.body.unrolled_unbuilt_bytes == info.body.unrolled_bytes > 0


def test_two_results_that_meet_are_neither_built_in_the_ref():
    """SwiGLU: silu(x @ w1) * (x @ w3) stored whole. Each result reaches the store through
    element-wise ops, but they meet in the product, so at most one could be built in the output
    block: room for both, the most v5e kept of them (rule met_results; pallas-forge's SwiGLU, held out round eleven, said "fits"
    with neither counted where libtpu needed 18.08 MiB of 16), and a share of one certain
    (tests/data/gated_units.py: libtpu kept at least 1.05 of one on v5e, rule met_result)."""

    info, _ = traced("gated", "f32[512,256] f32[256,2048] f32[256,2048]")
    assert info.body.met_bytes == 4 * MiB and info.body.unrolled_unbuilt_bytes == info.body.unrolled_bytes == 8 * MiB
    b = budget(info, V5E)
    assert b.body_unrolled and b.body_bytes == int(share("met_results", V5E) * 8 * MiB)
    assert b.held_bytes == int(share("met_result", V5E) * (4 * MiB - VREG_FILE_BYTES))


def test_row_statistics_that_are_the_largest_values_leave_room_in_a_fits():
    """LayerNorm over (16384, 64) blocks: the (16384, 1) mean and variance are 8 MiB each in vreg
    tiles, the largest values the body computes. None is certain (tests/data/row_statistics.py's
    RMSNorm kept none beyond its blocks), but a "fits" leaves room for a share of them, on v6e no
    more than the one statistic it kept beside the waiting one (rule row_statistics's most)."""

    info, _ = traced("normalised", "f32[65536,64]", ["block_rows=16384"])
    assert info.body.statistic_bytes == 8 * MiB and share("row_statistics", V5E) * info.body.statistic_count > 1
    for chip, kept in (("tpu-v4", share("row_statistics", V5E) * info.body.statistic_count), ("tpu-v6e", 1.0)):
        b = budget(info, get_chip(chip))
        room = [size for what, size in b.room_for if what.startswith("row statistics")]
        assert room == [int(kept * 8 * MiB)], chip
        assert b.certain_bytes + sum(room) <= b.total_bytes


def test_row_statistics_beside_the_scores_leave_room_in_a_fits():
    """samples/attention.py's flash at block_q 4096, block_k 128: its (4096, 1) statistics take as
    many vregs as its (4096, 128) scores. On v5e it said "fits" at 12.1 MiB where libtpu needs 17.47;
    room for a share of its statistics, no more than v5e keeps (rule row_statistics's most), makes it
    undecided."""

    program = capture(load_target("samples/attention.py:flash", args="bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
                                  sets=["block_q=4096", "block_k=128"]), Backend(get_chip("cpu")), compile=False).program
    [fwd] = [c.info for c in find_pallas_calls(program)]
    assert fwd.body.statistic_bytes == fwd.body.held_bytes == 2 * MiB
    b = budget(fwd, V5E)
    room = [size for what, size in b.room_for if what.startswith("row statistics")]
    assert room == [int(min(share("row_statistics", V5E) * fwd.body.statistic_count, rule("row_statistics").most_on(V5E)) * 2 * MiB)]
    assert b.verdict == "unsure" and b.certain_bytes < b.limit_bytes < b.total_bytes


def test_a_walks_maps_stay_with_their_jaxpr_when_another_takes_its_id():
    """A walk keeps a map of each jaxpr's users and producers by id; a jaxpr it made and dropped
    (a branch's, say) must not hand its id, and so its map, to the next one. That happened when
    the same memoised program was walked twice (test_vmem_estimates failed only in the full run)."""
    import jax
    import jax.numpy as jnp

    from inspector.jax_internals.body_dots import _Walk
    from inspector.jax_internals.value_chains import producer_map, user_map

    walk = _Walk()
    for n in range(1, 30):  # jaxprs dropped at once: CPython hands their ids to the next ones
        j = jax.make_jaxpr(lambda x, n=n: jnp.sin(x) * n + jnp.cos(x) if n % 2 else x * n)(1.0).jaxpr
        assert walk.users_of(j).keys() == user_map(j).keys()
        assert walk.producers_of(j).keys() == producer_map(j).keys()
