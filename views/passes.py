"""The passes view: every dump of XLA's pipeline in order with its counts, and one pass's diff."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..base.units import fmt_bytes

from .cells import add_row

if TYPE_CHECKING:  # types only: the UI paints before the analyses (and numpy) are imported
    from ..hlo.passes import PassDiff, PassLog


def _signed(n: int) -> str:
    return f"{n:+d}" if n else ""


# The step table's columns, declared once for the printer and the TUI: (header, right-aligned)
PASS_COLUMNS = [("#", True), ("pipeline", False), ("pass", False), ("changed", False), ("instrs", True), ("Δ", True),
                ("fusions", True), ("Δ ", True), ("custom calls", True), ("Δ  ", True), ("made", True)]


def pass_cells(s) -> list[Text]:
    """One step's cells, in PASS_COLUMNS order; a step that changed nothing is dim."""
    style = "" if s.changed else "dim"
    return [Text(str(s.index), style=style), Text(s.pipeline or "-", style=style), Text(s.name, style=style or "bold"),
            Text("yes" if s.changed else "no", style="green" if s.changed else "dim"),
            Text(str(s.instructions)), Text(_signed(s.delta)), Text(str(s.fusions)), Text(_signed(s.fusions_delta)),
            Text(str(s.custom_calls)), Text(_signed(s.custom_calls_delta)), Text(str(s.made or ""))]


def passes_title(log: PassLog) -> str:
    return (f"{log.module}: {len(log.steps)} steps of XLA's pipeline "
            f"({sum(s.changed for s in log.steps)} changed the module; dumps {fmt_bytes(log.dump_bytes)}, removed)")


def passes_table(log: PassLog, only_changed: bool = False) -> Table:
    table = Table(title=passes_title(log),
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  caption=f"{log.note}. `--pass NAME` (or an index, or A..B) shows the diff; "
                          "`--view fusions --passes` names the pass that made each kernel",
                  caption_justify="left")
    for header, right in PASS_COLUMNS:
        table.add_column(header, justify="right" if right else "left",
                         **({"overflow": "fold"} if header in ("pipeline", "pass") else {"no_wrap": True}))
    for s in log.steps:
        if only_changed and not s.changed:
            continue
        add_row(table, *pass_cells(s))
    return table


def diff_text(diff: PassDiff, colour: bool) -> Text:
    """The unified diff, + lines green and - lines red (plain when ``colour`` is off)."""
    out = Text()
    header = f"{diff.title}: +{diff.added} -{diff.removed} lines\n"
    out.append(header, style="bold" if colour else "")
    if not diff.text:
        out.append("the module is the same before and after\n")
        return out
    for line in diff.text.split("\n"):
        style = ""
        if colour:
            if line.startswith(("+++", "---")):
                style = "bold"
            elif line.startswith("+"):
                style = "green"
            elif line.startswith("-"):
                style = "red"
            elif line.startswith("@@"):
                style = "cyan"
        out.append(line + "\n", style=style)
    return out


def passes_view(log: PassLog) -> Group:
    return Group(passes_table(log))
