"""Rank each shape's rows per chip by libtpu's estimated time."""
from __future__ import annotations

import dataclasses

from .model import FAILED, NOT_RUN, PRUNED, RANKED, REFUSED, UNTIMED, ChipRanking, ShapeResult, TuneRow

_ORDER = {RANKED: 0, UNTIMED: 1, REFUSED: 2, PRUNED: 3, FAILED: 4, NOT_RUN: 5}


def rank_rows(chip: str, rows: list[TuneRow]) -> ChipRanking:
    """Ranked rows fastest first (ties keep the sweep's order), each with its rank and its ratio
    to the best; then the untimed, refused, pruned, failed and not-run ones, in the sweep's order."""
    order = {id(r): i for i, r in enumerate(rows)}
    ranked = sorted((r for r in rows if r.status == RANKED), key=lambda r: (r.estimated_seconds, order[id(r)]))
    fastest = ranked[0].estimated_seconds if ranked else None
    ranked = [dataclasses.replace(row, rank=i, ratio=_seconds(row) / fastest if fastest else None) for i, row in enumerate(ranked, 1)]
    others = [dataclasses.replace(row, rank=None, ratio=None)
              for row in sorted((r for r in rows if r.status != RANKED), key=lambda r: (_ORDER.get(r.status, 9), order[id(r)]))]
    return ChipRanking(chip=chip, rows=ranked + others, best=ranked[0] if ranked else None,
                       default=next((r for r in ranked + others if r.default), None))


def _seconds(row: TuneRow) -> float:
    assert row.estimated_seconds is not None  # ranked rows have a time
    return row.estimated_seconds


def rank_all(shapes: list[str], chips: list[str], rows: list[TuneRow]) -> list[ShapeResult]:
    return [ShapeResult(shape=shape, chips=[rank_rows(chip, [r for r in rows if r.shape == shape and r.chip == chip])
                                for chip in chips]) for shape in shapes]
