"""XLA ops simulated one at a time, each cut out of the compiled program as XLA compiled it
(hlo/replay.py) and compiled through libtpu's PJRT C API (pjrt.py) in a dump child: for the ops
the program's simulation gave no figure. One op alone is cheap where its program is not
(attention's reference: 2 s and 0.6 GB for its softmax fusion, 172 s and 10.6 GiB for the program)."""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ..hlo.replay import NotReplayable, replay_module
from .budget import MIN_SECONDS
from .model import PALLAS_KINDS, JobCost
from .pjrt import ReplayRequest
from .runner import Outcome, open_session
from .time_findings import simulated_alone

REPLAY = "replay-"  # an op's compile alone, in JobCost.label: the budget ends their series, a result like any other
# the time left ends the series; an op past the memory budget ends only its own compile (the reference
# attention's causal mask, pred[4096,4096] in VMEM: 17k cycles that take libtpu 173 s and 10.5 GB to simulate)
SPENT = ("time-limit",)
REFUSALS_IN_A_ROW = 2  # libtpu refusing two ops in a row refuses the chip (v4's DMA model), not one op


def simulate_alone(ops: list[str], hlo: str, topology: str, seconds_left: Callable[[], float],
                   memory_bytes: int) -> Iterator[tuple[str, Outcome]]:
    """Each of ``ops`` (HLO op names of ``hlo``, in the order given) and how its compile alone
    ended (``Outcome.cycles`` holds the op's simulated cycles), while the budget lasts."""
    refused = 0
    with open_session(topology, profile=True, bundles=False) as session:
        for op in ops:
            if seconds_left() < MIN_SECONDS:
                return
            try:
                request = ReplayRequest(replay_module(hlo, op), topology)
            except NotReplayable:
                continue
            outcome = session.run(request, seconds=seconds_left(), memory_bytes=memory_bytes)
            yield op, outcome
            refused = refused + 1 if outcome.status == "aborted" else 0
            if outcome.status in SPENT or refused >= REFUSALS_IN_A_ROW:
                return


def simulate_untimed(run, unestimated_only: bool = False) -> None:
    """The XLA ops ``run`` (an estimate in progress, estimate.py's _Run) has no figure for, each
    simulated alone: those the compiler's cost model gave up on first (``unestimated_only``: only
    those), then the costliest by that model, while the budget lasts. Their cycles, jobs and a
    ``libtpu-alone`` finding each join the run's."""
    from ..compilation.stages import capture  # (jax: only when an estimate runs)

    gave_up = lambda k: getattr(k, "compiler_gave_up", False)
    untimed = [k for k in run.kernels if k.name not in run.cycles and k.name not in run.replayed
               and k.kind not in PALLAS_KINDS and (gave_up(k) if unestimated_only else k.compiler_cycles or gave_up(k))]
    if not untimed or run.left() < MIN_SECONDS:
        return
    hlo = run.hlo or capture(run.target, run.backend, jaxpr_text=False).stages.hlo
    if not hlo:
        return
    ops = [k.name for k in sorted(untimed, key=lambda k: (not gave_up(k), -(k.compiler_cycles or 0)))]
    for op, outcome in simulate_alone(ops, hlo, run.topology, run.left, run.budget.memory_bytes):
        run.replayed.add(op)
        run.jobs.append(JobCost(label=f"{REPLAY}{op}", status=outcome.status, wall_seconds=round(outcome.wall_seconds, 3),
                                peak_rss_bytes=outcome.peak_rss_bytes, detail=outcome.detail))
        if cycles := outcome.cycles.get(op):
            run.cycles[op] = cycles
            run.findings.append(simulated_alone(run.chip, op, compiled=True))
