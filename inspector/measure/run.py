"""Measure a target on the attached TPU from any of the inspector's processes: the checks that
come before (is there a chip, is it the target's), then the run in a process of its own that opens
the chip (``environment.chip_env``) and closes it when done."""
from __future__ import annotations

import contextlib
import sys
from typing import Callable

import inspector.base.environment as environment

from ..compilation.backends import attached_chip
from ..base.chips import Chip
from ..base.errors import UsageError
from ..base.child_process import run_isolated
from ..base.errors import NoChip
from .model import Measurement


def attached_for(chip: Chip) -> Chip:
    """The attached TPU, when ``chip`` (the Report's target) is it; else one line why not."""
    attached = attached_chip() if environment.may_use_chip() else None
    if attached is None:
        why = ("this machine has no TPU" if not environment.tpu_attached()
               else "JAX_PLATFORMS keeps jax off the TPU here" if not environment.may_use_chip()
               else "the TPU attached here is not one the chip table knows (see `inspector doctor`)")
        raise NoChip(f"measuring runs the program on a TPU attached to this machine, and {why}: --time gives libtpu's "
                     "estimate without a TPU")
    if chip.name.split(":")[0] != attached.name:
        raise UsageError(f"measuring runs on the attached {attached.name}: target it (--target {attached.name}, or leave "
                         f"--target out), not {chip.name}")
    return attached


def measure_on_chip(load: Callable, chip: Chip, *, debug: bool = False) -> Measurement:
    """``load()`` (a picklable callable that returns the Target) run on the attached TPU."""
    attached = attached_for(chip)
    return run_isolated(_measure_child, load, attached.name, debug, env=environment.chip_env())


def _measure_child(load: Callable, chip_name: str, debug: bool) -> Measurement:
    # the environment is prepared before the rest is imported (what jax reads when it loads)
    environment.prepare(debug=debug)
    from ..base.errors import TargetFailure
    from ..base.user_code import describe_error, reraise_interrupt
    from ..base.environment import chip_failure
    from .on_chip import measure_target

    target = load()
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return measure_target(target, chip_name=chip_name)
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
