"""Compile with XLA's pass-by-pass dumps and keep what they say, then remove them.

The dumps of a large program are tens of MB (the 12-layer transformer step: ~40 MB on the CPU),
so they go to a temporary folder, are read once into an index (``hlo.passes.read_dumps``), the
one diff asked for is made while the files exist, and the folder is removed on every path.
The compile itself is the ordinary one with extra XLA options for this compile only
(``stages.dump_options``): same module, same HLO; it never reads or writes the compile cache.
Only a diff shows the module texts, so only a compile for one (``select``) dumps each
instruction's metadata (jax's op name and source frame). The pass list and the pass that made
each kernel need names and opcodes only, and a dump without metadata is a third smaller, for XLA
to print and for us to read; in such a list a step whose only change is to metadata reads as
unchanged (none on the CPU's transformer step, one pipeline start of 107 steps on v5e).
"""
from __future__ import annotations

import shutil
import tempfile

from .backends import Backend
from .errors import UsageError
from .hlo.passes import PassLog, UnknownPass, diff_steps, parse_range, read_dumps
from .stages import Capture, capture
from .target import Target


def capture_with_passes(target: Target, backend: Backend, *, jaxpr_text: bool = False,
                        select: str | None = None) -> tuple[Capture, PassLog]:
    """Capture ``target`` (compiled, with pass dumps) and the PassLog of its compile; ``select``
    (``--pass``: a pass name or index, or ``A..B``) adds the unified diff of that step or range."""
    directory = tempfile.mkdtemp(prefix="inspector-passes-")
    try:
        captured = capture(target, backend, compile=True, jaxpr_text=jaxpr_text, use_cache=False, dump_to=directory,
                           dump_metadata=select is not None)
        log = read_dumps(directory, module=f"jit_{target.name}", final_hlo=captured.stages.hlo)
        if select is not None and log.steps:
            try:
                log.diff = diff_steps(log, *parse_range(log, select))
            except UnknownPass as err:
                raise UsageError(str(err)) from None
        elif select is not None:
            raise UsageError(f"--pass {select}: the compile wrote no pass dumps"
                             + (f" ({captured.stages.compile_error.headline})" if captured.stages.compile_error else ""))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    log.release()
    return captured, log
