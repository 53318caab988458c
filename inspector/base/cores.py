"""How many cores the inspector's own parallel work may take: libtpu's compiles side by side
(libtpu/parallel.py) and tune's worker processes (tuning/sweep.py). The CPUs this process may run
on, or fewer where $INSPECTOR_CORES says so: on a machine whose cores are already busy (a shared
host, a test run with one test per core), more compiles at once only contend."""
from __future__ import annotations

import os

from .errors import UsageError

VARIABLE = "INSPECTOR_CORES"


def available() -> int:
    """The CPUs this process may use, at most $INSPECTOR_CORES where it is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    given = os.environ.get(VARIABLE, "").strip()
    if not given:
        return cores
    if not given.isdecimal() or int(given) < 1:
        raise UsageError(f"{VARIABLE}={given!r}: give a whole number of 1 or more (the cores the inspector's parallel compiles "
                         "and tune workers may use), or unset it for all of them")
    return min(cores, int(given))
