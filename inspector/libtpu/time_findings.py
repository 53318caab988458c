"""The findings an estimate gives about its own figures: where they came from and how far to
trust them. Each function returns the Finding; the estimate (estimate.py) decides when."""
from __future__ import annotations

from ..base.chips import Chip
from ..base.findings import Finding
from .budget import Budget
from .model import KernelTime, StepFit
from .runner import Outcome


def budget_note(chip: Chip, budget: Budget, why: str) -> Finding:
    return Finding("info", "time-budget", f"libtpu's simulation on {chip.name}: {why}", view="fusions",
                   data={"chip": chip.name, "seconds": budget.seconds, "memory_bytes": budget.memory_bytes, "why": why})


def extrapolated(chip: Chip, t: KernelTime, fit: StepFit) -> Finding:
    grids = " and ".join("(" + ", ".join(map(str, g)) + ")" for g in fit.grids)
    return Finding(
        "info", "time-extrapolated",
        f"{t.name}: {t.steps:,} grid steps; libtpu simulated grids {grids}: {fit.per_step:,.0f} cycles a step, "
        f"extrapolated to {t.estimated_cycles:,.0f} cycles", kernel=t.name, view="fusions",
        data={"chip": chip.name, "steps": t.steps, "grids": fit.grids, "cycles_per_step": fit.per_step})


def below_roofline(chip: Chip, t: KernelTime) -> Finding:
    """A simulated time below the kernel's roofline is impossible (faster than the chip's peak or
    its HBM): the simulation left something out (seen on the v5e: samples/attention.py:flash
    simulated at 130 us, roofline 174 us, measured 376 us). The roofline stands, said so."""
    assert t.estimated_seconds is not None and t.roofline_seconds is not None  # the caller compared them
    return Finding(
        "warning", "libtpu-below-roofline",
        f"{t.name}: libtpu's simulation on {chip.name} gives {t.estimated_seconds * 1e6:,.1f} us, below the kernel's "
        f"roofline ({t.roofline_seconds * 1e6:,.1f} us): its time is the roofline, which the kernel may well take "
        "more than (measure on a TPU: --measure)", kernel=t.name, view="fusions",
        data={"chip": chip.name, "libtpu_seconds": t.estimated_seconds, "roofline_seconds": t.roofline_seconds})


def no_time(chip: Chip, op: str) -> Finding:
    """A Pallas kernel's simulation came back as 0 cycles: no kernel runs in no time, so libtpu
    did not time it; its roofline stands (marked r)."""
    return Finding("info", "libtpu-no-time", f"{op}: libtpu's simulation on {chip.name} gave 0 cycles (it did not time "
                   "this kernel): its time is a floor", kernel=op, view="fusions", data={"chip": chip.name})


def cost_model_gave_up(chip: Chip, t: KernelTime) -> Finding:
    """An XLA op neither simulated nor estimated by XLA:TPU's cost model (it wrote its "no estimate"
    value): the roofline is all there is, and nothing bounds the time from above."""
    shown = f"its roofline ({t.roofline_seconds * 1e6:,.1f} us), a lower bound" if t.roofline_seconds is not None else "unknown"
    return Finding(
        "warning", "xla-cost-unknown",
        f"{t.name}: XLA's cost model on {chip.name} gave no estimate (its 'unknown' value) and libtpu did not simulate "
        f"it: its time is {shown}; the chip may take many times that (measure on a TPU: --measure)",
        kernel=t.name, view="fusions", data={"chip": chip.name, "roofline_seconds": t.roofline_seconds})


def unreadable(chip: Chip, problem: str) -> Finding:
    file, _, why = problem.partition(": ")
    return Finding("info", "libtpu-dump-unreadable",
                   f"a libtpu dump the inspector cannot read ({problem}): its figures show as -",
                   view="fusions", data={"chip": chip.name, "file": file, "why": why or problem})


def aborted(chip: Chip, label: str, detail: str | None) -> Finding:
    return Finding("info", "libtpu-aborted", f"libtpu ended its {label} compile on {chip.name}"
                   + (f": {detail}" if detail else " (SIGABRT)") + "; what it wrote before is used",
                   view="fusions", data={"chip": chip.name, "reason": detail})


def refused(chip: Chip, reason: str | None) -> Finding:
    """libtpu simulates nothing of this program on this chip (the chip, or every compile of the
    program, refused): one line that says so and why, not a budget note (no budget would change it)."""
    what = (f"libtpu refused every simulation of this program on {chip.name} ({reason})" if chip.libtpu_times else
            f"libtpu does not simulate programs for {chip.name}" + (f" ({reason})" if reason else ""))
    return Finding(
        "warning", "libtpu-refused",
        f"{what}: each XLA op's time is the compiler's own estimate and each Pallas kernel's a floor (its roofline, "
        "or the bundles it issues); --time-budget and --time-memory change nothing (measure on a TPU: --measure)",
        view="fusions", data={"chip": chip.name, "reason": reason})


def no_time_alone(chip: Chip, op: str) -> Finding:
    """An XLA op simulated alone came back as 0 cycles: libtpu did not time it (a multi-output
    fusion, seen on the v5e); its floor stands, and the finding says so."""
    return Finding("info", "libtpu-no-time",
                   f"{op}: libtpu's simulation of it alone on {chip.name} gave 0 cycles (it did not time this op): "
                   "its time is a floor (measure on a TPU: --measure)",
                   kernel=op, view="fusions", data={"chip": chip.name})


def loop_floor(chip: Chip, ops: list[str]) -> Finding:
    """XLA ops inside a while loop whose trip count only the run decides (a sampler's search):
    each is counted once, so the program's time is a floor."""
    shown = ", ".join(ops[:4]) + (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
    return Finding("warning", "xla-loop-unknown",
                   f"{shown}: inside a while loop whose trip count is known only when it runs, each counted once: "
                   f"their times and the program's total are floors on {chip.name} (measure on a TPU: --measure)",
                   view="fusions", data={"chip": chip.name, "kernels": ops})


def simulated_alone(chip: Chip, op: str, compiled: bool = False) -> Finding:
    if compiled:  # an XLA op, cut out of the compiled program
        message = (f"{op}: libtpu did not simulate it in the whole program (over the budget, or stopped before it); "
                   "simulated alone, as XLA compiled it (its layouts and loops; its operands as parameters, in VMEM where "
                   "the program kept them there)")
    else:
        message = (f"{op}: libtpu stopped simulating the whole program before it; simulated in a program of its own "
                   "(its operands as parameters, so no op before it is counted)")
    return Finding("info", "libtpu-alone", message, kernel=op, view="fusions", data={"chip": chip.name})


def stopped(outcome: Outcome) -> str:
    """How a compile ended, for a finding's message."""
    return {"time-limit": "passed its time limit", "memory-limit": "passed its memory limit",
            "aborted": "was aborted by libtpu"}.get(outcome.status, f"ended ({outcome.status})")
