"""Everything about the pallas_calls of one traced program on a set of chips: the BlockSpec walk
(once per kernel), the layout rules and the VMEM budget per chip, gathered with their findings."""
from __future__ import annotations

import dataclasses

from ..base.chips import Chip
from ..base.findings import Finding
from ..hlo.fusions import scoped_vmem_used
from ..hlo.module import parse_hlo
from .grid_walk import GridWalk, unwalked, walk_grid
from .discovery import read_program
from ..base.pallas_model import PallasCall
from .tiling import tiling_findings
from .gpu_smem import shared_memory_findings
from .budgets import budget
from .vmem import VmemBudget
from .vmem_rules import share


@dataclasses.dataclass(kw_only=True)
class PallasReport:
    call: PallasCall
    walk: GridWalk
    budgets: list[VmemBudget]  # one per chip that has a budget (TPUs, GPUs)
    findings: list[Finding]
    pipelines: list[GridWalk] = dataclasses.field(default_factory=list)  # each emit_pipeline in the body, walked

    @property
    def flops(self) -> float | None:
        """The most the grid computes (the costliest pl.when / cond branches); None when the grid
        size is known only at run time."""
        steps = self.call.steps
        return None if steps is None else self.call.step_flops * steps

    @property
    def transcendentals(self) -> float | None:
        """The most transcendentals the grid computes, as flops counts them."""
        steps = self.call.steps
        return None if steps is None else self.call.step_transcendentals * steps

    @property
    def flops_range(self) -> list[float] | None:
        steps = self.call.steps
        return None if steps is None else [self.call.step_flops_min * steps, self.call.step_flops * steps]

    @property
    def cost_estimate(self) -> dict | None:
        """What to pass to pl.CostEstimate (upper bounds: every branch's costliest side); None when
        the walk could not follow the kernel."""
        if self.walk.skipped or self.call.steps is None:
            return None
        flops = self.flops
        assert flops is not None  # known with the steps
        return {"flops": int(flops), "transcendentals": int(self.transcendentals or 0),
                "bytes_accessed": int(self.walk.hbm_bytes)}


# what an undecided verdict tells the user to do: a compile settles it, and costs no TPU
COMPILE_DECIDES = ("only a compile decides: run check without --estimate-only (a deviceless libtpu compile, seconds, "
                   "no TPU needed)")


def _budget_findings(b: VmemBudget, chip: Chip) -> list[Finding]:
    found = []
    if chip.smem_bytes and b.smem_bytes > chip.smem_bytes:
        found.append(Finding("error", "smem-over-limit", f"{b.kernel} on {b.chip}: scalar prefetch and SMEM scratch need "
                             f"{b.smem_bytes:,} B of SMEM, more than its {chip.smem_bytes:,} B: prefetch less (per row "
                             "block, not the whole table)", kernel=b.kernel, view="pallas",
                             data={"chip": b.chip, "bytes": b.smem_bytes, "limit": chip.smem_bytes}))
    if b.memory == "shared memory":
        return found + shared_memory_findings(b)
    if b.verdict == "fits":
        return found
    mib = lambda n: f"{n / 2**20:.2f} MiB"
    data = {"chip": b.chip, "bytes": b.total_bytes, "limit": b.limit_bytes}
    certain = b.certain_bytes
    if b.unfollowed and b.verdict == "unsure":
        return found + [Finding("warning", "vmem-undecided",
                        f"{b.kernel} on {b.chip}: the estimate counts {mib(b.total_bytes)} of the {b.limit_source} "
                        f"{mib(b.limit_bytes)}, but {b.unfollowed}, so it cannot say the kernel fits: {COMPILE_DECIDES}",
                        kernel=b.kernel, view="pallas", data={**data, "certain_bytes": certain, "why": b.unfollowed})]
    if b.verdict == "unsure":
        unsure = []
        besides = sum(size for _, size in b.room_for)
        value = b.body_bytes - besides
        # what of the body's value is not already counted as certain
        size = f"{mib(value - b.held_bytes)} more of its {mib(value)}" if b.held_bytes else mib(value)
        if b.body_unrolled:
            unsure.append(f"the values of straight-line code ({size}: matmul results, an unrolled loop's trips), "
                          "which the compiler can keep live together")
        elif value > b.held_bytes:
            unsure.append(f"the largest value the body builds ({size}), which the compiler usually keeps in VMEM "
                          "but can stream (a dot accumulated into a ref)")
        unsure += [f"{what} ({mib(size)})" for what, size in b.room_for]
        if b.outside_bytes:
            outside = ", ".join(i.what for i in b.items if i.maybe_outside)
            unsure.append(f"the blocks of {outside} ({mib(b.outside_bytes)}), operands XLA may place whole in VMEM "
                          "outside the kernel's scoped limit (then they take none of it)")
        if b.in_ref_matmul_bytes and not unsure:
            unsure.append(f"a matmul result built in the ref it is stored into ({mib(b.in_ref_matmul_bytes)}), which "
                          "leaves the compiler no room at the very limit on some chips")
        if b.placed_bytes and not unsure:
            unsure.append(f"operands XLA places whole in VMEM (their {mib(b.placed_bytes)} of blocks out of the "
                          "limit), which leave the compiler no room at the very limit")
        if b.spill_bytes:
            beyond = " beyond the body's values" if b.body_bytes else ""
            unsure.append(f"{b.spill_what} ({mib(b.spill_bytes)}{beyond})")
        held = f", {mib(b.held_bytes)} of it {b.held_what}" if b.held_bytes else ""
        where = ("over" if b.total_bytes > b.limit_bytes else "at" if b.total_bytes == b.limit_bytes else
                 f"within {share('body_margin', chip):.0%} of")
        return found + [Finding("warning", "vmem-may-exceed",
                        f"{b.kernel} on {b.chip}: the rest needs {mib(certain)} of the {b.limit_source} "
                        f"{mib(b.limit_bytes)}{held}; with {' and '.join(unsure)}, the estimate is {mib(b.total_bytes)}, {where} "
                        f"it: {COMPILE_DECIDES}",
                        kernel=b.kernel, view="pallas", data={**data, "certain_bytes": certain})]
    growth = f"; the pipelined blocks alone would have to shrink to {b.block_growth:.2f}x" if b.block_growth else ""
    body = f" ({mib(b.total_bytes)} with the unsure terms)" if certain != b.total_bytes else ""
    held = f", {mib(b.held_bytes)} of it {b.held_what}" if b.held_bytes else ""
    return found + [Finding("error", "vmem-over-limit" if b.memory == "VMEM" else "shared-memory-over-limit",
                    f"{b.kernel} on {b.chip}: needs at least {mib(certain)} of {b.memory}{held}{body} but the "
                    f"{b.limit_source} is {mib(b.limit_bytes)} (over by {mib(certain - b.limit_bytes)}){growth}",
                    kernel=b.kernel, view="pallas", data=data)]


def defer_to_compiler(findings: list[Finding], chip: str, compiler_bytes) -> list[Finding]:
    """libtpu compiled the program for ``chip``, so every kernel fits its VMEM there: an estimate
    over the limit over-counts (a value the compiler streams, say). The compiler is the truth; the
    estimate's error becomes a warning that says so. ``compiler_bytes``: the most scoped VMEM a
    kernel uses by the compiler's figure, or a function that reads it (only asked when needed)."""
    def deferred(f: Finding) -> Finding:
        nonlocal compiler_bytes
        if f.code not in ("vmem-over-limit", "vmem-may-exceed", "vmem-undecided") or f.data is None or \
                f.data.get("chip") != chip:
            return f
        if callable(compiler_bytes):
            compiler_bytes = compiler_bytes() or None
        used = f"{compiler_bytes / 2**20:.2f} MiB" if compiler_bytes else "its scoped limit"
        return Finding("warning", "vmem-estimate-over-compiler",
                       f"{f.kernel} on {chip}: the estimate ({f.data['bytes'] / 2**20:.2f} MiB) is over the limit, but "
                       f"libtpu compiled it within {used}: the estimate over-counts this kernel (--estimate-only alone "
                       + ("would have refused it)" if f.code == "vmem-over-limit" else "could not decide)"),
                       kernel=f.kernel, view="pallas",
                       data={**{k: f.data[k] for k in ("chip", "bytes", "limit")}, "compiler_bytes": compiler_bytes})
    return [deferred(f) for f in findings]


def _why_unevaluated(err: Exception) -> str:
    if type(err).__name__ == "UnexpectedTracerError":  # the map closes over a traced value of the kernel
        return "they read a value of the kernel, such as lax.axis_index or a ref"
    return f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"


def refused_by_compiler(findings: list[Finding], chip: str) -> list[Finding]:
    """libtpu ran out of VMEM compiling for ``chip``: what the estimate left undecided is decided.
    The warning keeps the estimate's figures and says so; the error is the compiler's."""
    def settled(f: Finding) -> Finding:
        if f.code not in ("vmem-may-exceed", "vmem-undecided") or f.data is None or f.data.get("chip") != chip:
            return f
        if f.code == "vmem-undecided":
            return dataclasses.replace(f, message=f"{f.message}; libtpu decided: it ran out of VMEM (compile-vmem-oom)")
        return dataclasses.replace(f, message=(
            f"{f.kernel} on {chip}: the estimate is over the limit ({f.data['bytes'] / 2**20:.2f} MiB with its unsure "
            f"terms, {f.data['certain_bytes'] / 2**20:.2f} MiB without, of {f.data['limit'] / 2**20:.2f} "
            "MiB), and libtpu agrees: it ran out of VMEM (compile-vmem-oom)"))
    return [settled(f) for f in findings]


def compiler_scoped_vmem(hlo: str) -> list[int]:
    """The scoped VMEM each Mosaic kernel of a compiled TPU program uses, as libtpu wrote it in the
    custom call's config (scan and cond bodies too). 0 for a config that names none: that says
    nothing about its VMEM (unknown, not 0 B)."""

    return [scoped_vmem_used(i.backend_config) or 0
            for c in parse_hlo(hlo).computations.values() for i in c.instructions
            if i.opcode == "custom-call" and i.attr("custom_call_target") == "tpu_custom_call"]


def compiler_vmem_by_call(calls: list[str], kernels, compile_error) -> dict[str, int]:
    """Per pallas_call name, the compiler's own VMEM figure on the compiled chip: the scoped VMEM
    its Mosaic custom call uses (``kernels``: the fusion analysis' kernels), or what it needed
    when the compile ran out of VMEM (``compile_error``). The one place that matches a
    pallas_call to its custom call: by the call's name in the op name or as the kernel's prefix."""
    found: dict[str, int] = {}
    for kernel in kernels or []:
        if kernel.compiler_scoped_vmem_bytes and kernel.kind.startswith("custom-call"):
            for name in calls:
                if name in (kernel.op_name or "") or kernel.name.startswith(name):
                    found[name] = max(found.get(name, 0), kernel.compiler_scoped_vmem_bytes)
    if compile_error is not None and compile_error.vmem is not None:
        vmem = compile_error.vmem
        for name in calls:
            if vmem.kernel is None or vmem.kernel.startswith(name) or name in (vmem.op_name or ""):
                found[name] = vmem.used_bytes
    return found


def _walk_pipelines(found) -> tuple[list[GridWalk], list[Finding]]:
    """Each emit_pipeline of a kernel body (pl.kernel, core_map, or a pallas_call's over HBM refs)
    walked like a pallas_call's grid; one that cannot be walked is a finding that says so (never
    silence)."""
    info, walks, findings = found.info, [], []
    for why in found.unwalked_pipelines:
        findings.append(Finding("info", "pipeline-not-walked", f"{info.name}: {why}, so its grid walk (coverage, "
                                "revisits, block traffic) is not done; its buffers are still counted in the VMEM budget",
                                kernel=info.name, view="pallas", data={"why": why}))
    for pipe in found.pipelines:
        try:
            walk = walk_grid(pipe)
        except Exception as err:  # an index map that reads values of the kernel (program ids, refs)
            findings.append(Finding("info", "pipeline-not-walked",
                                    f"{info.name}: the emit_pipeline at {pipe.info.source} has index maps that cannot be "
                                    f"evaluated outside the kernel ({_why_unevaluated(err)}), so its grid walk is not "
                                    "done; its buffers are still counted in the VMEM budget",
                                    kernel=info.name, view="pallas", data={"why": str(err)[:400]}))
            continue
        walks.append(walk)
        findings += [dataclasses.replace(f, kernel=info.name, message=f"{info.name}, the emit_pipeline at "
                                         f"{pipe.info.source}: {f.message}") for f in walk.findings]
    return walks, findings


def _with_pipeline_traffic(found, walk: GridWalk, pipelines: list[GridWalk]) -> GridWalk:
    """A kernel whose every emit_pipeline was walked: HBM traffic from those walks (a block fetched
    when its index changes), the outer grid's blocks and the body's other DMAs, instead of every
    conditional block copy in the pipelines' code counted as if it ran each step."""
    info = found.info
    if (walk.skipped or not pipelines or found.unwalked_pipelines or len(pipelines) != len(found.pipelines)
            or len(found.pipeline_runs) != len(pipelines) or info.steps is None):
        return walk
    other = [d for d in info.dmas if d.touches_hbm and not d.pipeline]
    read = sum(d.bytes * d.per_step[1] for d in other if d.src_space in ("any", "hbm")) * info.steps
    written = sum(d.bytes * d.per_step[1] for d in other) * info.steps - read
    read += sum(w.bytes for w in walk.operands if w.role == "input")
    written += sum(w.bytes for w in walk.operands if w.role == "output")
    read += sum(p.hbm_bytes_read * runs for p, runs in zip(pipelines, found.pipeline_runs))
    written += sum(p.hbm_bytes_written * runs for p, runs in zip(pipelines, found.pipeline_runs))
    return dataclasses.replace(walk, hbm_bytes_read=int(read), hbm_bytes_written=int(written))


def _could_not(what: str, kernel: str, err: Exception) -> Finding:
    return Finding("warning", "analysis-failed", f"could not analyse {what} of {kernel}: {type(err).__name__}: {err}; "
                   "the other views still hold", kernel=kernel, view="pallas", data={"what": what, "why": str(err)})


def analyse_pallas(program, budget_chips: list[Chip], rule_chips: list[Chip]) -> tuple[list[PallasReport], list[Finding]]:
    """Walk each kernel once; budget it on ``budget_chips``; turn layout rules and budgets into
    findings for ``rule_chips`` only (the chips the user targets). Returns the reports and the
    findings about calls that could not be read at all. Each analysis that fails on a kernel
    becomes a finding; the rest still run."""
    calls, unread = read_program(program)
    reports = []
    for found in calls:
        info = found.info
        try:
            walk = walk_grid(found)
        except Exception as err:
            walk = unwalked(info, [_could_not("the grid walk", info.name, err)], skipped=f"walk failed: {type(err).__name__}")
        findings = list(walk.findings)
        pipeline_walks, pipeline_findings = _walk_pipelines(found)
        findings += pipeline_findings
        walk = _with_pipeline_traffic(found, walk, pipeline_walks)
        budgets = {}
        for chip in budget_chips + [c for c in rule_chips if c not in budget_chips]:
            try:
                if b := budget(info, chip):
                    budgets[chip.name] = b
            except Exception as err:
                findings.append(_could_not(f"the VMEM budget on {chip.name}", info.name, err))
        mosaic_chips = [c for c in rule_chips if c.vmem_bytes is not None]  # a chip with VMEM: its kernels are Mosaic's
        if info.interpret and mosaic_chips:
            findings.append(Finding("info", "kernel-interpret-flag",
                                    f"{info.name}: pallas_call(interpret=True): on a TPU too it runs as the interpreter's HLO, "
                                    "not a Mosaic kernel, so the compiler's verdict does not cover it; drop interpret=True "
                                    "to see the real kernel (the inspector interprets on the CPU by itself)",
                                    kernel=info.name, view="pallas"))
        for chip in rule_chips:
            if info.interpret and chip in mosaic_chips:
                continue  # the interpreter's HLO, never Mosaic: its layout rules and VMEM limits do not apply
            try:
                findings += tiling_findings(info, chip)
            except Exception as err:
                findings.append(_could_not(f"the layout rules on {chip.name}", info.name, err))
            if chip.name in budgets:
                findings += _budget_findings(budgets[chip.name], chip)
        reports.append(PallasReport(call=info, walk=walk, budgets=list(budgets.values()), findings=findings,
                                    pipelines=pipeline_walks))
    return reports, unread
