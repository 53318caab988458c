"""One Mosaic pass's diff on request (the terminal UI's Enter on a pass): the worker keeps one
compile's Mosaic dumps for the module it has, so the first diff compiles once more with the
dump flags and the next ones, of any pass or kernel of that module, are read from the files.

The folder is a ``tempdirs`` folder: removed when another module's dumps replace it, when the
process exits, or (the process killed) by the next run's sweep."""
from __future__ import annotations

import hashlib
import os

from ..compilation.backends import Backend
from ..base.errors import UsageError
from ..hlo.passes import UnknownPass, parse_range
from ..base.tempdirs import KeptFolder
from .dumps import KernelPasses, diff_passes, reattach
from .passes import compile_with_dumps

_KEPT = KeptFolder("mosaic")  # the folder of one module's dumps, and its kernels' passes


def kept_mosaic_diff(target, chip, kernel: str, select: str, index: int = 0):
    """The diff (hlo.passes.PassDiff) of pass ``select`` (as ``--view mosaic --pass``: a name or
    index, or ``A..B``) of Mosaic kernel ``kernel``, the ``index``-th in libtpu's order (as
    MosaicPasses.kernels; two pallas_calls may share a name) of ``target`` compiled for ``chip``.
    UsageError when there is no such kernel or pass."""
    from ..compilation.stages import capture  # (numpy, jax: only when a kernel is compiled)

    def fill(directory: str) -> list[KernelPasses]:
        kernels = compile_with_dumps(target, chip, directory).kernels
        reattach(kernels, directory)
        if not kernels:
            raise UsageError(f"--pass {select}: Mosaic wrote no pass dumps for this target")
        return kernels

    lowered = capture(target, Backend(chip), compile=False, jaxpr_text=False).stages.stablehlo
    key = (chip.name, hashlib.sha256(lowered.encode()).hexdigest(), os.environ.get("LIBTPU_INIT_ARGS", ""))
    kernels = _KEPT.get(key, fill)
    named: list[KernelPasses | None] = [k for k in kernels if k.kernel == kernel]
    chosen = kernels[index] if index < len(kernels) and kernels[index].kernel == kernel else (named or [None])[0]
    if chosen is None:
        raise UsageError(f"no Mosaic kernel {kernel!r} (kernels: {', '.join(k.kernel for k in kernels)})")
    try:
        return diff_passes(chosen, *parse_range(chosen, select, view="--view mosaic"))
    except UnknownPass as err:
        raise UsageError(str(err)) from None
