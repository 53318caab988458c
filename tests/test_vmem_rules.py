"""The VMEM estimate's rules are rows of a table (inspector/pallas/vmem_rules.py): a rule is added
by adding a row, a chip's figure by an entry of a row, and each row's evidence is in one data file
keyed by its name."""
from __future__ import annotations

import dataclasses

from conftest import DATA, ROOT

from inspector.compilation.backends import Backend
from inspector.base.chips import CHIPS, Chip, get_chip
from inspector.pallas import vmem_rules
from inspector.pallas.discovery import find_pallas_calls
from inspector.pallas.budgets import budget
from inspector.pallas.vmem import tpu_budget
from inspector.pallas.vmem_rules import KINDS, PLACEMENT_KEYS, RULES, Rule, evidence
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

MiB = 2**20
V5E, V6E = get_chip("tpu-v5e"), get_chip("tpu-v6e")


def softmax_scores():
    """A softmax over (512, 1024) f32 scores, its sum on the MXU (tests/data/body_values.py's mxu_sum):
    a share of the scores is certain (row held_dot)."""
    target = load_target(f"{DATA / 'body_values.py'}:mxu_sum", args="f32[512,128] f32[1024,128] f32[1024,128]")
    [call] = find_pallas_calls(capture(target, Backend(get_chip("cpu")), compile=False).program)
    return call.info


def test_rows_are_named_once_with_a_known_kind_and_their_evidence():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert {r.kind for r in RULES} <= set(KINDS)
    found = evidence()
    assert set(found) == set(names) | set(PLACEMENT_KEYS)
    chips = {c.name for c in CHIPS}
    for name, entry in found.items():
        assert entry["evidence"] and entry["data"], name
        assert all((ROOT / path).is_file() for path in entry["data"]), name
        assert set(entry["chips"]) <= chips, name
    for r in RULES:
        assert set(r.per_chip) | set(r.most) | set(r.only_on or ()) | set(r.not_on) <= chips, r.name


def test_fitted_figures_are_not_the_chips():
    fields = {f.name for f in dataclasses.fields(Chip)}
    assert not fields & {"met_result_share", "met_results_room", "unrolled_summed_share", "statistics_room",
                         "statistics_kept", "vmem_operands", "vmem_operand_reserve_bytes", "splits_f32_matmuls",
                         "mxu_takes_fp8"}


def test_a_rule_is_added_by_adding_a_row():
    """A room row that matches every body adds its bytes to the budget and to what a "fits" leaves room for."""
    info = softmax_scores()
    before = tpu_budget(info, V5E)
    row = Rule(name="one_mib_more", kind="room", what="a test's MiB", summary="every body",
               matches=lambda t, s: True, adds=lambda t, s: int(s * MiB), share=1.0, per_chip={"tpu-v6e": 2.0})
    after = tpu_budget(info, V5E, RULES + (row,))
    assert after.total_bytes == before.total_bytes + MiB and after.body_bytes == before.body_bytes + MiB
    assert after.room_for == before.room_for + [("a test's MiB", MiB)]
    assert tpu_budget(info, V6E, RULES + (row,)).total_bytes == tpu_budget(info, V6E).total_bytes + 2 * MiB
    assert budget(info, V5E) == before  # the table in use is unchanged


def test_a_certain_row_raises_what_is_held_and_can_decide_the_verdict():
    info = softmax_scores()
    info = dataclasses.replace(info, vmem_limit_bytes=tpu_budget(info, V5E).total_bytes - MiB)
    row = Rule(name="all_of_it", kind="certain", what="all of the scores", summary="every body",
               matches=lambda t, s: True, adds=lambda t, s: t.body)
    before, after = tpu_budget(info, V5E), tpu_budget(info, V5E, RULES + (row,))
    value = after.body_bytes - sum(size for _, size in after.room_for)  # the body's value, beside the room
    assert before.verdict == "unsure" and after.held_bytes == value > before.held_bytes
    assert after.held_what == "all of the scores" and after.verdict == "over"


def test_a_row_off_on_a_chip_counts_nothing_there():
    info = softmax_scores()
    held = vmem_rules.rule("held_dot")
    rows = tuple(dataclasses.replace(r, not_on=frozenset({"tpu-v5e"})) if r is held else r for r in RULES)
    assert tpu_budget(info, V5E, rows).held_bytes == 0 < tpu_budget(info, V5E).held_bytes
    assert tpu_budget(info, V6E, rows) == tpu_budget(info, V6E)


def test_a_chip_over_a_slice_takes_the_chips_figures():
    assert vmem_rules.share("met_result", get_chip("tpu-v5e:4x4")) == vmem_rules.share("met_result", V5E) == 0.9
