"""Measure a target on the chip attached to this machine, through the family of the chip it
targets (``Family.attached``, ``Family.measure``): the checks that come before (can that family be
measured, is one of its chips attached, is it the target), then the family's run in a process of
its own that opens the chip (``environment.chip_env``) and closes it when done."""
from __future__ import annotations

import contextlib
import sys
from typing import Callable

import inspector.base.environment as environment

from ..base.chips import Chip, get_chip
from ..base.child_process import run_isolated
from ..base.errors import NoChip, UsageError
from ..measure.model import Measurement
from . import family_of


def _needed(chip: Chip, tpu: bool) -> str:
    """What measuring ``chip`` needs attached: any TPU (the target must then name it), else that GPU."""
    return "a TPU" if tpu else f"an {chip.name.split(':')[0].upper()}"


def attached_to_measure(chip: Chip, option: str = "--measure", advice: str | None = None) -> Chip:
    """The attached chip of ``chip``'s family; a NoChip line where there is none to measure on
    (``advice``: the way to an estimate, default ``--time gives {estimate} without {kind}``, its
    fields the family's estimate and kind of chip), a UsageError where that family is never
    measured. Read without opening the chip: checked before any compile."""
    family = family_of(chip)
    if not family.info.can.measure:
        raise UsageError(f"{option} runs the program on the TPU or GPU it targets, attached to this machine: {chip.name} is "
                         "not measured (give --target with the attached chip; diff times a program on this machine)")
    tpu = family.info.name == "tpu"
    kind = f"a {family.info.name.upper()}"
    attached = family.attached()
    if tpu and attached is not None and not environment.may_use_chip():
        raise NoChip(f"{option} runs the program on the attached TPU, and JAX_PLATFORMS keeps jax off it: unset JAX_PLATFORMS "
                     "(or include tpu)")
    if attached is None:
        why = ("this machine has none" if not tpu or not environment.tpu_attached()
               else "the TPU attached here is not one the chip table knows (see `inspector doctor`)")
        estimate = "libtpu's estimate" if family.info.can.time == "simulated" else "each kernel's floor estimate"
        raise NoChip(f"{option} runs the program on {_needed(chip, tpu)} attached to this machine, and {why}: "
                     + (advice or "--time gives {estimate} without {kind}").format(estimate=estimate, kind=kind))
    return attached


def attached_for(chip: Chip) -> Chip:
    """The attached chip, when ``chip`` (the Report's target) is it; else one line why not."""
    attached = attached_to_measure(chip, "measuring")
    if chip.name.split(":")[0] != attached.name:
        raise UsageError(f"measuring runs on the attached {attached.name}: target it (--target {attached.name}, or leave "
                         f"--target out), not {chip.name}")
    return attached


def measure_on_chip(load: Callable, chip: Chip, *, debug: bool = False) -> Measurement:
    """``load()`` (a picklable callable that returns the Target) run on the attached chip."""
    attached = attached_for(chip)
    return run_isolated(_measure_child, load, attached.name, debug, env=environment.chip_env())


def _measure_child(load: Callable, chip_name: str, debug: bool) -> Measurement:
    # the environment is prepared before the rest is imported (what jax reads when it loads)
    environment.prepare(debug=debug)
    from ..base.errors import TargetFailure
    from ..base.user_code import describe_error, reraise_interrupt
    from ..base.environment import chip_failure

    target = load()
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return family_of(get_chip(chip_name)).measure(target, chip_name=chip_name)
        except RuntimeError as err:
            failure = chip_failure(err)
            if failure is None:
                raise TargetFailure(describe_error(err, target.file, f"raised while running {target.name} on the chip")) from err
            raise failure from err
        except Exception:
            raise
        except BaseException as err:  # sys.exit() in the user's code
            reraise_interrupt(err)
            raise TargetFailure(describe_error(err, target.file, f"raised while running {target.name}")) from err
