"""Compile with XLA's pass-by-pass dumps and keep what they say, then remove them.

The dumps of a large program are tens of MB (the 12-layer transformer step: ~40 MB on the CPU),
so they go to a temporary folder, are read once into an index (``hlo.passes.read_dumps``), the
one diff asked for is made while the files exist, and the folder is removed on every path.
The compile itself is the ordinary one with extra XLA options for this compile only
(``xla_compile.dump_options``): same module, same HLO; it never reads or writes the compile cache.
Only a diff shows the module texts, so only a compile for one (``select``) dumps each
instruction's metadata (jax's op name and source frame). The pass list and the pass that made
each kernel need names and opcodes only, and a dump without metadata is a third smaller, for XLA
to print and for us to read; in such a list a step whose only change is to metadata reads as
unchanged (none on the CPU's transformer step, one pipeline start of 107 steps on v5e).

The terminal UI asks for one diff at a time (Enter on a step): its worker keeps one compile's
dumps (``kept_diff``) for the module it has, so the next step's diff is read, not compiled again.
The folders are ``tempdirs`` folders: a process killed before its cleanup (Ctrl-C in the CLI, a
cancel in the terminal UI) has its folder removed by the process that killed it, or by the next run.
"""
from __future__ import annotations

import hashlib
import os

from .backends import Backend
from ..base.errors import UsageError
from ..hlo.passes import PassLog, UnknownPass, diff_steps, parse_range, read_dumps
from ..hlo.pass_select import check_selector
from .stage_records import Capture
from .stages import capture
from .target import Target
from ..base.tempdirs import KeptFolder, temp_folder


def capture_with_passes(target: Target, backend: Backend, *, jaxpr_text: bool = False,
                        select: str | None = None) -> tuple[Capture, PassLog]:
    """Capture ``target`` (compiled, with pass dumps) and the PassLog of its compile; ``select``
    (``--pass``: a pass name or index, or ``A..B``) adds the unified diff of that step or range
    (a compile that wrote no dumps has no steps: the caller says so, with the compile's error
    explained, which is an analysis above this layer)."""
    if select is not None:
        check_selector(select)  # before the compile
    with temp_folder("passes") as directory:
        captured = capture(target, backend, compile=True, jaxpr_text=jaxpr_text, use_cache=False, dump_to=directory,
                           dump_metadata=select is not None)
        log = read_dumps(directory, module=f"jit_{target.name}", final_hlo=captured.stages.hlo)
        if select is not None and log.steps:
            try:
                log.diff = diff_steps(log, *parse_range(log, select))
            except UnknownPass as err:
                raise UsageError(str(err)) from None
    log.release()
    return captured, log


_KEPT = KeptFolder("passes")  # this process's kept dumps: one module's folder and its log


def kept_diff(target: Target, backend: Backend, select: str):
    """The diff of ``select`` (as ``--pass``) from one compile with metadata dumps that this
    process keeps for the module it compiled: the first call compiles, the next ones for the same
    module (same StableHLO, chip and XLA options) only read files. Another module's dumps go first."""
    check_selector(select)

    def fill(directory: str) -> PassLog:
        captured = capture(target, backend, compile=True, jaxpr_text=False, use_cache=False, dump_to=directory)
        log = read_dumps(directory, module=f"jit_{target.name}", final_hlo=captured.stages.hlo)
        if not log.steps:
            raise UsageError(f"--pass {select}: the compile wrote no pass dumps")
        return log

    lowered = capture(target, backend, compile=False, jaxpr_text=False).stages.stablehlo
    key = (backend.chip.name, hashlib.sha256(lowered.encode()).hexdigest(),
           tuple(os.environ.get(v, "") for v in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")))
    log = _KEPT.get(key, fill)
    try:
        return diff_steps(log, *parse_range(log, select))
    except UnknownPass as err:
        raise UsageError(str(err)) from None
