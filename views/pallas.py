"""The Pallas view (BlockSpecs, grid walk, VMEM budgets) and the `check` verdict table."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes, fmt_bytes_range

from .cells import add_row, findings_table

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from collections.abc import Sequence

    from ..base.findings import Finding
    from ..verbs.checking import CheckResult
    from ..pallas.analysis import PallasReport


def _shape(dims) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in dims) + ")"


def blockspec_table(k: PallasReport) -> Table:
    walk = {w.operand: w for w in k.walk.operands}
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title="BlockSpecs", title_justify="left")
    for col in ("operand", "array", "block", "index map", "mem", "bufs", "distinct", "transfers", "HBM"):
        table.add_column(col, justify="right" if col in ("bufs", "distinct", "transfers", "HBM") else "left",
                         overflow="fold", no_wrap=col in ("operand", "mem"), min_width=24 if col == "index map" else None)
    for op in k.call.operands:
        w = walk.get(op.operand)
        if not op.pipelined:  # left in HBM: the kernel copies what it needs (see the DMAs)
            add_row(table, f"{op.operand} ({op.role[:3]} {op.position})", f"{op.dtype}{list(op.array_shape)}", "whole array",
                    "not a block of the grid", op.memory_space, "-", "-", "-", "-")
            continue
        add_row(table,
            f"{op.operand} ({op.role[:3]} {op.position})", f"{op.dtype}{list(op.array_shape)}", _shape(op.block_shape),
            op.index_map, op.memory_space + (" (unused)" if op.unused else "") + (" (in place)" if op.aliased_input else ""),
            str(op.buffers(k.call.compiled_steps, k.call.compiled_grid)), str(w.distinct_blocks) if w else "-",
            f"{w.transfers:,}" if w else "-", fmt_bytes(w.bytes) if w else "-")
    for i, s in enumerate(k.call.scratch):
        what, note = ("run_scoped", "allocated in the body") if s.scoped else ("scratch", "persists across steps")
        add_row(table, f"{what} {i}", f"{s.dtype}{list(s.shape)}", "", note, s.memory_space, "1", "", "", "")
    return table


def pipeline_table(k: PallasReport) -> Table | None:
    """Each emit_pipeline of the body, walked as a grid of its own: its blocks per operand (each
    run of the pipeline; a pallas_call runs it at every step of its own grid)."""
    if not k.pipelines:
        return None
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title="emit_pipeline walks (per run of the pipeline)",
                  title_justify="left")
    for col in ("pipeline", "steps", "operand", "block", "distinct", "transfers", "HBM"):
        table.add_column(col, justify="right" if col in ("steps", "block", "distinct", "transfers", "HBM") else "left",
                         overflow="fold")
    for p in k.pipelines:
        for i, w in enumerate(p.operands):
            add_row(table, p.kernel if i == 0 else "", f"{p.steps:,}" if i == 0 else "", f"{w.operand} ({w.role[:3]})",
                    fmt_bytes(w.block_bytes), str(w.distinct_blocks), f"{w.transfers:,}",
                    f"- ({fmt_bytes(w.bytes)} within VMEM)" if w.on_chip else fmt_bytes(w.bytes))
    return table


def dma_table(k: PallasReport) -> Table:
    """The body's async copies: what moves where, how much, how often per grid step."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title="DMAs in the kernel body (per grid step)", title_justify="left")
    for col in ("from", "to", "shape", "bytes", "per step", "HBM per step"):
        table.add_column(col, justify="right" if col in ("bytes", "per step", "HBM per step") else "left", overflow="fold")
    for d, (lo, hi) in _same_copies_merged(k.call.dmas):
        times = f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
        hbm = (fmt_bytes(d.bytes * hi) if lo == hi else f"{fmt_bytes(d.bytes * lo)}-{fmt_bytes(d.bytes * hi)}") if d.touches_hbm else "-"
        add_row(table, f"{d.source} ({d.src_space})", f"{d.destination} ({d.dst_space})" + (" (remote)" if d.remote else ""),
                f"{d.dtype}{list(d.shape)}", fmt_bytes(d.bytes), times, hbm)
    return table


def _same_copies_merged(dmas: list) -> list[tuple]:
    """One row per distinct copy (refs, spaces, shape), its copies per step added up: an unrolled
    loop of 32 identical DMAs is one row of 32 a step, not 32 rows."""
    merged: dict[tuple, list] = {}
    for d in dmas:
        key = (d.source, d.src_space, d.destination, d.dst_space, d.remote, d.dtype, tuple(d.shape), d.bytes)
        if key in merged:
            merged[key][1] = (merged[key][1][0] + d.per_step[0], merged[key][1][1] + d.per_step[1])
        else:
            merged[key] = [d, (d.per_step[0], d.per_step[1])]
    return [(d, times) for d, times in merged.values()]


def estimate_kind(k: PallasReport) -> str:
    """Which way the estimate can be wrong, where a budget says more than the default (run_scoped /
    emit_pipeline buffers counted all live at once can overstate)."""
    from ..pallas.vmem import VmemBudget  # here, not at import: the UI paints before numpy is imported

    other = sorted({b.note for b in k.budgets if b.note != VmemBudget.note})
    return "estimate; " + "; ".join(other) if other else "estimate"


# what the table's columns mean, per on-chip memory its rows are budgeted in (VmemBudget.memory)
BUDGET_CAPTIONS = {
    "VMEM": ("limit: the chip's default scoped VMEM, or the kernel's vmem_limit_bytes (set), at most the chip's "
             "VMEM (capacity); grow: how far the pipelined blocks could grow and still fit; unsure: only values the "
             "body builds, or operands XLA may place outside the limit, put it over or to it (a compile decides)"),
    "shared memory": ("limit: the opt-in shared memory a block may have on the chip; needs: the most Triton may keep, "
                      "NO where the least it surely keeps is over; unsure: the limit lies between them (a compile decides)"),
}
LIMIT_MARKS = {"scoped default": "", "opt-in shared memory per block": " (opt-in)"}


WRITTEN_FOR = {"mosaic_tpu": "a TPU (Mosaic's CompilerParams)", "triton": "a GPU (Triton's CompilerParams)",
               "mosaic_gpu": "a GPU (Mosaic GPU's CompilerParams)"}  # PallasCall.written_for, in words


def budget_table(k: PallasReport) -> Table | Text:
    if not k.budgets:  # a kernel of another family's (a Pallas TPU kernel for a GPU target: its error says so)
        written = WRITTEN_FOR.get(k.call.written_for or "")
        return Text("on-chip memory: no budget on this target" + (f" for a kernel written for {written}" if written else ""),
                    style="dim")
    memories = dict.fromkeys(b.memory for b in k.budgets)
    caption = "\n".join(BUDGET_CAPTIONS[m] for m in memories if m in BUDGET_CAPTIONS) or BUDGET_CAPTIONS["VMEM"]
    if any(b.placed_bytes for b in k.budgets):
        caption += ("; placed: blocks of operands XLA hands the kernel whole in VMEM beside the scoped region (not "
                    "counted in needs)")
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title=f"on-chip memory per target ({estimate_kind(k)})",
                  title_justify="left", caption=caption, caption_justify="left")
    for col in ("target", "needs", "limit", "fits", "headroom", "grow", "physical", "SMEM"):
        table.add_column(col, justify="left" if col in ("target", "fits") else "right", no_wrap=True)
    for b in k.budgets:
        fits = {"fits": Text("yes", style="green"), "over": Text("NO", style="bold red")}.get(
            b.verdict, Text("unsure", style="yellow"))
        limit = fmt_bytes(b.limit_bytes) + LIMIT_MARKS.get(b.limit_source, " (capacity)" if b.limit_source.startswith(
            "VMEM capacity") else " (set)")
        needs = fmt_bytes(b.total_bytes) + (f" ({fmt_bytes(b.placed_bytes)} placed)" if b.placed_bytes else "")
        add_row(table, f"{b.chip} ({b.memory})", needs, limit, fits,
                      fmt_bytes(b.headroom_bytes), f"{b.block_growth:.2f}x" if b.block_growth else "-", fmt_bytes(b.physical_bytes),
                      fmt_bytes(b.smem_bytes) if b.memory == "VMEM" else "-")
    return table


def kernel_view(k: PallasReport) -> Group:
    c, w = k.call, k.walk
    head = [
        Text.assemble((c.name, "bold"), f"  {c.style} at {c.source or '?'}; kernel {c.kernel_source or '?'}"
                      + (f"; one step per {c.core_type} of the mesh" if c.core_type else "")),
        Text(grid_line(k)),
        Text(f"HBM traffic from the walk: read {fmt_bytes(w.hbm_bytes_read)}, write {fmt_bytes(w.hbm_bytes_written)}"
             + (f" (the body's DMAs: {_range(w.dma_bytes, fmt_bytes)}{_or_more(c)})" if c.dmas else "")
             + f"  (walk {w.seconds:.2f} s)" if not w.skipped else f"grid walk skipped: {w.skipped}"),
        Text(cost_estimate_line(k), style="dim"),
    ]
    parts = [blockspec_table(k)] + [t for t in (pipeline_table(k),) if t is not None] + ([dma_table(k)] if c.dmas else [])
    return Group(*head, *parts, budget_table(k), findings_table(k.findings), Text(""))


def _or_more(call) -> str:
    n = call.unknown_loops
    return f" or more: {n} while loop{'s' * (n > 1)} with a trip count unknown here, counted once" if n else ""


def _range(pair, fmt) -> str:
    lo, hi = pair
    return fmt(hi) if lo == hi else f"{fmt(lo)} to {fmt(hi)}"


def grid_line(k: PallasReport) -> str:
    """"grid (i=4 parallel, j=? arbitrary): ... steps" with run-time dimensions marked."""
    c, w = k.call, k.walk
    axes = ", ".join(f"{n}={'?' if g is None else g}{' (run time)' if d else ''}{' (vmap)' if a in c.vmapped_dims else ''} {s}"
                     for a, (n, g, d, s) in enumerate(zip(c.grid_names, c.grid, c.grid_dynamic, c.dimension_semantics)))
    steps = "steps unknown until run time" if c.steps is None else f"{c.steps:,} steps"
    walked = f" (walked the first {w.walked_steps:,})" if w.sampled and not w.skipped else ""
    prefetch = f", {c.scalar_prefetch} scalar-prefetch operand(s)" if c.scalar_prefetch else ""
    return f"grid ({axes}): {steps}{walked}{prefetch}"


def cost_estimate_line(k: PallasReport) -> str:
    estimate = k.cost_estimate
    if estimate is None:
        return "no pl.CostEstimate to suggest: the walk could not follow the kernel"
    flops = k.flops_range
    spread = f" (the cheapest branches: {flops[0]:,.0f})" if flops and flops[0] != flops[1] else ""
    given = f"; the kernel gives {k.call.cost_estimate}" if k.call.cost_estimate else ""
    return ("suggested pl.CostEstimate(" + ", ".join(f"{key}={v}" for key, v in estimate.items())
            + f"): flops with the costliest pl.when / cond branches{spread}{_or_more(k.call)}{given}")


def unread_calls(findings: list[Finding]) -> list[Finding]:
    """The findings of pallas_calls the analysis could not read at all (a jax it cannot follow)."""
    return [f for f in findings if f.code == "analysis-failed" and (f.data or {}).get("what") == "pallas_call"]


def pallas_view(kernels: list[PallasReport], unread: Sequence[Finding] = (), others: Sequence[Finding] = ()) -> Group | Text:
    """``others``: the report's errors that belong to no kernel here (a failed lowering or compile):
    without them the view would say "no findings" while show exits 1."""
    parts: list[RenderableType] = [kernel_view(k) for k in kernels]
    parts += [Text(f.message, style="yellow") for f in unread]
    if others:
        parts += [Text("errors outside the kernels' analysis", style="bold"), findings_table(list(others))]
    return Group(*parts) if parts else Text("no pallas_call in this function")


def errors_outside(report_findings: list[Finding], kernels: list[PallasReport]) -> list[Finding]:
    shown = [f for k in kernels for f in k.findings] + unread_calls(report_findings)
    return [f for f in report_findings if f.severity == "error" and f not in shown]


def check_view(result: CheckResult) -> Group:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title=f"check {result.target}", title_justify="left")
    occupancy = any(t.ctas_per_sm is not None for t in result.targets)  # a GPU compile: its kernels' CTAs per SM
    for col in ("target", "estimate", "limit", "fits", "compiler", "compiler figure", "HBM/device", "usable", "HBM",
                *(("CTAs/SM",) if occupancy else ())):
        table.add_column(col, justify="left" if col in ("target", "fits", "compiler", "HBM") else "right", no_wrap=True)
    verdict = lambda v: Text("-", style="dim") if v is None else (Text("fits", style="green") if v else Text("DOES NOT FIT", style="bold red"))
    overruled: list[str] = []  # chips where the estimate and the compiler disagree: the compiler's verdict stands
    for t in result.targets:
        failed_otherwise = (t.compiler_fits is False and t.compiler_message and "VMEM" not in t.compiler_message
                            and "shared memory" not in t.compiler_message.lower()
                            and t.hbm_fits is not False)
        compiler = Text("COMPILE ERROR", style="bold red") if failed_otherwise else verdict(t.compiler_fits)
        if t.compiler_aborted:
            compiler = Text("ABORTED", style="bold red")
        never_traced = t.fits is None and t.vmem_bytes is None and t.compiler_message is not None  # its finding says why
        estimate = (Text("-", style="dim") if never_traced else Text("unsure", style="yellow") if t.fits is None else
                    verdict(t.fits) if t.vmem_bytes is not None or not t.fits else Text("-", style="dim"))
        if t.compiler_fits is not None and estimate.plain != "-" and estimate.plain != compiler.plain:
            overruled.append(f"{t.chip} ({compiler.plain}" + (": a failure other than VMEM, its finding below; the estimate "
                                                              "speaks of VMEM only)" if failed_otherwise else ")"))
        add_row(table, t.chip, fmt_bytes_range(t.vmem_certain_bytes, t.vmem_bytes), fmt_bytes(t.vmem_limit_bytes), estimate,
                      compiler, fmt_bytes(t.compiler_vmem_bytes), fmt_bytes(t.hbm_bytes), fmt_bytes(t.hbm_limit_bytes),
                      verdict(t.hbm_fits), *(("-" if t.ctas_per_sm is None else str(t.ctas_per_sm),) if occupancy else ()))
    if occupancy:
        table.caption = ("CTAs/SM: the blocks of the chip's Pallas kernel an SM holds at once (the fewest, where there are "
                         "several); show --view pallas says which limit binds")
        table.caption_justify = "left"
    kernels = ", ".join(f"{k.call.name} ({k.call.source}, grid {k.call.grid_text})" for k in result.kernels) or "none"
    status = Text(result.status, style="bold green" if result.ok else "bold red" if result.failed else "bold yellow")
    if result.undecided and not result.failed:
        status.append(f": the estimate cannot decide on {', '.join(result.undecided)} (its finding says why); "
                      "check without --estimate-only for the compiler's verdict (a deviceless compile, seconds)",
                      style="yellow")
    parts: list[RenderableType] = [table, Text(f"kernels: {kernels}"), Text("")]
    ptxas = [f"{t.chip} {t.registers if t.registers is not None else '-'}/thread, "
             f"{fmt_bytes(t.spill_bytes) if t.spill_bytes is not None else '-'} spilled"
             for t in result.targets if t.registers is not None or t.spill_bytes is not None]
    if ptxas:  # XLA:GPU's kernels, as ptxas built them
        parts.insert(2, Text("registers and spills (ptxas, the most of any Pallas kernel): " + "; ".join(ptxas)))
    if overruled:  # two verdicts in a row: say which one stands
        parts.insert(1, Text("the compiler's verdict stands where the two differ: " + ", ".join(overruled), style="yellow"))
    if any(b.placed_bytes for k in result.kernels for b in k.budgets):  # an estimate of 0 B says why
        parts.insert(2, Text("estimate: without the blocks of operands XLA hands a kernel whole in VMEM beside "
                             "the scoped region (show --view pallas lists them per chip)", style="dim"))
    if result.sweep:
        parts += [sweep_table(result.sweep), Text("")]
    return Group(*parts, findings_table(result.findings), Text(""), status)


def sweep_table(rows) -> Table:
    chips = list(dict.fromkeys(c for r in rows for c in r.needs))
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title="every combination of INSPECT's params (VMEM estimate)",
                  title_justify="left")
    table.add_column("params")
    for chip in chips:
        table.add_column(chip, justify="right", no_wrap=True)
    for r in rows:
        label = ", ".join(f"{k}={v}" for k, v in r.params.items())
        if r.error:
            add_row(table, label, *([Text(r.error[:60], style="dim")] + [""] * (len(chips) - 1) if chips else []))
            continue
        cells = [Text(f"{fmt_bytes_range(r.certain.get(c), r.needs[c])} " + {True: "fits", False: "NO", None: "unsure"}[r.fits[c]],
                      style={True: "green", False: "red", None: "yellow"}[r.fits[c]])
                 if r.needs.get(c) is not None else Text("-") for c in chips]
        add_row(table, label, *cells)
    return table


def gpu_kernels_table(kernels, chip: str) -> Table:
    """Each kernel of a deviceless XLA:GPU compile as the compiler launched it (report.gpu_kernels)."""
    table = Table(title=f"XLA:GPU's kernels for {chip} (registers and spills: ptxas)",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("kernel", "grid", "threads", "shared memory", "registers/thread", "spills", "CTAs/SM", "limit", "waves"):
        table.add_column(col, justify="left" if col in ("kernel", "limit") else "right", no_wrap=True)
    for k in kernels:
        dims = lambda d: "x".join(map(str, d)) if d else "-"
        o = k.occupancy
        table.add_row(k.name, dims(k.grid), dims(k.threads), fmt_bytes(k.shared_memory_bytes),
                      "-" if k.registers is None else str(k.registers),
                      "-" if k.spill_bytes is None else fmt_bytes(k.spill_bytes),
                      "-" if o is None else f"{o.ctas_per_sm} ({o.occupancy:.0%})",
                      "-" if o is None else o.limit, "-" if o is None or o.waves is None else f"{o.waves:.2f}")
    table.caption = ("CTAs/SM: the blocks an SM holds at once, the least of what its registers, shared memory "
                     "(+1 KiB reserved a block), threads and block slots allow (limit: which binds), and their warps "
                     "over the SM's most (the occupancy); waves: grid blocks / (CTAs/SM x SMs)")
    table.caption_justify = "left"
    return table
