"""Flops and transcendentals of HLO instructions and computations, counted as XLA's
HloCostAnalysis counts them: a dot costs 2 flops per multiply-add, an elementwise op one flop per
element, a transcendental one transcendental per element, a reduction one reducer op per element
folded; a convolution only the window positions that land on real input elements."""
from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter

from ..base.chips import F32_MXU_PASSES
from .module import HloModule, Instruction

TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "rsqrt",
                  "sqrt", "cbrt", "sine", "cosine", "tan", "tanh", "erf", "atan2"}
ELEMENTWISE = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "compare",
               "select", "and", "or", "xor", "not", "remainder", "clamp", "sign", "floor", "ceil",
               "round-nearest-afz", "round-nearest-even", "shift-left", "shift-right-logical",
               "shift-right-arithmetic", "is-finite", "real", "imag", "popcnt", "count-leading-zeros"}

@dataclasses.dataclass
class Cost:
    flops: float = 0.0
    transcendentals: float = 0.0
    reduce_window_flops: float = 0.0  # included in flops
    ops: Counter = dataclasses.field(default_factory=Counter)
    sources: set = dataclasses.field(default_factory=set)
    int8_matmuls: bool = False  # a dot or convolution of 8-bit integers: the MXU's int8 rate bounds it
    # the flops of the extra bf16 passes an f32 matmul at HIGH or HIGHEST precision takes on a TPU's
    # MXU (base/chips.F32_MXU_PASSES): not in flops (XLA counts the product once), in the TPU roofline
    extra_pass_flops: float = 0.0

    def add(self, other: Cost) -> None:
        self.int8_matmuls |= other.int8_matmuls
        self.extra_pass_flops += other.extra_pass_flops
        self.flops += other.flops
        self.transcendentals += other.transcendentals
        self.reduce_window_flops += other.reduce_window_flops
        self.ops.update(other.ops)
        self.sources |= other.sources


class Costs:
    """Flops and transcendentals of instructions and computations, memoised (fusions share reducers)."""

    def __init__(self, module: HloModule):
        self.module = module
        self.memo: dict[str, Cost] = {}

    def computation(self, name: str) -> Cost:
        if name not in self.memo:
            total = Cost()
            comp = self.module.computations.get(name)
            if comp is not None:
                shapes = {i.name: i.shapes for i in comp.instructions}
                for instr in comp.instructions:
                    self.instruction(instr, shapes, into=total)
            self.memo[name] = total
        return self.memo[name]

    def instruction(self, instr: Instruction, shapes: dict, into: Cost | None = None) -> Cost:
        """The cost of ``instr``, added into ``into`` (a computation's running total) when given."""
        cost = into if into is not None else Cost()
        op = instr.opcode
        out_elems = instr.shapes[0].elements if instr.shapes else 0
        if op not in ("parameter", "constant", "fusion"):
            cost.ops[op] += 1
        if (src := self.module.source(instr)) is not None:
            cost.sources.add(src)
        operand = lambda i: shapes.get(instr.operands[i], [None])[0] if len(instr.operands) > i else None
        if op in ("fusion", "call", "while", "conditional") or (op == "custom-call" and instr.calls):
            for called in instr.calls:
                cost.add(self.computation(called))
        elif op in TRANSCENDENTAL:
            cost.transcendentals += out_elems
        elif op in ELEMENTWISE:
            cost.flops += out_elems
        elif op == "dot":
            lhs = operand(0)
            cost.int8_matmuls |= _int8(operand(0), operand(1))
            dims = re.findall(r"\d+", instr.attr("lhs_contracting_dims") or "")
            flops = 2.0 * out_elems * (math.prod(lhs.dims[int(d)] for d in dims) if lhs else 1)
            cost.flops += flops
            cost.extra_pass_flops += (_f32_passes(instr, operand(0), operand(1)) - 1) * flops
        elif op == "convolution":
            cost.int8_matmuls |= _int8(operand(0), operand(1))
            flops = self._convolution(instr, shapes)
            cost.flops += flops
            cost.extra_pass_flops += (_f32_passes(instr, operand(0), operand(1)) - 1) * flops
        elif op in ("reduce", "reduce-window"):
            reducer = self.computation(instr.calls[0]) if instr.calls else Cost()
            cost.ops.update(reducer.ops)
            per_element = reducer.flops or 1
            if op == "reduce":
                inp = operand(0)
                cost.flops += max((inp.elements if inp else 0) - out_elems, 0) * per_element
            else:
                window = re.search(r"size=([\dx]+)", instr.attrs)
                size = math.prod(int(x) for x in window[1].split("x")) if window else 1
                folded = out_elems * (size - 1) * per_element
                cost.flops += folded
                cost.reduce_window_flops += folded
        return cost

    @staticmethod
    def _convolution(instr: Instruction, shapes) -> float:
        """2 x batch x out features x in features x the (output, kernel) position pairs that land
        on real input elements: XLA writes batched matmuls as convolutions with lhs dilation, where
        most window positions hit holes."""
        lhs = shapes.get(instr.operands[0], [None])[0] if instr.operands else None
        rhs = shapes.get(instr.operands[1], [None])[0] if len(instr.operands) > 1 else None
        out = instr.shapes[0] if instr.shapes else None
        m = re.match(r"(\w+)_(\w+)->(\w+)", instr.attr("dim_labels") or "")
        if lhs is None or rhs is None or out is None or not m:
            return 0.0
        in_l, k_l, o_l = m[1], m[2], m[3]
        window = window_dims(instr.attr("window") or "", sum(c.isdigit() for c in in_l))
        pairs = 1
        for d, (_size, stride, pad_lo, lhs_dil, rhs_dil) in enumerate(window):
            i_size, o_size = lhs.dims[in_l.index(str(d))], out.dims[o_l.index(str(d))]
            k_size = rhs.dims[k_l.index(str(d))]
            span = (i_size - 1) * lhs_dil + 1
            pairs *= sum(1 for o in range(o_size) for k in range(k_size)
                         if 0 <= (p := o * stride + k * rhs_dil - pad_lo) < span and p % lhs_dil == 0)
        batch, out_features = out.dims[o_l.index("b")], out.dims[o_l.index("f")]
        return 2.0 * batch * out_features * rhs.dims[k_l.index("i")] * pairs


def window_dims(text: str, spatial: int) -> list[tuple[int, int, int, int, int]]:
    """Per spatial dim: (size, stride, low padding, lhs dilation, rhs dilation)."""
    fields = dict(re.findall(r"(\w+)=([\w\-]+)", text.strip("{}")))
    def per_dim(key, default):
        vals = fields.get(key, "").split("x") if key in fields else []
        return [v for v in vals] + [default] * (spatial - len(vals))
    sizes = [int(v) for v in per_dim("size", "1")]
    strides = [int(v) for v in per_dim("stride", "1")]
    pads = [int(str(v).split("_")[0]) for v in per_dim("pad", "0_0")]
    lhs = [int(v) for v in per_dim("lhs_dilate", "1")]
    rhs = [int(v) for v in per_dim("rhs_dilate", "1")]
    return list(zip(sizes, strides, pads, lhs, rhs))


def _f32_passes(instr: Instruction, *shapes) -> int:
    """The bf16 MXU passes a matmul of f32 operands takes at its operand_precision (the most either
    operand asks); 1 for any other operands."""
    if not all(x is not None and x.dtype == "f32" for x in shapes):
        return 1
    asked = re.findall(r"[a-z]+", instr.attr("operand_precision") or "")
    return max((F32_MXU_PASSES.get(p, 1) for p in asked), default=1)


def _int8(*shapes) -> bool:
    """Both operands 8-bit integers (s8, u8)."""
    return all(x is not None and x.dtype in ("s8", "u8") for x in shapes)
