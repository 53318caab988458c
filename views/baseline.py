"""The baseline printers: what `baseline save` wrote, and what moved (`check --baseline`,
`baseline diff`): target, chip, kernel, source line, figure, before, after, change."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import count, fmt_bytes, fmt_count, fmt_estimate
from .cells import add_row

if TYPE_CHECKING:
    from ..baseline.compare import Change, Comparison
    from ..baseline.record import Baseline

_STYLE = {"worse": "red", "stopped": "bold red", "removed": "yellow", "new": "yellow", "better": "green",
          "started": "green", "changed": "yellow"}


def versions_line(versions: dict) -> str:
    return ", ".join(f"{k} {versions.get(k) or '-'}" for k in ("jax", "jaxlib", "libtpu", "inspector"))


def _unit(figure: str) -> str:
    from ..baseline.record import FIGURES

    return FIGURES[figure][0] if figure in FIGURES else "text"


def value(figure: str, v: Any) -> str:
    """A figure's value as the table shows it."""
    if v is None:
        return "-"
    unit = _unit(figure)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "count":
        return fmt_count(v) if figure == "flops" else f"{int(v):,}"
    if unit == "time" and isinstance(v, dict):
        return fmt_estimate(v.get("seconds"), v.get("kind"), v.get("high_seconds"))
    if unit == "flag":
        if figure == "compiled":
            return "compiles" if v else "refused"
        return "fits" if v else "does not fit"
    if unit == "codes":  # the change column names the codes that came and went
        return count(len(v), "finding")
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _cells(c: Change) -> tuple[str, str]:
    before, after = value(c.figure, c.before), value(c.figure, c.after)
    if before == after and _unit(c.figure) in ("bytes", "count") and c.before is not None and c.after is not None:
        before, after = f"{c.before:,}", f"{c.after:,}"  # the rounded figures read the same: the exact ones
    return before, after


def changes_table(changes: list[Change]) -> Table:
    """One target's changes: the chip, the kernel with its source line under it, the figure, before,
    after and the change in words."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    for col, right in (("chip", False), ("kernel, source", False), ("figure", False), ("before", True), ("after", True),
                       ("change", False)):
        table.add_column(col, justify="right" if right else "left", no_wrap=col in ("chip", "figure"))
    for c in changes:
        before, after = _cells(c)
        kernel = c.kernel if not c.source else f"{c.kernel}\n{c.source}"
        add_row(table, c.chip, kernel, c.figure, before, after, Text(c.change, style=_STYLE.get(c.what, "")))
    return table


def changes_by_target(changes: list[Change]) -> list[RenderableType]:
    """A table per target, under its name (what moved, target by target)."""
    targets: dict[str, list[Change]] = {}
    for c in changes:
        targets.setdefault(c.target, []).append(c)
    parts: list[RenderableType] = []
    for target, found in targets.items():
        parts += [Text(target, style="bold"), changes_table(found)]
    return parts


def _verdict(c: Comparison) -> Text:
    from ..baseline.compare import describe_tolerances

    compared = (f"{count(c.targets, 'target')} on {', '.join(c.chips) or 'no chip'}, "
                f"{count(c.kernels, 'kernel')} compared ({describe_tolerances(c.tolerances)})")
    if c.changes:
        return Text(f"{count(len(c.changes), 'change')} past the tolerance; {compared}", style="bold red")
    return Text(f"nothing moved past its tolerance: {compared}", style="green")


def _versions(c: Comparison, sides: tuple[str, str]) -> list[RenderableType]:
    width = max(len(s) for s in sides) + 1
    return [Text(f"  {side + ':':<{width}} {versions_line(versions)}")  # the files are in the title
            for side, versions in zip(sides, (c.before, c.after))]


def comparison_view(c: Comparison, title: str, sides: tuple[str, str] = ("before", "after")) -> RenderableType:
    parts: list[RenderableType] = [Text(title), *_versions(c, sides), Text("")]
    parts += changes_by_target(c.changes)
    parts.append(_verdict(c))
    if c.compiles:
        refused = f", {c.refused} refused by libtpu (refusals are never cached)" if c.refused else ""
        ran = f", {len(c.compiled)} compiled" if c.compiled and (c.from_cache or c.refused) else ""
        parts.append(Text(f"compiles: {c.compiles}, {c.from_cache} from the compile cache{refused}{ran}"))
    for note in c.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


def _cell(found: dict) -> str:
    if "error" in found:
        return f"raises: {value('error_kind', found['error'])}"
    program = found.get("program", {})
    if program.get("compiled") is False:
        return f"refused ({program.get('error_kind') or 'compile error'})"
    kernels = found.get("kernels", {})
    text = f"{count(len(kernels), 'kernel')}, {fmt_bytes(program.get('hbm_bytes'))}"
    if program.get("time"):
        text += f", {value('time', program['time'])}"
    return text


def saved_view(baseline: Baseline, path: str) -> RenderableType:
    chips = baseline.chips
    head = Text(f"wrote {path}: {count(len(baseline.targets), 'target')} on {', '.join(chips)}"
                f"{' with time' if baseline.time else ''} ({versions_line(baseline.versions)})")
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("target")
    for chip in chips:
        table.add_column(chip)
    for label, entry in baseline.targets.items():
        if "error" in entry:
            add_row(table, label, *[f"raises: {value('error_kind', entry['error'])}"] * len(chips))
            continue
        add_row(table, label, *[_cell(entry["chips"].get(chip, {"error": "not computed"})) for chip in chips])
    return Group(head, table)


def baseline_panel(found: Comparison | str, path: str | None) -> RenderableType:
    """The terminal UI's overview: this target on this chip against the baseline's figures."""
    if isinstance(found, str):
        return Text(found, style="yellow")
    # the verdict and what moved lead: the overview's top is all that shows at first sight (80x24)
    verdict = _verdict(found)
    parts: list[RenderableType] = [Text.assemble(("baseline ", "bold"), (path or "", "bold"), ": ", verdict)]
    if found.changes:  # one target on one chip: its table alone
        parts.append(changes_table(found.changes))
    parts += _versions(found, ("baseline", "now"))
    parts += [Text(f"note: {note}", style="yellow") for note in found.notes]
    return Group(*parts)
