"""The fix printer: the program as it is per chip, then each change tried with its compile
verdict, on-chip memory (VMEM, or a GPU's shared memory), time before and after (each figure says
what kind it is) and numerics; the changes refused before any compile, with the reason; the best
fix per chip."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes, fmt_estimate

if TYPE_CHECKING:  # types only: the printer never imports the analyses
    from ..base.findings import Finding
    from ..base.fix_model import FixResult, Trial


def _vmem(t: Trial) -> str:
    used = fmt_bytes(t.vmem_bytes) if t.vmem_bytes else "-"
    return f"{used} / {fmt_bytes(t.vmem_limit_bytes)}" if t.vmem_limit_bytes else used


def _time(t: Trial) -> str:
    text = fmt_estimate(t.seconds, t.estimate_kind, t.high_seconds) if t.seconds is not None else "-"
    if t.measured_seconds is not None:
        text += f" (measured {fmt_estimate(t.measured_seconds)})"
    return text


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut between words ("in flash_atte" named no kernel)."""
    if len(text) <= width:
        return text
    head = text[: width - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"


def _compiles(t: Trial) -> Text:
    if t.compiles is None:
        return Text("-")
    return Text("yes", style="green") if t.compiles else Text("no: " + _cut(t.compile_error or "refused", 80), style="red")


def _before(result: FixResult) -> Table:
    table = Table(title="as it is", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("chip", "compiles", f"{result.memory} used / limit", f"time ({result.timed_by})"):
        table.add_column(col)
    for t in result.before:
        table.add_row(t.chip, _compiles(t), _vmem(t), _time(t))
    return table


def _numerics(verdict: str) -> Text:
    return Text(verdict, style={"match": "green", "unchanged": "green", "differ": "red", "failed": "red"}.get(verdict, "yellow"))


def _fixes(result: FixResult) -> Table:
    table = Table(title="fixes tried (best first)", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("#", "change", "chip", "compiles", f"{result.memory} used / limit", f"time ({result.timed_by})", "gain",
                "numerics", ""):
        table.add_column(col)
    for i, fix in enumerate(result.fixes, 1):
        for j, t in enumerate(fix.trials):
            gain = fix.gains.get(t.chip)
            verdict = (Text("recommended", style="bold green") if t.chip in fix.recommended
                       else Text(f"wrong: {fix.wrong[t.chip].partition(':')[0]}", style="red") if t.chip in fix.wrong
                       else Text(""))
            table.add_row(str(i) if j == 0 else "", fix.change.label if j == 0 else "", t.chip, _compiles(t), _vmem(t),
                          _time(t), f"{gain:.2f}x" if gain is not None else "-", _numerics(fix.numerics) if j == 0 else "",
                          verdict)
    return table


def fix_lines(finding: Finding, result: FixResult | None) -> list[Text]:
    """The fixes that answer ``finding`` (``FixResult.answers``), one line each, for the overview
    and the TUI: what it changes, on which chip, what it gives, and how to make it."""
    if result is None:
        return []
    chip = str((finding.data or {}).get("chip") or result.chips[0])
    lines = []
    for index in result.answers.get(f"{finding.code}@{chip}", []):
        fix = result.fixes[index]
        trial = next((t for t in fix.trials if t.chip == chip), None)
        if trial is None:
            continue
        gain = fix.gains.get(chip)
        said = [f"compiles, {result.memory} {_vmem(trial)}" if trial.compiles else "refused"]
        said += [f"{gain:.2f}x faster"] if gain is not None else []
        said += [f"numerics {fix.numerics}"]
        how = (f"; {result.command_line[chip]}" if index == result.best.get(chip) and chip in result.command_line
               else "; --patch writes it" if index == result.best_in_source.get(chip) else "")
        lines.append(Text(f"fix #{index + 1} {fix.change.label}: {', '.join(said)}{how}", style="green"))
    return lines


def _best_lines(result: FixResult) -> list[Text]:
    """The best fix per chip; where it changes a --set, the command line that makes it, and the
    best fix the source can express (what --patch writes)."""
    lines = []
    for chip, index in result.best.items():
        lines.append(Text(f"best on {chip}: #{index + 1} {result.fixes[index].change.label}", style="bold green"))
        if chip in result.command_line:
            lines.append(Text(f"  a value you gave with --set: {result.command_line[chip]} (your command decides it, "
                              "no patch of the source can)", style="bold"))
            source = result.best_in_source.get(chip)
            lines.append(Text(f"  best the source can express on {chip}: #{source + 1} {result.fixes[source].change.label}"
                              if source is not None else f"  no fix the source can express is recommended on {chip}"))
    return lines


def fix_view(result: FixResult) -> RenderableType:
    parts: list[RenderableType] = [Text(result.target, style="bold"), _before(result)]
    for t in result.before:  # what a fix must not leave, beside whether it compiles
        parts += [Text(f"{t.chip} as it is: error {e}", style="red") for e in t.errors if t.compiles]
    if result.fixes:
        parts.append(_fixes(result))
        for i, fix in enumerate(result.fixes, 1):
            why = f"  {i}. {fix.change.why}"
            if fix.numerics_detail:
                why += f"; numerics: {fix.numerics_detail}"
            for chip, error in fix.wrong.items():  # why it is never recommended there
                why += f"; on {chip} the grid walk finds {error}"
            for chip, codes in fix.clears.items():  # why it is recommended, faster or not
                why += f"; on {chip} it clears {codes}"
            parts.append(Text(why, style="dim"))
    else:
        parts.append(Text("no change to try: no pallas_call with a change this version proposes"))
    for r in result.refused:
        parts.append(Text(f"refused{f' on {r.chip}' if r.chip else ''}: {r.change.label}: {r.reason}", style="yellow"))
    parts += _best_lines(result)
    for chip in result.chips:
        if chip not in result.best:
            parts.append(Text(f"{chip}: no fix recommended", style="yellow"))
    if result.patch_note:
        parts.append(Text(result.patch_note))
    if result.not_tried:
        parts.append(Text("not tried: " + "; ".join(result.not_tried), style="dim"))
    return Group(*parts)
