"""One Mosaic pass's diff on request (the terminal UI's Enter on a pass): the worker keeps one
compile's Mosaic dumps for the module it has, so the first diff compiles once more with the
dump flags and the next ones, of any pass or kernel of that module, are read from the files.

The folder is a ``tempdirs`` folder: removed when another module's dumps replace it, when the
process exits, or (the process killed) by the next run's sweep."""
from __future__ import annotations

import atexit
import hashlib
import os

from ..errors import UsageError
from .dumps import KernelPasses, diff_passes, reattach
from .passes import compile_with_dumps

_KEPT: dict[tuple, tuple[str, list[KernelPasses]]] = {}  # module key -> (folder, its kernels' passes)


def kept_mosaic_diff(target, chip, kernel: str, select: str, index: int = 0):
    """The diff (hlo.passes.PassDiff) of pass ``select`` (as ``--view mosaic --pass``: a name or
    index, or ``A..B``) of Mosaic kernel ``kernel``, the ``index``-th in libtpu's order (as
    MosaicPasses.kernels; two pallas_calls may share a name) of ``target`` compiled for ``chip``.
    UsageError when there is no such kernel or pass."""
    from ..backends import Backend
    from ..hlo.passes import UnknownPass, parse_range
    from ..stages import capture
    from ..tempdirs import new_folder, remove

    lowered = capture(target, Backend(chip), compile=False, jaxpr_text=False).stages.stablehlo
    key = (chip.name, hashlib.sha256(lowered.encode()).hexdigest(), os.environ.get("LIBTPU_INIT_ARGS", ""))
    kept = _KEPT.get(key)
    if kept is None or not os.path.isdir(kept[0]):
        forget_kept()
        directory = new_folder("mosaic")
        try:
            kernels = compile_with_dumps(target, chip, directory).kernels
            reattach(kernels, directory)
        except BaseException:
            remove(directory)
            raise
        if not kernels:
            remove(directory)
            raise UsageError(f"--pass {select}: Mosaic wrote no pass dumps for this target")
        kept = _KEPT[key] = (directory, kernels)
    kernels = kept[1]
    named: list[KernelPasses | None] = [k for k in kernels if k.kernel == kernel]
    chosen = kernels[index] if index < len(kernels) and kernels[index].kernel == kernel else (named or [None])[0]
    if chosen is None:
        raise UsageError(f"no Mosaic kernel {kernel!r} (kernels: {', '.join(k.kernel for k in kernels)})")
    try:
        return diff_passes(chosen, *parse_range(chosen, select, view="--view mosaic"))
    except UnknownPass as err:
        raise UsageError(str(err)) from None


@atexit.register
def forget_kept() -> None:
    from ..tempdirs import remove

    for directory, _ in _KEPT.values():
        remove(directory)
    _KEPT.clear()
