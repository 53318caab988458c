"""Errors that reach the user as one line and an exit code, never as a traceback."""
from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1  # the analysed function failed, or a check found an error
EXIT_USAGE = 2  # the command line or the target file is wrong
EXIT_UNDECIDED = 3  # check could not decide (a VMEM estimate only a compile can settle), nothing failed
EXIT_UNAVAILABLE = 4  # the attached TPU is held by another process: try again when it is free


class InspectorError(Exception):
    """A failure the user can act on; ``str(err)`` is the one line they see."""

    exit_code = EXIT_USAGE


class UsageError(InspectorError):
    """Bad input: a missing file, a malformed shape spec, an unknown parameter."""


class TargetFailure(InspectorError):
    """The user's function itself failed (raised while tracing)."""

    exit_code = EXIT_FINDINGS


class AnalysisFailed(InspectorError):
    """The analysis could not finish: its process was killed or crashed."""

    exit_code = EXIT_FINDINGS


class OutputError(UsageError):
    """Standard output or an output file cannot be written (closed, full, a missing folder)."""


class NoChip(UsageError):
    """--measure (or another run on the chip) where no TPU is attached."""


class ChipBusy(InspectorError):
    """The attached TPU is held by another process (one process at a time can open it)."""

    exit_code = EXIT_UNAVAILABLE
