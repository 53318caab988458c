"""Compile a target for a TPU with Mosaic's pass dumps, and keep what they say per kernel.

libtpu reads ``LIBTPU_INIT_ARGS`` once, when its backend starts, so the dump flags only take in a
fresh process: the compile runs in a child (``base.child_process.run_isolated``) started with them, the child
reads the dumps (``dumps.read_kernel_dumps``, and the one diff asked for while the files exist)
and sends plain data back. The dumps go to a temporary folder the parent makes and removes on
every path (the child may be killed); a flash attention kernel's are 7 MB. Everything that
could not be done (the child died, no dumps, a format this reader does not follow) comes back
as an info finding, never an exception or a guessed figure.
"""
from __future__ import annotations

import dataclasses
import os

from ..base.findings import Finding
from ..base.child_process import ChildFailed, run_isolated
from ..base.tempdirs import new_folder, remove

DUMP_FLAGS = ("--xla_mosaic_dump_to={dir}", "--xla_mosaic_enable_dump_debug_info=true")


@dataclasses.dataclass(kw_only=True)
class MosaicPasses:
    """What Mosaic did to each kernel of a target on one chip."""

    chip: str
    kernels: list  # dumps.KernelPasses, in the order libtpu compiled them
    findings: list[Finding]  # info: what could not be made or read
    compile_error: str | None = None  # the compile's headline, when it failed (the dumps up to there still show)
    flags: str = ""  # the LIBTPU_INIT_ARGS the child compiled with (the folder named as DIR)

    def kernel(self, name: str | None = None):
        """The kernel named ``name`` (the pallas_call's or the module function's name), else the first."""
        if name is None:
            return self.kernels[0] if self.kernels else None
        return next((k for k in self.kernels if k.kernel == name or k.kernel.startswith(name)), None)

    def to_json(self) -> dict:
        """``mosaic_passes[]`` (name, changed, ops, delta, ...) and ``relayouts[]`` (source, count,
        from, to, shape) of the first kernel, and every kernel under ``mosaic_kernels``."""
        kernels = [_kernel_json(k) for k in self.kernels]
        first = kernels[0] if kernels else {"mosaic_passes": [], "relayouts": []}
        return {"mosaic_passes": first["mosaic_passes"], "relayouts": first["relayouts"], "mosaic_kernels": kernels,
                "mosaic_chip": self.chip, "mosaic_compile_error": self.compile_error,
                "mosaic_findings": [dataclasses.asdict(f) for f in self.findings]}


def _kernel_json(k) -> dict:
    return {"kernel": k.kernel, "source": k.source, "dump_id": k.dump_id, "files": k.files, "dump_bytes": k.dump_bytes,
            "mosaic_passes": [dataclasses.asdict(p) for p in k.passes],
            "relayouts": [r.as_json() for r in k.relayouts] if k.relayouts is not None else None,
            "relayout_count": k.relayout_count,
            "layouts": [dataclasses.asdict(v) for v in k.layouts] if k.layouts is not None else None,
            "pass_diff": dataclasses.asdict(k.diff) if k.diff is not None else None, "notes": list(k.notes)}


@dataclasses.dataclass(frozen=True)
class _Recipe:
    """What the child needs to load the same target: a spec it can import, the inputs as objects."""

    spec: str
    args: tuple
    kwargs: dict
    params: dict
    mesh: dict | None
    shardings: object


def _unread(chip: str, why: str) -> Finding:
    return Finding("info", "mosaic-passes-unread", f"{chip}: Mosaic passes: {why}", view="mosaic",
                   data={"chip": chip, "why": why})


def capture_mosaic_passes(target, chip, *, select: str | None = None, kernel: str | None = None) -> MosaicPasses:
    """Compile ``target`` for ``chip`` (a TPU) in a fresh process with Mosaic's pass dumps and
    return, per kernel, its passes (ops by kind before and after, what changed), the layout of
    each vector value, the relayouts per source line, and (``select``: a pass name or index, or
    ``A..B``, as ``--pass`` for the XLA passes) the diff of that pass of ``kernel`` (default: the
    first). A bad ``select`` raises UsageError; everything else that goes wrong is a finding."""
    if chip.topology is None:  # no libtpu topology: not a TPU
        return MosaicPasses(chip=chip.name, kernels=[], findings=[_unread(chip.name, f"{chip.name} is not a TPU: Mosaic compiles TPU kernels")])
    directory = new_folder("mosaic")  # owned by this process: swept once it is gone, even if killed
    try:
        return compile_with_dumps(target, chip, directory, select=select, kernel=kernel)
    except ChildFailed as err:  # killed, or libtpu ended the process (an abort is this chip's finding)
        return MosaicPasses(chip=chip.name, kernels=[], findings=[_unread(chip.name, str(err))], flags=dump_flags("DIR"))
    finally:
        remove(directory)


def dump_flags(directory: str) -> str:
    return " ".join(f.format(dir=directory) for f in DUMP_FLAGS)


def compile_with_dumps(target, chip, directory: str, *, select: str | None = None,
                       kernel: str | None = None) -> MosaicPasses:
    """Compile ``target`` for ``chip`` in a fresh child process that writes Mosaic's dumps into
    ``directory`` (the caller's to remove) and reads them; ChildFailed when the child dies."""
    recipe = _Recipe(target.spec, tuple(target.args), dict(target.kwargs), dict(target.params), target.mesh,
                     target.shardings if isinstance(target.shardings, (str, type(None))) else None)
    flags = dump_flags(directory)
    env = {"LIBTPU_INIT_ARGS": (os.environ.get("LIBTPU_INIT_ARGS", "") + " " + flags).strip()}
    result = run_isolated(_in_child, recipe, chip.name, directory, select, kernel, env=env)
    result.flags = flags.replace(directory, "DIR")
    return result


def _in_child(recipe: _Recipe, chip_name: str, directory: str, select: str | None, kernel: str | None) -> MosaicPasses:
    """In the child: load the target, compile it (no cache: a hit writes no dumps), read the dumps.
    The environment is prepared before the rest is imported (what jax reads when it loads)."""
    import inspector.base.environment as environment

    environment.prepare()
    import dataclasses as dc

    from ..compilation.backends import Backend
    from ..base.chips import get_chip
    from ..base.errors import UsageError
    from ..hlo.passes import UnknownPass, parse_range
    from ..compilation.stages import capture
    from ..compilation.target import load_target
    from .dumps import diff_passes, read_kernel_dumps

    chip = get_chip(chip_name)
    try:
        target = load_target(recipe.spec, inputs=(recipe.args, recipe.kwargs), params=recipe.params)
    except UsageError as err:
        return MosaicPasses(chip=chip_name, kernels=[], findings=[_unread(chip_name, f"the compile process cannot load {recipe.spec}: {err}")])
    target = dc.replace(target, mesh=recipe.mesh, shardings=recipe.shardings if recipe.shardings is not None
                        else target.shardings)
    from .explain import explain_capture

    stages = explain_capture(capture(target, Backend(chip), compile=True, jaxpr_text=False, use_cache=False, memo=False),
                             chip).stages
    kernels, notes = read_kernel_dumps(directory)
    findings = [_unread(chip_name, n) for n in notes]
    sources = {k.name: k.source for k in stages.mosaic}
    for k in kernels:
        k.source = sources.get(k.kernel)
        findings += [_unread(chip_name, f"{k.kernel}: {n}") for n in k.notes]
    if select is not None:
        chosen = next((k for k in kernels if kernel is None or k.kernel == kernel), None)
        if chosen is None:
            names = ", ".join(k.kernel for k in kernels) or "none"
            raise UsageError(f"--pass {select}: no Mosaic kernel {kernel!r} (kernels: {names})" if kernel else
                             f"--pass {select}: Mosaic wrote no pass dumps for this target")
        try:
            chosen.diff = diff_passes(chosen, *parse_range(chosen, select, view="--view mosaic"))
        except UnknownPass as err:
            raise UsageError(str(err)) from None
    for k in kernels:
        k.release()  # the folder goes with the child's answer
    error = stages.compile_error.headline if stages.compile_error is not None else None
    if stages.compile_error is not None:  # `--view mosaic` compiles nothing else: the failure is its error finding
        findings.append(stages.compile_error.finding(stages.backend, view="mosaic"))
    return MosaicPasses(chip=chip_name, kernels=kernels, findings=findings, compile_error=error)
