"""The tune screen's ranked table, as rich Text: one entry per candidate with its row on every
chip, in one chip's order; each cell (the time or why there is none, the bar, the note); the pane
about one candidate (its figures per chip, a failure's whole reason); the counts. Only reads a
TuneResult (inspector.tuning.model)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ...base.units import fmt_bytes, fmt_time

if TYPE_CHECKING:
    from ...tuning.model import ChipRanking, TuneResult, TuneRow

RANKED = "ranked"  # inspector.tuning.model.RANKED (the model is imported when a sweep runs)
BAR_WIDTH = 20
_STATUS_STYLE = {"untimed": "yellow", "pruned": "yellow", "refused": "red", "failed": "red", "not-run": "dim"}


def param_text(value) -> str:
    """A value as --set takes it (bools lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _key(params: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def candidates_by_rank(result: TuneResult, shape: int, chip: str) -> list[tuple[dict, dict[str, TuneRow]]]:
    """One entry per candidate of ``shape``: its parameters and its row on each chip, in the
    order of ``chip``'s ranking (ranked fastest first, then untimed, refused, pruned, failed)."""
    chips = result.shapes[shape].chips
    by_key: dict[tuple, tuple[dict, dict]] = {}
    order = next(c for c in chips if c.chip == chip)
    for ranking in [order] + [c for c in chips if c is not order]:
        for row in ranking.rows:
            by_key.setdefault(_key(row.params), (row.params, {}))[1][ranking.chip] = row
    return list(by_key.values())


def top_rows(entries: list[tuple[dict, dict]], chip: str, top: int) -> tuple[list[tuple[dict, dict]], int]:
    """``candidates_by_rank``'s entries with only the ``top`` fastest ranked on ``chip`` (0: all) and
    every one not ranked there, as --top's tables; and how many ranked ones were left out."""
    ranked = [e for e in entries if (row := e[1].get(chip)) is not None and row.status == RANKED]
    if not top or len(ranked) <= top:
        return entries, 0
    left = {id(e) for e in ranked[top:]}
    return [e for e in entries if id(e) not in left], len(left)


def bar(row: TuneRow | None, slowest: float, best: bool) -> Text:
    if row is None or row.status != RANKED or not row.estimated_seconds or not slowest:
        return Text("")
    width = max(1, round(BAR_WIDTH * row.estimated_seconds / slowest))
    return Text("█" * width, style="green" if best else "cyan")


def time_cell(row: TuneRow | None) -> Text:
    if row is None:
        return Text("-")
    if row.status == RANKED:
        return Text(fmt_time(row.estimated_seconds))
    return Text(row.status, style=_STATUS_STYLE.get(row.status, ""))


def short_reason(reason: str | None, limit: int = 70) -> str:
    """A reason's first sentence, cut for a table cell (the pane below has it whole)."""
    text = (reason or "").replace("\n", " ")
    end = text.find(". ", 30)
    text = text[:end + 1] if end > 0 else text
    return text if len(text) <= limit else text[:limit - 1] + "…"


def note(row: TuneRow | None) -> Text:
    if row is None:
        return Text("")
    if row.status != RANKED:
        return Text(short_reason(row.reason), style=_STATUS_STYLE.get(row.status, ""))
    extra = ["floor"] if row.estimate_kind == "floor" else [] if row.estimate_source in (None, "libtpu") else [row.estimate_source]
    return Text(", ".join(extra + (["default"] if row.default else []) + (["cached"] if row.cached else [])), style="dim")


def row_detail(params: dict, rows: dict[str, TuneRow], rankings: dict[str, ChipRanking]) -> Text:
    """Everything about one candidate, per chip, with a failure's whole reason."""
    text = Text(" ".join(f"{k}={param_text(v)}" for k, v in params.items()) or "(the defaults)", style="bold")
    text.append("  (Enter applies them)\n", style="dim")
    failures: dict[tuple, list[str]] = {}  # (status, reason) -> the chips it is so on: said once
    for chip, row in rows.items():
        if row.status != RANKED:
            failures.setdefault((row.status, row.reason), []).append(chip)
            continue
        text.append(f"{chip}: ", style="bold")
        text.append(f"rank {row.rank} of {rankings[chip].count(RANKED)}, {fmt_time(row.estimated_seconds)}")
        if row.measured_seconds is not None:  # --measure: ranked by it on the attached TPU
            text.append(f", measured {fmt_time(row.measured_seconds)}")
        text.append(f" ({row.ratio:.2f}x the best)" if row.ratio else "")
        used = row.vmem_bytes if row.vmem_bytes is not None else row.vmem_estimate_bytes
        if used is not None:
            text.append(f", {'shared memory' if row.estimate_kind == 'floor' else 'VMEM'} {fmt_bytes(used)}{'' if row.vmem_bytes is not None else ' est.'}")
            if row.vmem_limit_bytes:
                text.append(f" of {fmt_bytes(row.vmem_limit_bytes)} ({used / row.vmem_limit_bytes:.0%})")
        if row.hbm_bytes is not None:
            text.append(f", HBM {fmt_bytes(row.hbm_bytes)}")
        if row.bound:
            text.append(f", bound by {row.bound}")
        if row.spills is not None:
            text.append(f", {row.spills:,} spills per grid step")
        if row.estimate_kind == "floor":  # a GPU's: a lower bound, not a simulation
            text.append(" (a time floor: no simulation)", style="yellow")
        elif row.estimate_source not in (None, "libtpu"):
            text.append(f" ({row.estimate_source})", style="yellow")
        text.append("\n")
    for (status, reason), chips in failures.items():
        text.append(f"{', '.join(chips)}: ", style="bold")
        text.append(status, style=_STATUS_STYLE.get(status, ""))
        text.append(f": {reason or 'no reason given'}\n")
    return text


def counts_line(result: TuneResult) -> Text:
    """How the candidates ended and what the sweep cost (the target is in the screen's title)."""
    c = result.counts
    per = max(len(result.shapes) * len(result.shapes[0].chips), 1) if result.shapes else 1
    chips = len(result.shapes[0].chips) if result.shapes else 0
    parts = [f"{c.get(s, 0)} {s}" for s in ("ranked", "untimed", "pruned", "refused", "failed", "not-run") if c.get(s)]
    text = Text(f"{c.get('total', 0) // per} candidates x {chips} chip{'s' if chips != 1 else ''}"
                + (f" x {len(result.shapes)} shapes" if len(result.shapes) > 1 else "")
                + f": {', '.join(parts)}; {c.get('cached', 0)} from the cache, {c.get('done', 0)} computed in "
                f"{result.wall_seconds:.1f} s", style="dim")
    if result.interrupted:
        text.append(f"\ninterrupted: {c.get('total', 0) - c.get('not-run', 0)} of {c.get('total', 0)} done; r resumes "
                    "the sweep (what is done is cached)", style="bold yellow")
    return text
