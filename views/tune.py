"""The sweep, rendered: a ranked table per input shape and chip, each chip's best ``--set`` line
and how far the default is from it; the progress bar while it runs; HTML for Jupyter (a bar per
row). Only reads a TuneResult."""
from __future__ import annotations

import html
import sys

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..base.units import count, fmt_bytes, fmt_time

if TYPE_CHECKING:  # the result's own _repr_html_ imports this module
    from ..tuning.model import ChipRanking, TuneResult, TuneRow

RANKED = "ranked"  # inspector.tuning.model.RANKED
_STATUS_STYLE = {"untimed": "yellow", "pruned": "yellow", "refused": "red", "failed": "red", "not-run": "dim"}


def _params(row: TuneRow) -> str:
    return " ".join(f"{k}={v}" for k, v in row.params.items())


def _vmem(row: TuneRow) -> str:
    used = row.vmem_bytes if row.vmem_bytes is not None else row.vmem_estimate_bytes
    if used is None:
        return "-"
    mark = "" if row.vmem_bytes is not None else " est."
    if not row.vmem_limit_bytes:
        return fmt_bytes(used) + mark
    return f"{fmt_bytes(used)}{mark} / {fmt_bytes(row.vmem_limit_bytes)} ({used / row.vmem_limit_bytes:.0%})"


def _note(row: TuneRow, reasons: dict[str, int]) -> str:
    """Ranked rows: how the estimate was made when not whole, default, cached. Others: their
    status and the number of their reason, listed under the table (many rows share one)."""
    if row.status == RANKED:  # a floor's source is the header's (time (floor))
        extra = [] if row.estimate_source in (None, "libtpu") or _floor(row) else [row.estimate_source]
        return ", ".join(extra + (["default"] if row.default else []) + (["cached"] if row.cached else []))
    number = reasons.setdefault(f"{row.status}: {row.reason or ''}", len(reasons) + 1)
    return f"{row.status} [{number}]" + (", default" if row.default else "")


def _floor(row: TuneRow) -> bool:
    return row.estimate_kind == "floor"


def floors(ranking: ChipRanking) -> bool:
    """Whether the chip's ranked times are floors (a GPU's, deviceless), not libtpu's estimates."""
    return any(_floor(r) for r in ranking.rows if r.status == RANKED)


FLOOR_CAPTION = ("time (floor): a lower bound, no simulation (deviceless XLA:GPU times nothing): each kernel's bytes, flops "
                 "and last partial wave at the chip's peaks; it ranks what compiled, and close calls want a GPU to decide")


def _memory(chip: str) -> str:
    """The on-chip memory the chip's kernels are budgeted in: VMEM, shared memory."""
    from ..base.chips import get_chip
    from ..families import family_of

    return family_of(get_chip(chip)).info.memory or "VMEM"


def _short(reason: str, limit: int = 160) -> str:
    """A reason's first sentence, cut (--json has it whole)."""
    for prefix in ("ValueError while lowering: ", "NotImplementedError while lowering: "):
        reason = reason.replace(prefix, "", 1)
    end = reason.find(". ", 40)
    reason = reason[:end + 1] if end > 0 else reason
    return reason if len(reason) <= limit else reason[:limit - 3] + "..."


def ranking_table(shape: str, ranking: ChipRanking, swept: list[str], top: int = 0) -> Group:
    table = Table(title=f"{ranking.chip}  ·  {shape}", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("rank", justify="right")
    for name in swept:
        table.add_column(name, justify="right")
    measured = any(r.measured_seconds is not None for r in ranking.rows)  # tune --measure: device time beside the estimate
    floor = floors(ranking)  # a GPU's: no spills per grid step (libtpu's bundles) to show
    for column in ("time (floor)" if floor else "est. time", *(("measured",) if measured else ()), "x best",
                   f"{_memory(ranking.chip)} used / limit", "HBM traffic", "bound", *(() if floor else ("spills",))):
        table.add_column(column, justify="left" if column == "bound" else "right")
    table.add_column("note")
    rows = ranking.rows
    reasons: dict[str, int] = {}
    ranked = [r for r in rows if r.status == RANKED]
    shown = (ranked[:top] if top else ranked) + [r for r in rows if r.status != RANKED]
    for row in shown:
        style = "bold green" if row is ranking.best else _STATUS_STYLE.get(row.status, "")
        table.add_row(str(row.rank) if row.rank else "-", *(str(row.params.get(n, "-")) for n in swept),
                      fmt_time(row.estimated_seconds), *((fmt_time(row.measured_seconds),) if measured else ()),
                      f"{row.ratio:.2f}x" if row.ratio else "-", _vmem(row),
                      fmt_bytes(row.hbm_bytes), row.bound or "-",
                      *(() if floor else ("-" if row.spills is None else f"{row.spills:,}",)), _note(row, reasons), style=style)
    captions = [FLOOR_CAPTION] if floor else []
    if top and len(ranked) > top:
        captions.append(f"{len(ranked) - top} more ranked rows (--top 0 shows all)")
    if measured:
        estimate = "the time floor" if floor else "libtpu's estimate"
        captions.append(f"ranked by measured device time on the attached {ranking.chip} where measured (x best from it), "
                        f"then by {estimate}")
    if captions:
        table.caption = "\n".join(captions)
        table.caption_justify = "left"
    listed = Text("\n".join(f"  [{n}] {_short(reason)}" for reason, n in reasons.items()), style="dim")
    return Group(table, listed) if reasons else Group(table)


def best_lines(ranking: ChipRanking) -> Text:
    text = Text()
    if ranking.best is None:
        text.append(f"{ranking.chip}: no candidate ranked", style="red")
        return text
    best = ranking.best
    by_floor = floors(ranking) and best.measured_seconds is None  # measured: ranked by the chip, not the floor
    text.append(f"{ranking.chip} best{' by the time floor' if by_floor else ''}: ", style="bold")
    text.append(ranking.set_line or "(the defaults)", style="bold green")
    text.append(f"  ({fmt_time(best.measured_seconds)} measured)" if best.measured_seconds is not None
                else f"  ({fmt_time(best.estimated_seconds)}{' floor' if _floor(best) else ''})")
    d = ranking.default
    if d is None:
        return text
    if d is ranking.best:
        text.append("; the default is the best")
    elif d.rank is not None:  # ranked by its estimate, or measured on the chip (an untimed row too)
        text.append(f"; the default ({_params(d)}) is rank {d.rank} of {sum(r.rank is not None for r in ranking.rows)}, "
                    f"{d.ratio:.2f}x the best's time")
    else:
        text.append(f"; the default ({_params(d)}) is {d.status}: {d.reason}")
    return text


def interrupted_line(result: TuneResult) -> str:
    c = result.counts
    return (f"interrupted: {c['total'] - c.get('not-run', 0)} of {c['total']} done; run the same command again to "
            "resume (what is done is cached)")


def summary(result: TuneResult, with_interrupted: bool = True) -> Text:
    """``with_interrupted``: False where the interruption is said elsewhere (the command line says
    it on stderr, as it says every other way a command ends early; Jupyter keeps it here)."""
    c = result.counts
    chips = len(result.shapes[0].chips) if result.shapes else 0
    per = f"{count(c['total'] // max(chips * len(result.shapes), 1), 'candidate')} x {count(chips, 'chip')}"
    if len(result.shapes) > 1:
        per += f" x {len(result.shapes)} shapes"
    parts = [f"{c.get(s, 0)} {s}" for s in ("ranked", "untimed", "pruned", "refused", "failed", "not-run") if c.get(s)]
    where = result.runner if result.runner != "local" else f"{count(result.workers, 'worker')}"
    text = Text(f"{result.target}: {per}: {', '.join(parts)}; {c.get('cached', 0)} from the cache, {c.get('done', 0)} computed "
                f"in {_duration(result.wall_seconds)} on {where}")
    if result.interrupted and with_interrupted:
        text.append("\n" + interrupted_line(result), style="bold yellow")
    for note in result.notes:
        text.append(f"\nnote: {note}", style="yellow")
    if result.table:
        text.append(f"\nwrote {result.table} (the tuning table)")
    if result.table_note:
        text.append(f"\n{result.table_note}", style="yellow")
    return text


def tune_view(result: TuneResult, top: int = 0) -> Group:
    """The command line's output (stdout): an interruption is not in it; ``interrupted_line`` goes to stderr."""
    parts: list[RenderableType] = []
    for shape in result.shapes:
        for ranking in shape.chips:
            parts.append(ranking_table(shape.shape, ranking, result.swept, top))
    parts.append(Text(""))
    for shape in result.shapes:
        if len(result.shapes) > 1:
            parts.append(Text(shape.shape, style="bold"))
        parts += [best_lines(r) for r in shape.chips]
    if result.fixed:
        parts.append(Text("fixed: " + " ".join(f"--set {k}={v}" for k, v in result.fixed.items()), style="dim"))
    parts.append(summary(result, with_interrupted=False))
    return Group(*parts)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes} min {s} s"


# ----------------------------------------------------------------------------- progress


class TuneProgress:
    """rich's progress bar on stderr: candidates done of all, the cached, pruned, refused and
    failed so far, time left. Nothing at all when stderr is not a terminal."""

    def __init__(self, label: str, stream=None):
        self.stream = stream or sys.stderr
        self.label = label
        self.progress: Any = None  # a rich Progress while it shows (on a terminal)
        self.task: Any = None
        self.counts = {"cached": 0, "untimed": 0, "pruned": 0, "refused": 0, "failed": 0}

    @property
    def enabled(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def start(self, total: int, done: int, workers: int, runner: str) -> None:
        if not self.enabled or self.progress is not None:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.counts["cached"] = done
        console = Console(file=self.stream, stderr=True)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), TextColumn("left"),
                                 TimeRemainingColumn(), console=console, transient=True)
        self.progress.start()
        where = runner if runner != "local" else f"{workers} workers"
        self.task = self.progress.add_task(f"tune {self.label} ({where})", total=total, completed=done,
                                           detail=self._detail())

    def _detail(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in self.counts.items() if n) or ""

    def advance(self, row: TuneRow) -> None:
        if row.status in self.counts:
            self.counts[row.status] += 1
        if self.progress is not None:
            self.progress.update(self.task, advance=1, detail=self._detail())

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


# ----------------------------------------------------------------------------- Jupyter


def tune_html(result: TuneResult) -> str:
    """Each shape and chip as an HTML table, a bar per ranked row (its time against the slowest
    ranked row), the best's --set line under it."""
    out = [f"<div><p><b>{html.escape(result.target)}</b>: {html.escape(summary(result).plain)}</p>"]
    for shape in result.shapes:
        for ranking in shape.chips:
            ranked = [r for r in ranking.rows if r.status == RANKED]
            slowest = max((r.estimated_seconds or 0 for r in ranked), default=0) or 1
            out.append(f"<p><b>{html.escape(ranking.chip)}</b> · {html.escape(shape.shape)}</p>"
                       '<table style="border-collapse: collapse; font-family: monospace; font-size: 12px">'
                       "<tr>" + "".join(f'<th style="text-align: left; padding: 2px 8px">{html.escape(h)}</th>' for h in
                                        ["rank", *result.swept, "time (floor)" if floors(ranking) else "est. time", "",
                                         "x best", _memory(ranking.chip), "HBM", "bound",
                                         "spills", "note"]) + "</tr>")
            for row in ranking.rows:
                width = 0 if row.estimated_seconds is None else max(1, round(200 * row.estimated_seconds / slowest))
                colour = "#2da44e" if row is ranking.best else "#8c959f"
                bar = (f'<div style="background: {colour}; height: 10px; width: {width}px"></div>' if width else "")
                cells = [str(row.rank or "-"), *(str(row.params.get(n, "-")) for n in result.swept),
                         fmt_time(row.estimated_seconds), bar, f"{row.ratio:.2f}x" if row.ratio else "-", _vmem(row),
                         fmt_bytes(row.hbm_bytes), row.bound or "-", "-" if row.spills is None else str(row.spills),
                         _note(row, {}) if row.status == RANKED else f"{row.status}: {_short(row.reason or '')}"]
                out.append("<tr>" + "".join(
                    f'<td style="padding: 2px 8px">{c if i == len(result.swept) + 2 else html.escape(c)}</td>'
                    for i, c in enumerate(cells)) + "</tr>")
            out.append("</table>")
            out.append(f"<p>{html.escape(best_lines(ranking).plain)}</p>")
    out.append("</div>")
    return "".join(out)
