"""Everything about the pallas_calls of one traced program on a set of chips: the BlockSpec walk
(once per kernel), the layout rules and the VMEM budget per chip, gathered with their findings."""
from __future__ import annotations

import dataclasses

from ..chips import Chip
from ..findings import Finding
from .grid_walk import GridWalk, walk_grid
from .discovery import PallasCall, find_pallas_calls
from .tiling import tiling_findings
from .vmem import VmemBudget, budget


@dataclasses.dataclass
class PallasReport:
    call: PallasCall
    walk: GridWalk
    budgets: list[VmemBudget]  # one per chip that has a budget (TPUs, GPUs)
    findings: list[Finding]

    @property
    def flops(self) -> float:
        return self.call.step_flops * self.call.steps

    @property
    def cost_estimate(self) -> dict:
        """What to pass to pl.CostEstimate: flops counts every pl.when branch, so an upper bound."""
        return {"flops": int(self.flops), "transcendentals": int(self.call.step_transcendentals * self.call.steps),
                "bytes_accessed": int(self.walk.hbm_bytes_read + self.walk.hbm_bytes_written)}


def _budget_findings(b: VmemBudget, chip: Chip) -> list[Finding]:
    found = []
    if chip.smem_bytes and b.smem_bytes > chip.smem_bytes:
        found.append(Finding("error", "smem-over-limit", f"{b.kernel} on {b.chip}: scalar prefetch and SMEM scratch need "
                             f"{b.smem_bytes:,} B of SMEM, more than its {chip.smem_bytes:,} B: prefetch less (per row "
                             "block, not the whole table)", kernel=b.kernel, view="pallas",
                             data={"chip": b.chip, "bytes": b.smem_bytes, "limit": chip.smem_bytes}))
    if b.fits:
        return found
    over = b.total_bytes - b.limit_bytes
    mib = lambda n: f"{n / 2**20:.2f} MiB"
    growth = f"; the pipelined blocks alone would have to shrink to {b.block_growth:.2f}x" if b.block_growth else ""
    return found + [Finding("error", "vmem-over-limit" if b.memory == "VMEM" else "shared-memory-over-limit",
                    f"{b.kernel} on {b.chip}: needs at least {mib(b.total_bytes)} of {b.memory} but the "
                    f"{b.limit_source} is {mib(b.limit_bytes)} (over by {mib(over)}){growth}",
                    kernel=b.kernel, view="pallas", data={"chip": b.chip, "bytes": b.total_bytes, "limit": b.limit_bytes})]


def analyse_pallas(closed_jaxpr, budget_chips: list[Chip], rule_chips: list[Chip]) -> list[PallasReport]:
    """Walk each kernel once; budget it on ``budget_chips``; turn layout rules and budgets into
    findings for ``rule_chips`` only (the chips the user targets)."""
    reports = []
    for found in find_pallas_calls(closed_jaxpr):
        walk = walk_grid(found)
        findings = list(walk.findings)
        budgets = {c.name: b for c in budget_chips + rule_chips if (b := budget(found.info, c))}
        for chip in rule_chips:
            findings += tiling_findings(found.info, chip)
            if chip.name in budgets:
                findings += _budget_findings(budgets[chip.name], chip)
        reports.append(PallasReport(found.info, walk, list(budgets.values()), findings))
    return reports
