"""The chip a verb compiles for when the command line names none: one rule for every verb, in a
terminal or in a pipe (the terminal UI once chose from the file and the overview it prints into a
pipe did not: the same command compiled for tpu-v5e in a terminal and for the CPU into `| cat`):

1. the TPU attached to this machine (read without opening it), else
2. tpu-v5e (DEFAULT_TPU) for check and tune, which are about TPUs, else
3. cpu (a Pallas TPU kernel there runs as the interpreter's HLO, and the overview's
   `pallas-interpreted` finding says to give --target for the real kernel).
"""
from __future__ import annotations

from ..base.chips import DEFAULT_TPU
from .backends import attached_chip

TPU_VERBS = ("check", "tune")  # verbs about TPUs: never the CPU
RULE = f"the attached TPU; without one, cpu ({DEFAULT_TPU} for check and tune)"


def default_target(verb: str) -> tuple[str, str]:
    """(chip, why) for ``verb`` when --target is not given."""
    attached = attached_chip()
    if attached is not None:
        return attached.name, "no --target: the TPU attached to this machine"
    if verb in TPU_VERBS:
        return DEFAULT_TPU, f"no --target: {verb} is about TPUs and this machine has none"
    return "cpu", "no --target and no TPU here"
