"""Rank each shape's rows per chip by libtpu's estimated time."""
from __future__ import annotations

from .model import FAILED, NOT_RUN, PRUNED, RANKED, REFUSED, UNTIMED, ChipRanking, ShapeResult, TuneRow

_ORDER = {RANKED: 0, UNTIMED: 1, REFUSED: 2, PRUNED: 3, FAILED: 4, NOT_RUN: 5}


def rank_rows(chip: str, rows: list[TuneRow]) -> ChipRanking:
    """Ranked rows fastest first (ties keep the sweep's order), each with its rank and its ratio
    to the best; then the untimed, refused, pruned, failed and not-run ones, in the sweep's order."""
    order = {id(r): i for i, r in enumerate(rows)}
    ranked = sorted((r for r in rows if r.status == RANKED), key=lambda r: (r.estimated_seconds, order[id(r)]))
    best = ranked[0] if ranked else None
    for i, row in enumerate(ranked, 1):
        row.rank = i
        assert best is not None and row.estimated_seconds is not None  # ranked rows have a time
        row.ratio = row.estimated_seconds / best.estimated_seconds if best.estimated_seconds else None
    others = sorted((r for r in rows if r.status != RANKED), key=lambda r: (_ORDER.get(r.status, 9), order[id(r)]))
    for row in others:
        row.rank = row.ratio = None
    default = next((r for r in rows if r.default), None)
    return ChipRanking(chip=chip, rows=ranked + others, best=best, default=default)


def rank_all(shapes: list[str], chips: list[str], rows: list[TuneRow]) -> list[ShapeResult]:
    return [ShapeResult(shape=shape, chips=[rank_rows(chip, [r for r in rows if r.shape == shape and r.chip == chip])
                                for chip in chips]) for shape in shapes]
