"""An XLA op simulated alone: cut out of the compiled program as XLA compiled it (hlo/replay.py)
and compiled through libtpu's PJRT C API (pjrt.py) in a dump child. One op alone is cheap where its
program is not (attention's reference: 2 s and 0.6 GB for its softmax fusion, 172 s and 10.6 GiB
for the program), and it takes the cycles it takes in its program (within 0.3%)."""
from __future__ import annotations

from ..hlo.replay import NotReplayable, replay_module
from .pjrt import ReplayRequest

REPLAY = "replay-"  # an op's compile alone, in JobCost.label


def replay_request(hlo: str, op: str, topology: str) -> ReplayRequest | None:
    """The request that compiles ``op`` of ``hlo`` alone; None where it cannot be cut out."""
    try:
        return ReplayRequest(replay_module(hlo, op), topology)
    except NotReplayable:
        return None
