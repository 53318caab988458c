"""What the compiled program launches: kernels in schedule order, each with its HBM traffic,
flops, arithmetic intensity and roofline time on a chip; and the intermediates it materializes.

Counting follows XLA's HloCostAnalysis where it can (tests compare the totals with
``compiled.cost_analysis()``): a dot costs 2 flops per multiply-add, an elementwise op one flop
per element, a transcendental one transcendental per element, a reduction one reducer op per
element folded. Bytes are the sizes of a kernel's operands and results in memory: on TPU the
tiled layout's padding counts, and arrays in VMEM (layout memory space S(1)) are not HBM traffic.
"""
from __future__ import annotations

import dataclasses
import gc
from typing import Any

from ..base.chips import Chip
from .costs import Costs
from .kernel import HBM, Intermediate, Kernel, TensorRef
from .kernel_groups import KernelGroup, group_kernels
from .loops import trip_count
from .module import ArrayShape, Computation, HloModule, Instruction, parse_hlo
from .totals import Totals, agreement, sums
from .traffic import operand_reads, result_writes

NOT_KERNELS = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id",
               "replica-id", "opt-barrier", "copy-done", "slice-done", "add-dependency", "domain", "async-done",
               "all-reduce-done", "all-gather-done", "collective-permute-done", "send-done", "recv-done"}
COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "all-reduce-start", "all-gather-start", "collective-permute-start", "send", "recv"}
CONTROL_FLOW = {"while", "call", "conditional"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class FusionAnalysis:
    chip: str | None  # whose figures the roofline uses
    kernels: list[Kernel]
    parameters: list[TensorRef]  # the program's inputs (producer is the parameter's name)
    results: list[str]  # kernels or parameters whose values the program returns
    totals: Totals
    xla_cost: dict[str, float] | None
    agreement: dict[str, Any]  # ratios, the figures compared, a note (hlo/totals.py)
    intermediates: list[Intermediate]
    frames: dict[int, str] = dataclasses.field(default_factory=dict)  # HLO stack_frame_id -> file:line
    groups: list[KernelGroup] = dataclasses.field(default_factory=list)  # every kernel in one, in schedule order


def _results(instr: Instruction) -> tuple[ArrayShape, ...]:
    """The arrays an instruction makes. Async starts return (operands, results..., context):
    copy-start (dest, src, context), slice-start ((operand), dest, context); a done op passes
    the start's result on."""
    shapes = instr.shapes
    if instr.opcode == "copy-start":
        return shapes[:1]
    if instr.opcode.endswith("-start"):
        return shapes[len(instr.operands):len(instr.operands) + 1]
    return shapes


def _fuses_collective(module: HloModule, instr: Instruction) -> bool:
    """XLA:TPU fuses some collectives (its reduce-scatter is an all-reduce and a dynamic-slice in
    an ``all-reduce-scatter`` fusion): such a fusion is a collective, not compute."""
    for called in instr.calls:
        comp = module.computations.get(called.lstrip("%"))
        if comp is not None and any(i.opcode in COLLECTIVES for i in comp.instructions):
            return True
    return False


def _kind(instr: Instruction, module: HloModule | None = None) -> str:
    op = instr.opcode
    if op == "fusion" and module is not None and _fuses_collective(module, instr):
        return "collective"
    if op == "fusion":
        return "fusion:" + (instr.attr("kind") or "k?").removeprefix("k").lower()
    if op == "custom-call":
        target = instr.attr("custom_call_target") or "?"
        if target == "tpu_custom_call":
            return "custom-call:pallas" if "pallas_call" in (instr.op_name or "") else "custom-call:mosaic"
        if target == "__gpu$xla.gpu.triton" and "pallas_call" in (instr.op_name or ""):  # a Pallas-Triton kernel
            return "custom-call:pallas"
        return f"custom-call:{target}"
    if op in ("copy", "copy-start"):
        return "copy"
    if op in COLLECTIVES:
        return "collective"
    return op


def scoped_vmem_used(backend_config: dict | None) -> int | None:
    """The scoped VMEM a Mosaic custom call uses by libtpu's figure (used_scoped_memory_configs),
    None where the config names none. The figure counts from address 0, and where XLA keeps its own
    buffers below the kernel's scoped region (scoped_memory_configs' offset: computed inputs of one
    fusion on TPU7x, 16 MiB below a kernel that used 2) they are not the kernel's: left out, as the
    limit leaves them out (24 MiB used at offset 16 compiled under a limit of 17)."""
    cfg = backend_config or {}
    used = cfg.get("used_scoped_memory_configs") or []
    if not used:
        return None
    below = max((int(c.get("offset", 0)) for c in cfg.get("scoped_memory_configs") or []), default=0)
    return max(sum(int(u.get("size", 0)) for u in used) - below, 0)


# XLA:TPU's cost model writes about 2^63 cycles for ops it does not estimate (seen on the v5e for
# samples/transformer.py's exponential_reduce_fusion, which ran in 1.4 ms): a sentinel, not a figure
SENTINEL_CYCLES = 2**62


def _compiler_figures(instr: Instruction) -> tuple[int | None, bool, int | None]:
    """XLA:TPU's estimated cycles (None where it gave none), whether it gave up (the sentinel), its scoped VMEM."""
    cfg = instr.backend_config or {}
    cycles = (cfg.get("window_config") or {}).get("estimated_cycles") or cfg.get("estimated_cycles")
    figure = int(cycles) if cycles not in (None, "", "0") else None
    gave_up = figure is not None and figure >= SENTINEL_CYCLES
    return (None if gave_up else figure), gave_up, scoped_vmem_used(cfg)


def _scope(op_name: str | None) -> str | None:
    if not op_name or "/" not in op_name:
        return None
    return op_name.rsplit("/", 1)[0]


def _roofline(chip: Chip | None, flops: float, hbm_bytes: int, int8: bool = False,
              extra_pass_flops: float = 0.0, vector: VectorWork | None = None) -> tuple[float | None, float | None, str | None]:
    """(flops per HBM byte, the roofline time, what bounds it). The caller leaves reduce-window
    flops out: counted window x outputs they are not the work XLA:TPU does (a 68.7 GFLOP
    cumulative reduce-window of samples/transformer.py ran in 6.6 us on the v5e, 349 us at the
    bf16 peak), and a roofline must stay a lower bound: a kernel with int8 matmuls is held to the
    chip's int8 rate (a w8a8 matmul at the bf16 peak: 1.22x above the v5e's time). On a TPU an
    f32 matmul at HIGH or HIGHEST precision takes 3 or 6 bf16 passes (``extra_pass_flops``): at
    one pass a HIGHEST spherical-harmonic transform's roofline was 0.09x of the v5e's time.
    ``vector``: a Pallas kernel's VPU, EUP and XLU work, each held to its unit's rate where the
    chip table has one: the kernel takes at least as long as its busiest unit (the causal flash
    sample on the v6e: 33 us at the HBM and MXU alone, its VALU work alone 57 us). The bound names
    that unit: memory (HBM), compute (the MXU), VPU, EUP or XLU."""
    intensity = flops / hbm_bytes if hbm_bytes else None
    if chip is None or not chip.hbm_bytes_per_s or not chip.bf16_flops:
        return intensity, None, None
    peak = max(chip.bf16_flops, chip.int8_ops or 0) if int8 else chip.bf16_flops
    mxu_flops = flops + (extra_pass_flops if chip.mxu else 0.0)  # a chip with MXUs multiplies f32 in bf16 passes
    times = {"memory": hbm_bytes / chip.hbm_bytes_per_s, "compute": mxu_flops / peak}
    for unit, seconds in (vector.seconds(chip) if vector is not None and chip.mxu else {}).items():
        times[unit] = seconds
    bound = max(times, key=times.__getitem__)  # ties go to memory, the first
    return intensity, times[bound], bound


VPU, EUP, XLU = "VPU", "EUP", "XLU"  # what a Pallas kernel's roofline may be bound by beside memory and compute
VECTOR_UNITS = (VPU, EUP, XLU)


@dataclasses.dataclass(frozen=True)
class VectorWork:
    """The VALU, EUP and XLU instructions a Pallas kernel issues, each on one register
    (vector_work.grid_work)."""

    vpu: float = 0.0
    eup: float = 0.0
    xlu: float = 0.0
    vpu16: float = 0.0  # of vpu, 16-bit float arithmetic on packed registers: twice on a chip without 16-bit VALU ops

    def _units(self, chip: Chip) -> list[tuple[str, float, float | None]]:
        """(unit, instructions, instructions a second or None where the chip table has no figure)."""
        register = (chip.sublanes or 0) * (chip.lanes or 0)  # the rates are per 32-bit value: one register holds these
        per_register = lambda rate: rate / register if rate and register else None
        valu = self.vpu + (self.vpu16 if chip.valu_bf16 is False else 0.0)
        return [(VPU, valu, per_register(chip.vpu_ops_per_s)), (EUP, self.eup, per_register(chip.eup_ops_per_s)),
                (XLU, self.xlu, chip.xlu_ops_per_s)]

    def seconds(self, chip: Chip) -> dict[str, float]:
        """Each unit's time at the chip's rate, of the units the chip table has a figure for."""
        return {unit: n / rate for unit, n, rate in self._units(chip) if rate}

    def left_out(self, chip: Chip) -> list[str]:
        """The units with work whose rate the chip table lacks: the roofline leaves them out."""
        return [unit for unit, n, rate in self._units(chip) if n and not rate]


PASS_THROUGH = {"bitcast", "get-tuple-element", "copy-done", "slice-done", "async-done", "all-reduce-done",
                "all-gather-done", "collective-permute-done", "opt-barrier", "add-dependency"}


def _origin(name: str, by_name: dict[str, Instruction], carried: list[str] | None = None,
            loops: dict[str, list[str]] | None = None) -> str:
    """The kernel or parameter behind a value, looking through ops that only pass it on, and
    across a while loop's edge: a body's tuple parameter element is what the
    loop was started with (`carried`), a loop's result element what its body's last iteration made
    (`loops`), so the graph links a loop to the kernels before and after it."""
    index = None
    seen = 0
    while name in by_name and by_name[name].opcode in PASS_THROUGH and by_name[name].operands and seen < 64:
        instr = by_name[name]
        if instr.opcode == "get-tuple-element":
            index = instr.attr("index")
        name, seen = instr.operands[0], seen + 1
    if index is not None and index.isdigit() and name in by_name:
        source = carried if by_name[name].opcode == "parameter" else (loops or {}).get(name)
        if source is not None and int(index) < len(source):
            return source[int(index)]
    return name


def _kernels_of(module: HloModule, comp: Computation, costs: Costs, chip: Chip | None,
                repeat: int = 1, carried: list[str] | None = None, loops: dict | None = None) -> list[Kernel]:
    shapes = {i.name: i.shapes for i in comp.instructions}
    by_name = comp.by_name()
    loops = {} if loops is None else loops  # a while's name -> the origin of each element of its result
    origin = lambda name: _origin(name, by_name, carried, loops)
    found = []
    for instr in comp.instructions:
        if instr.opcode in NOT_KERNELS:
            continue
        if instr.opcode == "while":  # list the body's kernels, repeated by the known trip count
            trips = trip_count(module, instr, comp)
            body = instr.attr("body")
            if body and body.lstrip("%") in module.computations:
                body_comp = module.computations[body.lstrip("%")]
                init = by_name.get(instr.operands[0]) if instr.operands else None
                start = [origin(o) for o in init.operands] if init is not None and init.opcode == "tuple" else None
                inside = _kernels_of(module, body_comp, costs, chip, repeat * int(trips or 1), start)
                for k in inside if not trips else []:
                    k.trips_unknown = True
                    k.note = "inside a while loop whose trip count is known only when it runs: counted once"
                found += inside
                root = next((i for i in body_comp.instructions if i.is_root), None)
                if root is not None and root.opcode == "tuple":
                    inner = body_comp.by_name()
                    loops[instr.name] = [_origin(o, inner, start, {}) for o in root.operands]
            continue
        cost = costs.instruction(instr, shapes)
        out_shapes = _results(instr)
        if instr.opcode == "slice-start":  # an async slice reads only the slice it copies
            inputs = [TensorRef(producer=origin(instr.operands[0]), shape=str(s), bytes=s.bytes, memory_space=HBM) for s in out_shapes]
        else:
            inputs = _inputs(module, instr, by_name, origin)
        writes = result_writes(module, instr, {o: by_name[o].shapes[0].bytes for o in instr.operands[1:2]
                                               if o in by_name and by_name[o].shapes})
        outputs = [_ref(instr.name, s, writes.get(n, s.bytes)) for n, s in enumerate(out_shapes)]
        read, written = sum(t.bytes for t in inputs), sum(t.bytes for t in outputs)
        hbm_read = sum(t.bytes for t in inputs if t.memory_space == HBM)
        hbm_written = sum(t.bytes for t in outputs if t.memory_space == HBM)
        intensity, roofline_s, bound = _roofline(chip, cost.flops - cost.reduce_window_flops, hbm_read + hbm_written,
                                                 int8=cost.int8_matmuls, extra_pass_flops=cost.extra_pass_flops)
        cycles, gave_up, scoped = _compiler_figures(instr)
        kind = _kind(instr, module)
        found.append(Kernel(
            name=instr.name, kind=kind, opcode=instr.opcode, ops=dict(cost.ops.most_common()), op_name=instr.op_name,
            source=module.source(instr), sources=sorted(cost.sources), inputs=inputs, outputs=outputs,
            bytes_read=read, bytes_written=written, hbm_bytes_read=hbm_read, hbm_bytes_written=hbm_written,
            flops=cost.flops, transcendentals=cost.transcendentals, intensity=intensity, roofline_s=roofline_s,
            bound=bound, compiler_cycles=cycles, compiler_gave_up=gave_up, compiler_scoped_vmem_bytes=scoped,
            reduce_window_flops=cost.reduce_window_flops, repeat=repeat, scope=_scope(instr.op_name),
            note=("HBM traffic counts each operand once: a lower bound (the BlockSpec walk, where it can follow "
                  "the kernel, counts re-fetched blocks)") if kind == "custom-call:pallas" else None,
        ))
    return found


def _ref(producer: str, s: ArrayShape, moved: int) -> TensorRef:
    return TensorRef(producer=producer, shape=str(s), bytes=moved, memory_space=s.memory_space,
                     buffer_bytes=s.bytes if moved != s.bytes else None)


def _inputs(module: HloModule, instr: Instruction, by_name: dict, origin) -> list[TensorRef]:
    """What a kernel reads of each operand: an operand read twice is fetched once; one read
    through a slice or dynamic-slice, or updated in place, moves less than its buffer."""
    reads = operand_reads(module, instr)
    moved: dict[str, int | None] = {}  # operand -> bytes read; None: the whole of it
    for n, operand in enumerate(instr.operands):
        part = reads.get(n)
        if operand in moved and (moved[operand] is None or part is None):
            moved[operand] = None
        else:
            moved[operand] = max(moved.get(operand) or 0, part) if part is not None else None
    refs = []
    for operand, part in moved.items():
        shapes = _results(by_name[operand]) if operand in by_name else ()
        for s in shapes:
            refs.append(_ref(origin(operand), s, part if part is not None and len(shapes) == 1 else s.bytes))
    return refs


def _intermediates(kernels: list[Kernel], limit: int = 10) -> list[Intermediate]:
    """Buffers one kernel writes and another reads: HBM ones first (the traffic a fused kernel
    would save), then those XLA kept in VMEM, each by size."""
    made = {t.producer: (k, t) for k in kernels for t in k.outputs}
    readers: dict[str, list[str]] = {}
    for k in kernels:
        for t in k.inputs:  # (not a buffer it only updates in place: it reads none of it)
            if t.producer in made and t.bytes and k.name not in readers.get(t.producer, []):
                readers.setdefault(t.producer, []).append(k.name)
    size = lambda t: t.buffer_bytes or t.bytes  # the buffer, though a kernel may write only part of it
    found = [Intermediate(producer=name, shape=ref.shape, bytes=size(ref), memory_space=ref.memory_space,
                          source=kernel.source, consumers=users)
             for name, users in readers.items() for kernel, ref in [made[name]]]
    return sorted(found, key=lambda i: (i.memory_space != HBM, -i.bytes))[:limit]


@dataclasses.dataclass(frozen=True)
class PallasFigures:
    """One pallas_call's figures from its BlockSpec walk and body (pallas/analysis.py), for its
    custom call; ``walked`` False where the walk could not follow the kernel."""

    name: str | None  # the pallas_call's name: its custom call is "name.N"
    read: int | None = None  # HBM bytes, the costliest pl.when / cond branches taken
    written: int | None = None
    flops: float | None = None
    transcendentals: float | None = None
    least_flops: float | None = None  # the cheapest branches: what the roofline, a lower bound, takes
    least_bytes: int | None = None  # the fewest DMA bytes the branches allow
    int8_matmuls: bool = False  # its body multiplies 8-bit integers: the roofline takes the int8 rate
    mxu_passes: int = 1  # the fewest bf16 MXU passes its matmuls take (f32 at HIGHEST: 6): the roofline's flops
    # each unit's [least, most] over the grid, a top-level pl.when at the steps that take it (PallasCall.grid_work)
    work: dict[str, list[float]] | None = None
    cost_estimate_bytes: int | None = None  # the bytes_accessed of the kernel's pl.CostEstimate: XLA's figure for it

    @property
    def walked(self) -> bool:
        return None not in (self.read, self.written, self.flops, self.least_flops, self.least_bytes)


def analyse_fusions(hlo_text: str, chip: Chip | None, xla_cost: dict | None,
                    pallas_traffic: list[PallasFigures] | None = None) -> FusionAnalysis:
    """Kernels, totals, agreement with XLA and materialized intermediates of one compiled module.
    ``pallas_traffic``: each pallas_call's figures, in program order; they replace the
    operands-once lower bound of those custom calls."""
    # Tens of thousands of small objects and no cycles: the cyclic GC would only rescan the
    # compiler's heap again and again (a third of the time on a 24-layer step).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _analyse(hlo_text, chip, xla_cost, pallas_traffic)
    finally:
        if paused:
            gc.enable()


def _pair_walks(kernels: list[Kernel], traffic: list[PallasFigures]) -> list[tuple[Kernel, PallasFigures]]:
    """Each pallas_call with its custom call: by kernel name (the custom call is named after the
    pallas_call, "splash_mha_fwd.1"), in program order; unnamed ones by position when the counts
    agree. Unpaired kernels keep the labelled lower bound."""
    mosaic = [k for k in kernels if k.kind in ("custom-call:pallas", "custom-call:mosaic")]
    pairs, used = [], set()
    for figures in traffic:
        name = figures.name
        match = next((k for k in mosaic if id(k) not in used and name and k.name.rsplit(".", 1)[0] == name), None)
        if match is not None:
            used.add(id(match))
            pairs.append((match, figures))
    if not pairs:  # no names to go by: in program order, when the counts agree
        if len(mosaic) == len(traffic):
            pairs = list(zip(mosaic, traffic))
    return pairs


WALK_NOTE = ("HBM traffic from the BlockSpec walk (a block is fetched when its index changes) and the body's DMAs; "
             "flops and transcendentals from the kernel body with the costliest pl.when / cond branches taken (an upper "
             "bound); the roofline takes the cheapest branches and the fewest DMAs")
WORK_NOTE = ("HBM traffic from the BlockSpec walk (a block is fetched when its index changes) and the body's DMAs; flops "
             "from the kernel body, a top-level pl.when counted at the grid steps that take it where the program ids "
             "decide them, any other branch at its costliest (an upper bound); the roofline takes the cheapest branches, "
             "the fewest DMAs, and the busiest of HBM, MXU, VPU (VALU), EUP and XLU, each at the chip's rate")
# a chip without MXUs (a GPU): the vector units' work is not held to rates it has no figures for (_roofline)
NO_MXU_WORK_NOTE = WORK_NOTE.replace("the busiest of HBM, MXU, VPU (VALU), EUP and XLU, each at the chip's rate",
                                     "the busier of HBM and the chip's peak flops")


def _apply_walk(kernels: list[Kernel], traffic: list[PallasFigures], chip: Chip | None) -> None:
    for k, f in _pair_walks(kernels, traffic):
        k.cost_estimate_bytes = f.cost_estimate_bytes
        if not f.walked:
            continue
        assert f.read is not None and f.written is not None and f.flops is not None  # walked
        assert f.least_flops is not None and f.least_bytes is not None
        work = f.work
        flops = work["flops"][1] if work else f.flops
        k.hbm_bytes_read, k.hbm_bytes_written, k.flops = f.read, f.written, flops
        k.transcendentals = f.transcendentals if f.transcendentals is not None else k.transcendentals
        k.intensity = _roofline(chip, flops, f.read + f.written)[0]
        # a lower bound: the fewest flops and DMA bytes the branches allow (sglang's fused MLP on the
        # v5e: its conditional copies at their most put the roofline 1.41x above the chip's time),
        # a top-level pl.when at the steps that take it, and each unit of the TensorCore at its rate
        if work:
            vector = VectorWork(vpu=work["vpu"][0], eup=work["eup"][0], xlu=work["xlu"][0], vpu16=work["vpu16"][0])
            _, k.roofline_s, k.bound = _roofline(chip, work["flops"][0], f.least_bytes, int8=f.int8_matmuls,
                                                 extra_pass_flops=work["mxu"][0] - work["flops"][0], vector=vector)
        else:
            vector = None
            _, k.roofline_s, k.bound = _roofline(chip, f.least_flops, f.least_bytes, int8=f.int8_matmuls,
                                                 extra_pass_flops=(f.mxu_passes - 1) * f.least_flops)
        left_out = vector.left_out(chip) if vector is not None and chip is not None and chip.mxu else []
        k.note = ((NO_MXU_WORK_NOTE if chip is not None and not chip.mxu else WORK_NOTE) if vector is not None else WALK_NOTE) + (
            f" ({' and '.join(left_out)} left out: the chip table has no figure for {chip.name if chip else ''}, so the "
            "roofline is a floor below what those units take)" if left_out else "")


def _analyse(hlo_text: str, chip: Chip | None, xla_cost: dict | None, pallas_traffic=None) -> FusionAnalysis:
    module = parse_hlo(hlo_text)
    figures = chip if chip is not None and chip.hbm_bytes_per_s else None
    loops: dict[str, list[str]] = {}
    kernels = _kernels_of(module, module.entry_computation, Costs(module), figures, loops=loops)
    if pallas_traffic:
        _apply_walk(kernels, pallas_traffic, figures)
    totals = sums(kernels, figures is not None)
    looped = [k for k in kernels if k.repeat > 1]
    # XLA's cost analysis counts a while loop's body once: compare it with the same count
    once = sums(kernels, figures is not None, trips=False) if looped else None
    entry = module.entry_computation
    by_name = entry.by_name()
    parameters = [TensorRef(producer=i.name, shape=str(s), bytes=s.bytes, memory_space=s.memory_space)
                  for i in entry.instructions if i.opcode == "parameter" for s in i.shapes[:1]]
    root = next((i for i in entry.instructions if i.is_root), None)
    results = [] if root is None else list(dict.fromkeys(
        _origin(o, by_name, None, loops) for o in (root.operands if root.opcode == "tuple" else [root.name])))
    return FusionAnalysis(chip=figures.name if figures else None, kernels=kernels, parameters=parameters,
                          results=results, totals=totals, xla_cost=xla_cost,
                          agreement=agreement(totals, xla_cost, once, sorted({k.repeat for k in looped})),
                          intermediates=_intermediates(kernels), frames=dict(module.frames),
                          groups=_groups(module, kernels))


def _groups(module: HloModule, kernels: list[Kernel]) -> list[KernelGroup]:
    """The kernels' groups (by scope, else by the Python stack of each kernel's op); each kernel
    is told its group's label."""
    wanted = {k.name for k in kernels}
    stacks = {i.name: module.stack(i) for c in module.computations.values() for i in c.instructions if i.name in wanted}
    groups = group_kernels(kernels, stacks)
    label = {name: g.label for g in groups for name in g.kernels}
    for k in kernels:
        k.group = label.get(k.name)
    return groups
