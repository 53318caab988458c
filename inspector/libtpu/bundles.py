"""One kernel's VLIW bundles as answers: bundles per grid step, what each unit does, what bounds
the kernel, where registers spill, and which source line the bundles come from.

A Pallas kernel's grid is the outermost loop of its bundles (the ``>`` marks); the bundles
inside it are one grid step's, the ones outside set up and drain the pipeline. Counts here are
static (each bundle once); ``cycles_per_step`` comes from libtpu's simulation, which runs them.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from ..base.chips import Chip
from ..base.findings import Finding
from ..base.user_code import short_path
from .dumps import (BUNDLES_LABEL, UTILIZATION_LABEL, Bundle, Instruction, UnreadableDump, Utilization, read_bundles,
                    read_utilization)
from .model import PALLAS_KINDS, BundleRow, KernelBundles, KernelTime, LineBundles, UnitUse

LISTED_OTHERS = 10  # kernels beyond the Pallas ones whose bundle listing is kept: the costliest

NO_SOURCE = "(no source line)"
LISTING_LIMIT = 20_000  # bundles kept per kernel for the listing; the counts use them all
# libtpu's unit names -> what a kernel author calls what bounds it
BOUND_NAMES = {"MXU": "MXU", "XLU": "XLU", "VALU": "VALU", "VPOP": "VPOP", "EUP": "EUP", "VLOAD": "loads",
               "VSTORE": "stores", "SALU": "scalar"}
DMA_WAITS = "DMA waits"
SPILL_STORE_UNIT, FILL_UNIT = "VSTORE:SPILL", "VLOAD:FILL"


def bundles_of(times: list[KernelTime], llo: dict[str, dict[str, str]]) -> tuple[list[KernelBundles], list[str]]:
    """Each timed kernel's bundles from its libtpu dumps (``llo``: op -> dump label -> text), Pallas
    kernels first in program order, then the others costliest first (beyond LISTED_OTHERS without
    their listing); and the dumps that could not be read, one problem each."""
    by_name = {t.name: t for t in times}
    found, problems = [], []
    for op, texts in llo.items():
        t = by_name.get(op)
        if t is None or BUNDLES_LABEL not in texts or UTILIZATION_LABEL not in texts:
            continue
        try:
            bundles = read_bundles(texts[BUNDLES_LABEL], f"{op} {BUNDLES_LABEL}", relative=short_path)
            use = read_utilization(texts[UTILIZATION_LABEL], f"{op} {UTILIZATION_LABEL}")
            if len(use.rows) != len(bundles):
                raise UnreadableDump(f"{op}: {len(bundles)} bundles but {len(use.rows)} utilization rows")
        except UnreadableDump as err:
            problems.append(str(err))
            continue
        found.append(kernel_bundles(op, t.kind, bundles, use, pallas=t.kind in PALLAS_KINDS, steps=t.steps,
                                    cycles_per_step=t.cycles_per_step))
    pallas = [b for b in found if b.kind in PALLAS_KINDS]
    cost = {t.name: (t.estimated_cycles or 0) * t.repeat for t in times}
    others = sorted((b for b in found if b.kind not in PALLAS_KINDS), key=lambda b: -cost.get(b.kernel, 0))
    order = {t.name: i for i, t in enumerate(times)}
    pallas.sort(key=lambda b: order.get(b.kernel, 0))
    for b in others[LISTED_OTHERS:]:
        b.listing, b.listing_truncated = [], True
    return pallas + others, problems


def kernel_bundles(name: str, kind: str, bundles: list[Bundle], use: Utilization, *, pallas: bool,
                   steps: int | None, cycles_per_step: float | None) -> KernelBundles:
    """The answers for one kernel. ``pallas``: a Pallas/Mosaic kernel, whose grid loop (when it
    has ``steps`` > 1) is the scope of the per-step figures and of its source lines."""
    in_loop = [b.index for b in bundles if b.depth >= 1]
    per_step = pallas and bool(in_loop) and (steps or 0) > 1
    scope = in_loop if per_step else [b.index for b in bundles]
    units = _units(use, scope)
    spilled = _spilled_sources(bundles, scope)
    return KernelBundles(
        kernel=name, kind=kind, bundles=len(bundles), bundles_per_step=len(scope) if per_step else None,
        cycles_per_step=cycles_per_step if per_step else None, units=units,
        bound=_bound(units, len(scope), cycles_per_step if per_step else None),
        spill_stores=units[SPILL_STORE_UNIT].used if SPILL_STORE_UNIT in units else 0,
        spill_fills=units[FILL_UNIT].used if FILL_UNIT in units else 0,
        spilled_lines=[line for line, _ in spilled.most_common()],
        lines=_lines(bundles, scope, spilled) if pallas else [],
        listing=[_row(b) for b in bundles[:LISTING_LIMIT]], listing_truncated=len(bundles) > LISTING_LIMIT,
    )


def _units(use: Utilization, scope: list[int]) -> dict[str, UnitUse]:
    units = {}
    for j, (unit, capacity) in enumerate(zip(use.units, use.capacity)):
        used = sum(use.rows[i][j] for i in scope)
        busy = sum(1 for i in scope if use.rows[i][j])
        units[unit] = UnitUse(used=used, capacity=capacity, share=used / (capacity * len(scope)) if capacity and scope else 0.0, busy=busy)
    return units


def _bound(units: dict[str, UnitUse], bundles: int, cycles: float | None) -> str | None:
    """The unit nearest its capacity over the step's cycles; waits (cycles the simulation spends
    with no bundle to issue: DMAs not yet done) when they are the larger part."""
    if not bundles:
        return None
    cycles = max(cycles or bundles, bundles)
    load = {BOUND_NAMES[u]: v.used / (v.capacity * cycles) for u, v in units.items() if u in BOUND_NAMES and v.capacity}
    load[DMA_WAITS] = (cycles - bundles) / cycles
    name, value = max(load.items(), key=lambda kv: kv[1])
    return name if value > 0 else None


def _spilled_sources(bundles: list[Bundle], scope: list[int]) -> Counter:
    """Source line -> spill stores and fills of the values it computed. A spill store names the
    register it saves; the instruction that defined that register has the line. A value that
    was itself filled from a slot is followed to what was stored there."""
    defined: dict[str, Instruction] = {}
    stored_in: dict[str, str] = {}  # spill slot -> the register last saved there
    for b in bundles:
        for ins in b.instructions:
            if ins.result:
                defined.setdefault(ins.result, ins)
            if ins.spill == "store" and ins.slot and ins.stored:
                stored_in.setdefault(ins.slot, ins.stored)

    def origin(register: str | None, hops: int = 0) -> str | None:
        ins = defined.get(register) if register else None
        if ins is None or hops > 8:
            return None
        if ins.source:
            return ins.source
        if ins.spill == "fill" and ins.slot:
            return origin(stored_in.get(ins.slot), hops + 1)
        return None

    counts: Counter = Counter()
    for i in scope:
        for ins in bundles[i].instructions:
            if ins.spill == "store":
                counts[origin(ins.stored) or NO_SOURCE] += 1
            elif ins.spill == "fill" and ins.slot:
                counts[origin(stored_in.get(ins.slot)) or NO_SOURCE] += 1
    return counts


def _lines(bundles: list[Bundle], scope: list[int], spilled: Counter) -> list[LineBundles]:
    holding: Counter = Counter()
    weight: defaultdict = defaultdict(float)
    mxu: Counter = Counter()
    for i in scope:
        instructions = bundles[i].instructions
        for source in {ins.source or NO_SOURCE for ins in instructions}:
            holding[source] += 1
        for ins in instructions:
            weight[ins.source or NO_SOURCE] += 1 / len(instructions)
            if ins.opcode.startswith(("vmatmul", "vmatpush")):
                mxu[ins.source or NO_SOURCE] += 1
    total = sum(weight.values()) or 1.0
    lines = [LineBundles(source=source, bundles=holding[source], share=weight[source] / total, spills=spilled.get(source, 0), mxu_ops=mxu[source])
             for source in holding]
    return sorted(lines, key=lambda line: (line.source == NO_SOURCE, -line.share))


def _row(b: Bundle) -> BundleRow:
    return BundleRow(
        index=b.index, depth=b.depth, ops=" ".join(ins.opcode for ins in b.instructions),
        sources=sorted({ins.source for ins in b.instructions if ins.source}),
        spill_stores=sum(1 for ins in b.instructions if ins.spill == "store"),
        spill_fills=sum(1 for ins in b.instructions if ins.spill == "fill"))


def bundle_findings(bundles: list[KernelBundles], chip: Chip) -> list[Finding]:
    """What the Pallas kernels' bundles say to their author: register spills, an MXU mostly idle."""
    found = []
    for b in bundles:
        if b.kind not in PALLAS_KINDS:
            continue
        per = "per grid step" if b.bundles_per_step is not None else "in the kernel"
        if b.spill_stores or b.spill_fills:
            lines = [line for line in b.spilled_lines if not line.startswith("(")][:5]
            found.append(Finding(
                "warning", "register-spills",
                f"{b.kernel}: {b.spill_stores:,} spill stores and {b.spill_fills:,} fills {per}"
                + (f", of values from {', '.join(lines)}" if lines else "")
                + ": the block's live values do not fit in the 64 vector registers; compute it in chunks (a "
                "fori_loop over row or column slices, as splash attention's block_kv_compute does)",
                kernel=b.kernel, view="bundles",
                data={"chip": chip.name, "stores": b.spill_stores, "fills": b.spill_fills, "lines": lines,
                      "bundles_per_step": b.bundles_per_step}))
        mxu = b.units.get("MXU")
        scope = b.bundles_per_step or b.bundles
        if mxu and mxu.busy and scope and mxu.busy / scope < 0.25 and b.bound != "MXU":
            found.append(Finding(
                "info", "mxu-underused",
                f"{b.kernel}: the MXU is busy in {mxu.busy / scope:.0%} of the bundles {per}; "
                f"what bounds it is {b.bound}", kernel=b.kernel, view="bundles",
                data={"chip": chip.name, "mxu_share": mxu.busy / scope, "bound": b.bound}))
    return found
