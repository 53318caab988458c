"""The VMEM estimate's rules about a kernel body, as a table: one row per rule.

Beside its blocks and scratch, a Pallas TPU kernel holds values its body builds when they outgrow
the vector registers. Each row says which bodies it matches (a predicate on ``BodyTerms``, the
body's facts from jax_internals/body_dots.py and what the earlier rows made of them), the bytes it
adds, its kind, and the share of those bytes the figures of libtpu's compiles set, with per-chip
overrides. The kinds, applied in this order (``apply_rules``):

- ``live``, ``live-values``: what one stretch of straight-line code keeps live together, its matmul
  results and (an unrolled loop without matmuls) its trips' values: the most any matching row gives;
- ``value``: the body's largest value, the first matching row's bytes;
- ``certain``: of that, what the compiler surely keeps (a "does not fit" rests on it): the most any
  matching row gives, except where a row ``replaces`` what the rows before it gave;
- ``room``: what else the body may keep beside its largest value: a "fits" leaves room for each;
- ``spill``: what a matmul's lowering may spill beyond the registers: a "fits" leaves room for the
  most any matching row gives, a "does not fit" never rests on it (it is never counted as certain,
  nor as a value of the body that the limit must leave room for);
- ``margin``: of the limit, what a "fits" with values of the body counted leaves to the compiler.

The measurements that set each row (which compiles, which chips) are in vmem_rule_evidence.json,
keyed by the row's name; docs/vmem-rules.md is generated from this table (tests/gen_docs.py).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Mapping

from ..base.chips import MXU_TAKES_FP8, Chip  # MXU_TAKES_FP8: rows fp8_as_bf16 and matmul_lowering
from ..base.pallas_model import BodyFacts, DotLowering, PallasCall

VREG_FILE_BYTES = 64 * 4096  # 64 vector registers of 8x128x32 bits
VREG_LANES = 128  # lanes of one vreg: a reduction along rows no wider stays in one vreg a row
# three or more reductions along the rows of 128-lane values keep more statistics than two do
MANY_ROW_REDUCTIONS = 3
# chips on which XLA may hand a kernel any input whole in VMEM, whatever its origin, outside its scoped
# limit ("xla_places_inputs" in the evidence); of the VMEM beside that limit, what XLA keeps for itself
# there ("placement_reserve")
XLA_PLACES_INPUTS = frozenset({"tpu-7x"})
PLACEMENT_RESERVE_BYTES = {"tpu-7x": 10 * 1024**2}
# chips on which XLA was seen to place every operand it may place that fits ("placement_beside_summed"):
# only there may a "fits" take their blocks out of the limit; elsewhere they stay an unsure term
PLACEMENT_SEEN = frozenset({"tpu-v5e", "tpu-v6e", "tpu-7x"})
# the evidence file's keys that are no row: the placement figures above, and when placement is relied on
PLACEMENT_KEYS = ("xla_places_inputs", "placement_reserve", "placement_beside_summed")
EVIDENCE_FILE = Path(__file__).with_name("vmem_rule_evidence.json")
KINDS = ("live", "live-values", "value", "certain", "room", "spill", "margin")


def chip_key(chip: Chip) -> str:
    """The name per-chip figures are keyed by: a chip over a slice (tpu-v5e:4x4) as the chip."""
    return chip.name.split(":")[0]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BodyTerms:
    """What the rules read: the body's facts, and what the earlier kinds of rows made of them."""

    facts: BodyFacts
    dots: bool  # the body has matmuls
    largest: int  # the body's largest value not built in a ref (or an intermediate's, where not followed)
    largest_body: int  # that, where it outgrows the registers (else 0)
    one_at_a_time: bool  # straight-line matmul results held whole, none summed on the VPU: one at a time
    statistics: bool  # (rows, 1) statistics outgrow the registers and are the body's largest values
    also_kept: float = 0.0  # statistics the chip keeps beside the one that waits (row "waiting_statistics")
    waiting: int = 0  # the statistics of one of several reductions, whole until the pass that uses them
    dots_live: int = 0  # the matmul results straight-line code keeps live together (rows "live")
    values_live: int = 0  # what an unrolled loop without matmuls keeps live (the "live-values" rows)
    body: int = 0  # the body's largest value as counted (rows "value")
    straight_line: bool = False  # that is what straight-line code keeps live
    held_so_far: int = 0  # what the certain rows before this one hold
    most: float | None = None  # a room row's bound on this chip (Rule.most)
    lowering: int = 0  # the most a matmul's lowering may hold in vregs on this chip (_lowering_on)

    @property
    def unrolled(self) -> int:
        return max(self.dots_live, self.values_live)

    @property
    def trips_held(self) -> bool:
        """What the unrolled loop's trips build is the body's value, and is held whole."""
        return self.straight_line and self.values_live > self.dots_live


Matches = Callable[[BodyTerms, float], bool]
Adds = Callable[[BodyTerms, float], int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule of the estimate: a row of RULES."""

    name: str  # the key into vmem_rule_evidence.json
    kind: str  # one of KINDS
    what: str  # what the bytes are, as the budget's item (or its held bytes) names them
    matches: Matches
    adds: Adds
    summary: str  # what it matches, in words (docs/vmem-rules.md)
    share: float | None = None  # the fitted share the bytes are taken at; None: no figure, all of them
    per_chip: Mapping[str, float] = dataclasses.field(default_factory=dict)  # the share where a chip differs
    # "room" rows: the most, in units of the value, a chip was seen to keep (None: no bound)
    most: Mapping[str, float] = dataclasses.field(default_factory=dict)
    only_on: frozenset[str] | None = None  # the chips it applies on (None: every TPU)
    not_on: frozenset[str] = frozenset()  # chips it does not apply on
    replaces: bool = False  # "certain": sets what is held even where the rows before it held more
    # what the bytes are where it depends on the body (else ``what``)
    describe: Callable[[BodyTerms], str] | None = None

    def applies_on(self, chip: Chip) -> bool:
        key = chip_key(chip)
        return (self.only_on is None or key in self.only_on) and key not in self.not_on

    def share_on(self, chip: Chip) -> float:
        return self.per_chip.get(chip_key(chip), 1.0 if self.share is None else self.share)

    def most_on(self, chip: Chip) -> float | None:
        return self.most.get(chip_key(chip))

    def what_of(self, t: BodyTerms) -> str:
        return self.describe(t) if self.describe is not None else self.what


def _statistics_kept(t: BodyTerms, share: float) -> float:
    """Row statistics a "fits" leaves room for, in statistics: the share of all, no more than the chip keeps."""
    kept = share * t.facts.statistic_count
    return kept if t.most is None else min(kept, t.most)


_REGS = VREG_FILE_BYTES

RULES: tuple[Rule, ...] = (
    # ---- live: what one stretch of straight-line code keeps live together
    Rule(name="unrolled_dots", kind="live", share=0.8,
         what="matmul results one stretch of straight-line code computes",
         summary="matmul results an unrolled loop's trips (or a Python loop) compute, where the body does not hold "
                 "them one at a time; without a result held whole, those not built in the ref they are stored into",
         matches=lambda t, s: bool(t.facts.held_bytes) and not t.one_at_a_time or
         not t.facts.held_bytes and not t.facts.met_bytes,
         adds=lambda t, s: int(s * (t.facts.unrolled_bytes if t.facts.held_bytes else t.facts.unrolled_unbuilt_bytes))),
    Rule(name="met_results", kind="live", share=1.0, per_chip={"tpu-v5e": 0.7, "tpu-v6e": 1.1, "tpu-7x": 0.9},
         what="matmul results that meet in an element-wise op",
         summary="two matmul results that meet in an element-wise op (SwiGLU's), none held whole: neither is built "
                 "in the output block",
         matches=lambda t, s: not t.facts.held_bytes and bool(t.facts.met_bytes),
         adds=lambda t, s: int(s * t.facts.unrolled_unbuilt_bytes)),
    Rule(name="unrolled_trips", kind="live-values", share=1.0,
         what="what an unrolled loop without matmuls builds",
         summary="an unrolled loop without matmuls: its trips x its body's largest value",
         matches=lambda t, s: True, adds=lambda t, s: int(s * t.facts.unrolled_values_bytes)),
    # ---- value: the body's largest value, the first row that matches
    Rule(name="straight_line", kind="value",
         what="values live together in straight-line code (matmul results, unrolled loops)",
         summary="what straight-line code keeps live (the live rows), where it outgrows the largest value and the registers",
         matches=lambda t, s: t.unrolled > max(t.largest_body, _REGS), adds=lambda t, s: t.unrolled),
    Rule(name="waiting_statistics", kind="value", share=0.0,
         per_chip={"tpu-v5e": 1.9, "tpu-v6e": 1.0, "tpu-7x": 1.0},
         what="row statistics of one of several reductions along the rows, whole until the pass that uses them",
         summary="row statistics ((rows, 1) values) the body's largest, made by several reductions along the rows: "
                 "one waits whole for the pass that uses it, less the registers; where three or more reductions "
                 "along 128-lane rows (no matmul) make them, the share more of them",
         matches=lambda t, s: t.waiting > t.largest_body, adds=lambda t, s: t.waiting,
         describe=lambda t: "row statistics of one of several reductions along the rows, whole until the pass that "
         "uses them" + (f", and {t.also_kept:g} more the chip keeps" if t.also_kept else "")),
    Rule(name="largest_value", kind="value", what="kernel intermediate (largest value in the body)",
         summary="the body's largest value not built in the ref it is stored into, where it outgrows the registers",
         matches=lambda t, s: t.largest_body > 0, adds=lambda t, s: t.largest_body),
    # ---- certain: what the compiler surely keeps of the body's value
    Rule(name="held_dot", kind="certain", share=0.6,
         what="the least libtpu keeps of a matmul result the body reduces and then uses whole",
         summary="a matmul result a reduction sees whole before it is used whole (softmax's scores), less the registers",
         matches=lambda t, s: True, adds=lambda t, s: int(s * (t.facts.held_bytes - _REGS))),
    Rule(name="summed_dot", kind="certain", share=1.0,
         what="a matmul result whose softmax the body sums, all but what the registers hold",
         summary="such a result whose exponentials the VPU sums too (a second reduction), less the registers",
         matches=lambda t, s: True, adds=lambda t, s: int(s * (t.facts.summed_bytes - _REGS))),
    Rule(name="stored_dot", kind="certain", share=0.9,
         what="the least libtpu keeps of a matmul result whose softmax the body stores whole",
         summary="such a result whose softmax the body stores whole into an output block as wide, less the registers",
         matches=lambda t, s: True, adds=lambda t, s: int(s * (t.facts.stored_held_bytes - _REGS))),
    Rule(name="unrolled_trips_held", kind="certain", replaces=True,
         what="what the unrolled loop's trips build",
         summary="what an unrolled loop without matmuls builds, where it is the body's value: all of it",
         matches=lambda t, s: t.trips_held, adds=lambda t, s: t.body),
    Rule(name="unrolled_summed", kind="certain", share=0.5, per_chip={"tpu-v4": 0.6, "tpu-v5p": 0.6},
         what="the least libtpu keeps of the matmul results straight-line code computes",
         summary="the matmul results straight-line code computes, its softmax summed on the VPU, less the registers",
         matches=lambda t, s: t.straight_line and not t.trips_held and bool(t.facts.summed_bytes),
         adds=lambda t, s: int(s * (t.facts.unrolled_bytes - _REGS))),
    Rule(name="met_result", kind="certain", share=0.6, per_chip={"tpu-v5e": 0.9, "tpu-v6e": 0.9},
         what="the least libtpu keeps of a matmul result that meets another, all but what the registers hold",
         summary="the larger of two matmul results that meet in an element-wise op, less the registers",
         matches=lambda t, s: True, adds=lambda t, s: int(s * (t.facts.met_bytes - _REGS))),
    Rule(name="waiting_statistics_held", kind="certain",
         what="the row statistics of one of several reductions along the rows, all but what the registers hold",
         summary="the waiting row statistics, where they are the body's value",
         matches=lambda t, s: t.body == t.waiting, adds=lambda t, s: t.waiting,
         describe=lambda t: "the row statistics of one of several reductions along the rows" +
         (f" and {t.also_kept:g} more the chip keeps beside them" if t.also_kept else "") +
         ", all but what the registers hold"),
    Rule(name="loop_carries", kind="certain",
         what="the carries of a rolled loop in the body beside the matmul results a step keeps, all but what the "
              "registers hold",
         summary="a rolled loop's carries, whole between its steps, beside the matmul results held so far (less the "
                 "registers where none)",
         matches=lambda t, s: t.facts.loop_carry_bytes > _REGS,
         adds=lambda t, s: (t.held_so_far + t.facts.loop_carry_bytes if t.held_so_far and not t.trips_held else
                            t.facts.loop_carry_bytes - _REGS)),
    Rule(name="computed_value", kind="certain",
         what="a value the body computes whole, all but what the registers hold",
         summary="a value computed element-wise (not a matmul result, not streamed into reductions) larger than any "
                 "matmul result held, less the registers",
         matches=lambda t, s: bool(t.body) and not t.straight_line and
         t.facts.computed_value_bytes > max(t.facts.held_bytes, _REGS),
         adds=lambda t, s: t.facts.computed_value_bytes - _REGS),
    # ---- room: what a "fits" leaves room for beside the body's value
    Rule(name="second_value", kind="room", share=0.8,
         what="part of a second value of the size of the largest the body computes, which the compiler can keep "
              "live beside it",
         summary="a second value the size of the largest the body computes, in a body with matmuls",
         matches=lambda t, s: bool(t.body) and not t.straight_line and t.dots and
         t.facts.second_computed_bytes == t.largest > max(t.facts.held_bytes, _REGS),
         adds=lambda t, s: int(s * t.facts.second_computed_bytes)),
    Rule(name="computed_operands", kind="room",
         what="the matmul operands the body computes beside the scores (not blocks read or cast)",
         summary="the operands the body computes (RoPE's q and k) of a matmul whose softmax it sums",
         matches=lambda t, s: t.facts.summed_bytes > _REGS and t.facts.summed_operand_bytes > _REGS,
         adds=lambda t, s: t.facts.summed_operand_bytes),
    Rule(name="loop_carry_copies", kind="room", share=2.0,
         what="the carries of a loop in the body, those a step reads and those it writes",
         summary="a rolled loop's carries: copies of them (those a step reads and those it writes)",
         matches=lambda t, s: t.facts.loop_carry_bytes > _REGS, adds=lambda t, s: int(s * t.facts.loop_carry_bytes)),
    Rule(name="split_f32_operands", kind="room", only_on=frozenset({"tpu-7x"}),
         what="the bf16 parts of the f32 operands of HIGHEST-precision matmuls",
         summary="the bf16 parts of HIGHEST-precision f32 matmuls' operands, on a chip that keeps them",
         matches=lambda t, s: t.facts.split_operand_bytes > _REGS, adds=lambda t, s: t.facts.split_operand_bytes),
    Rule(name="fp8_as_bf16", kind="room", not_on=MXU_TAKES_FP8,
         what="the fp8 matmul operands as bf16, which the chip's MXU takes and the register allocator spills when "
              "they outgrow the registers",
         summary="fp8 matmul operands as bf16, on a chip whose MXU does not take fp8",
         matches=lambda t, s: t.facts.mxu_operand_f8_bf16_bytes > _REGS,
         adds=lambda t, s: t.facts.mxu_operand_f8_bf16_bytes),
    Rule(name="row_statistics", kind="room", share=0.3, most={"tpu-v5e": 2.0, "tpu-v6e": 1.0, "tpu-7x": 1.0},
         what="row statistics the body computes",
         summary="row statistics several reductions make, the body's largest values: the share of all of them, no "
                 "more than the chip was seen to keep, beyond those counted as waiting",
         matches=lambda t, s: t.statistics and t.facts.statistic_reductions != 1 and _statistics_kept(t, s) > t.also_kept,
         adds=lambda t, s: int((_statistics_kept(t, s) - t.also_kept) * t.facts.statistic_bytes)),
    Rule(name="reduced_row", kind="room",
         what="a value wider than a vreg that a reduction along its rows sees whole before it is used whole, beyond "
              "the body's largest",
         summary="a value wider than a vreg a reduction along its rows sees whole, then stored, in a body without matmuls",
         matches=lambda t, s: t.facts.reduced_row_bytes > max(t.body, _REGS) and not t.dots,
         adds=lambda t, s: t.facts.reduced_row_bytes - t.body),
    Rule(name="one_at_a_time", kind="room", share=0.25,
         what="part of the next matmul result straight-line code computes beside the one it holds",
         summary="straight-line matmul results held whole one at a time: part of the next beside the one held",
         matches=lambda t, s: t.one_at_a_time and t.facts.held_bytes > _REGS,
         adds=lambda t, s: int(s * t.facts.held_bytes)),
    # ---- spill: what a matmul's lowering may spill, which a "fits" leaves room for and nothing else rests on
    Rule(name="matmul_lowering", kind="spill",
         what="what a matmul's lowering may hold in the vector registers and spill (its operands laid out or "
              "converted for the MXU, the values the body computes only for them, its result's partial sums)",
         summary="the matmul whose lowering holds the most, bounded by its shapes: the operands it lays out or "
                 "converts for the MXU as the MXU takes them (a packed or computed lhs, a computed rhs, 8-bit as bf16 "
                 "where the MXU does not take it), the largest value the body computes only for an operand, and its "
                 "whole result's 32-bit partial sums; beyond the body's values as counted, and an unsure term only",
         matches=lambda t, s: t.lowering > _REGS, adds=lambda t, s: t.lowering + t.facts.operand_chain_bytes),
    # ---- margin: of the limit, left to the compiler's temporaries
    Rule(name="body_margin", kind="margin", share=0.02, what="room for the compiler's temporaries",
         summary="a body value counted: this share of the limit is left to the compiler's temporaries",
         matches=lambda t, s: bool(t.body), adds=lambda t, s: 0),
)


def rule(name: str, rules: tuple[Rule, ...] = RULES) -> Rule:
    return next(r for r in rules if r.name == name)


def share(name: str, chip: Chip, rules: tuple[Rule, ...] = RULES) -> float:
    """A rule's share on a chip."""
    return rule(name, rules).share_on(chip)


def evidence() -> dict[str, dict]:
    """The measurements that set each rule, by rule name (vmem_rule_evidence.json)."""
    return json.loads(EVIDENCE_FILE.read_text())


@dataclasses.dataclass(frozen=True, kw_only=True)
class BodyCount:
    """What the rules count of a kernel body on one chip."""

    body: int  # the body's largest value, then what a "fits" leaves room for beside it
    body_what: str  # the item the body's value is counted as ("" where none)
    largest: int  # the body's largest value not built in a ref
    held: int  # of body: what is certain
    held_what: str
    straight_line: bool
    room_for: list[tuple[str, int]]
    margin: float  # of the limit, left to the compiler where the body counts
    spill: int = 0  # what a matmul's lowering may spill (the "spill" rows): unsure, never certain
    spill_what: str = ""


def _terms(info: PallasCall, chip: Chip, rules: tuple[Rule, ...]) -> BodyTerms:
    f = info.body
    largest = f.largest_value_bytes if f.largest_value_bytes is not None else \
        info.intermediates_bytes[0] if info.intermediates_bytes else 0
    largest = max(largest, f.stored_held_bytes)  # held beside its output block, not built in it
    statistics = f.statistic_bytes > VREG_FILE_BYTES and \
        f.statistic_bytes >= max(f.held_bytes, f.largest_value_bytes or 0)
    many = f.statistic_reductions >= MANY_ROW_REDUCTIONS and f.statistic_lanes <= VREG_LANES and not info.dots
    waiting_rule = next((r for r in rules if r.name == "waiting_statistics" and r.applies_on(chip)), None)
    also_kept = waiting_rule.share_on(chip) if statistics and many and waiting_rule else 0.0
    waiting = f.statistic_bytes - VREG_FILE_BYTES + int(also_kept * f.statistic_bytes) \
        if statistics and f.statistic_reductions > 1 else 0
    lowering = max((_lowering_on(d, chip) for d in f.dot_lowerings), default=0)
    return BodyTerms(facts=f, dots=bool(info.dots), largest=largest, lowering=lowering,
                     largest_body=largest if largest > VREG_FILE_BYTES else 0,
                     one_at_a_time=bool(f.held_bytes) and not f.summed_bytes and f.unrolled_bytes > f.held_bytes,
                     statistics=statistics, also_kept=also_kept, waiting=waiting)


def _as_the_mxu_takes(held: int, as_bf16: int, kind: str, chip: Chip) -> int:
    """An operand's bytes as the chip's MXU takes it: an 8-bit one as bf16 where the MXU does not take
    it (fp8 but on MXU_TAKES_FP8, int8 on a chip without int8 ops, Chip.int8_ops)."""
    converted = kind == "float8" and chip_key(chip) not in MXU_TAKES_FP8 or kind == "int8" and not chip.int8_ops
    return as_bf16 if converted else held


def _lowering_on(dot: DotLowering, chip: Chip) -> int:
    """The most one matmul's lowering may hold in vregs, and so spill, on a chip (body_dots._lowering),
    from the kernel's shapes: the operands it lays out or converts for the MXU, as the MXU takes them,
    and its whole result's 32-bit partial sums, each (8, 128) tile a vreg."""
    sums = -(-dot.rows // 8) * -(-dot.cols // VREG_LANES) * VREG_FILE_BYTES // 64
    return _as_the_mxu_takes(dot.lhs, dot.lhs_as_bf16, dot.lhs_kind, chip) + \
        _as_the_mxu_takes(dot.rhs, dot.rhs_as_bf16, dot.rhs_kind, chip) + sums


def _of_kind(rules: tuple[Rule, ...], kind: str, chip: Chip) -> list[Rule]:
    return [r for r in rules if r.kind == kind and r.applies_on(chip)]


def _live(t: BodyTerms, chip: Chip, rules: tuple[Rule, ...]) -> BodyTerms:
    """The live rows: the matmul results kept live together, and the values of a loop without matmuls."""
    def most(kind: str) -> int:
        return max((r.adds(t, r.share_on(chip)) for r in _of_kind(rules, kind, chip) if r.matches(t, r.share_on(chip))),
                   default=0)
    return dataclasses.replace(t, dots_live=most("live"), values_live=most("live-values"))


def apply_rules(info: PallasCall, chip: Chip, rules: tuple[Rule, ...] = RULES) -> BodyCount:
    """The table's rows applied to a kernel's body on a chip, kind by kind (the module's docstring)."""
    t = _live(_terms(info, chip, rules), chip, rules)
    body, body_what = 0, ""
    for r in _of_kind(rules, "value", chip):
        if r.matches(t, r.share_on(chip)):
            body, body_what = r.adds(t, r.share_on(chip)), r.what_of(t)
            break
    t = dataclasses.replace(t, body=body, straight_line=body == t.unrolled > 0)
    held, held_what = 0, ""
    for r in _of_kind(rules, "certain", chip):
        s = r.share_on(chip)
        if r.matches(dataclasses.replace(t, held_so_far=held), s):
            size = r.adds(dataclasses.replace(t, held_so_far=held), s)
            if r.replaces or size > held:
                held, held_what = size, r.what_of(t)
    room_for: list[tuple[str, int]] = []
    for r in _of_kind(rules, "room", chip):
        s, bounded = r.share_on(chip), dataclasses.replace(t, most=r.most_on(chip))
        if r.matches(bounded, s):
            room_for.append((r.what_of(bounded), r.adds(bounded, s)))
    spill, spill_what = 0, ""
    for r in _of_kind(rules, "spill", chip):
        s = r.share_on(chip)
        if r.matches(t, s) and (size := r.adds(t, s)) > spill:
            spill, spill_what = size, r.what_of(t)
    margins = [r.share_on(chip) for r in _of_kind(rules, "margin", chip)
               if r.matches(dataclasses.replace(t, body=body + sum(size for _, size in room_for)), r.share_on(chip))]
    return BodyCount(body=body, body_what=body_what, largest=t.largest, held=held,
                     held_what=held_what, straight_line=t.straight_line, room_for=room_for,
                     margin=max(margins, default=0.0), spill=spill, spill_what=spill_what)

