"""``tune --measure``: the top candidates by estimate (a TPU's, or a GPU's floor), run on the
attached chip and ranked by their device time, each measured by that chip's family
(``Family.measure``). One process opens the chip for all of them (opening it costs seconds); the
rest of the sweep never does."""
from __future__ import annotations

import dataclasses

import inspector.base.environment as environment

from ..base.chips import get_chip
from ..base.errors import ChipBusy, InspectorError, NoChip
from ..base.environment import chip_failure
from ..base.child_process import run_isolated
from ..compilation.target import load_target
from ..families import family_of
from .model import RANKED, UNTIMED, ChipRanking, TuneResult

MEASURE_TOP = 8  # candidates measured per shape when --top does not say
MEASURE_ALL = -1  # --top 0: every candidate the estimate ranked (or could not time)


def measure_count(top: int | None) -> int:
    """How many candidates per shape --measure times: --top's figure, its 0 meaning all (as it does
    for the tables), MEASURE_TOP when --top is not given."""
    return MEASURE_TOP if top is None else MEASURE_ALL if top == 0 else top


def measure_rankings(result: TuneResult, spec: str, shape_args: dict[str, str | None], fixed: dict, top: int,
                     chip: str) -> TuneResult:
    """Measure the ``top`` (MEASURE_ALL: every one) fastest-estimated ranked rows of each shape on ``chip`` (the attached
    one; where fewer are ranked, the untimed ones after them) and re-rank them by device time:
    measured rows first, fastest first, then the rest as the estimate ranked them. Rows get
    ``measured_seconds``; a candidate that failed on the chip gets a note instead. The result with
    those rankings, measured on ``chip``."""
    jobs = []
    for shape in result.shapes:
        for ranking in shape.chips:
            if ranking.chip != chip:
                continue
            # the ranked first; then those the estimate could not rank (a loop it cannot count): the chip can
            candidates = [r for r in ranking.rows if r.status == RANKED] + [r for r in ranking.rows if r.status == UNTIMED]
            for row in candidates if top == MEASURE_ALL else candidates[:top]:
                jobs.append((shape.shape, shape_args[shape.shape], {**fixed, **row.params}, row))
    if not jobs:
        return dataclasses.replace(result, measured_on=chip)
    answers = run_isolated(measure_candidates, spec, chip, [(args, params) for _, args, params, _ in jobs],
                           env=environment.chip_env())
    measured = {id(row): dataclasses.replace(row, measured_seconds=answer) if isinstance(answer, float) else
                dataclasses.replace(row, notes=[*row.notes, f"not measured on the chip: {answer}"])
                for (_, _, _, row), answer in zip(jobs, answers)}

    def with_times(ranking: ChipRanking) -> ChipRanking:
        return rerank(dataclasses.replace(ranking, rows=[measured.get(id(r), r) for r in ranking.rows],
                                          default=measured.get(id(ranking.default), ranking.default)))

    shapes = [dataclasses.replace(shape, chips=[with_times(r) if r.chip == chip else r for r in shape.chips])
              for shape in result.shapes]
    return dataclasses.replace(result, shapes=shapes, measured_on=chip)


def rerank(ranking: ChipRanking) -> ChipRanking:
    """Measured rows by device time (rank and ratio from it), then the other rows as they were."""
    times = {id(r): r.measured_seconds for r in ranking.rows if r.measured_seconds is not None}
    measured = sorted((r for r in ranking.rows if id(r) in times), key=lambda r: times[id(r)])
    if not measured:
        return ranking
    rest = [r for r in ranking.rows if id(r) not in times]
    fastest, estimate = times[id(measured[0])], measured[0].estimated_seconds
    new = {id(row): dataclasses.replace(row, rank=i, ratio=times[id(row)] / fastest) for i, row in enumerate(measured, 1)}
    for i, row in enumerate((r for r in rest if r.status == RANKED), len(measured) + 1):
        new[id(row)] = dataclasses.replace(row, rank=i, ratio=row.estimated_seconds / estimate
                                           if row.estimated_seconds and estimate else None)
    rows = [new.get(id(r), r) for r in measured + rest]
    return ChipRanking(chip=ranking.chip, rows=rows, best=rows[0], default=new.get(id(ranking.default), ranking.default))


def measure_candidates(spec: str, chip: str, candidates: list[tuple[str | None, dict]]) -> list:
    """In the process that opens the chip: each candidate's device time (seconds), or why not (a
    line). A chip that cannot be had (busy, or not there) ends the measuring: no candidate would run."""
    environment.prepare()

    family = family_of(get_chip(chip))
    answers: list = []
    for args, params in candidates:
        try:
            target = load_target(spec, args=args, sets=[], params=params)
            answers.append(family.measure(target, chip_name=chip).seconds)
        except (ChipBusy, NoChip):
            raise
        except (InspectorError, Exception) as err:  # one candidate failing on the chip is that row's note
            if (failure := chip_failure(err)) is not None:
                raise failure from err
            answers.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
    return answers
