"""`inspector doctor`: what this installation can do, found by trying it.

Versions of what the inspector stands on, one tiny deviceless compile (an XLA op and a Pallas
kernel through Mosaic) per TPU generation asked for, Graphviz for SVG export, the accelerators jax
can use here, and the compile cache. A check fails only when something the user asked for cannot
work; an optional piece that is missing is a warning.
"""
from __future__ import annotations

import platform
import shutil
import subprocess
import time
from importlib import metadata

from ..base.checkup import FAIL, INFO, OK, WARN, Check, Checkup
from ..base.chips import NO_HUGEPAGES_WARNING, Chip


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _packages() -> list[Check]:
    from ..jax_internals import TESTED_JAX

    checks = [Check("python", INFO, platform.python_version()),
              Check("jax-inspector", INFO, _version("jax-inspector") or "not installed (running from a checkout)")]
    jax = _version("jax")
    tested = ", ".join(TESTED_JAX)
    checks.append(Check("jax", FAIL, "not installed: `pip install .` in the inspector's clone (or its .ci/setup) brings it") if jax is None else
                  Check("jax", OK, f"{jax} (tested: {tested})") if jax in TESTED_JAX else
                  Check("jax", WARN, f"{jax} is untested (tested: {tested}): views work; an analysis that cannot "
                                     "follow this jax says so as a finding"))
    jaxlib = _version("jaxlib")
    checks.append(Check("jaxlib", OK if jaxlib else FAIL, jaxlib or "not installed"))
    libtpu = _version("libtpu")
    checks.append(Check("libtpu", OK, libtpu) if libtpu else
                  Check("libtpu", WARN, f"not installed: TPU targets cannot compile (pip install 'jax[tpu]=={jax}')"))
    for dist, why in (("textual", "the terminal UI"), ("rich", "every view"), ("numpy", "every analysis"),
                      ("graphviz", "SVG export")):
        found = _version(dist)
        checks.append(Check(dist, OK, found) if found else Check(dist, FAIL, f"not installed: {why} needs it"))
    return checks


# what each export needs: said by the dot check either way
_WITHOUT_DOT = ("export --html lays its graph out in the page without it (Graphviz as WebAssembly, inline), "
                "--dot and --json need nothing")


def _dot(svg_required: bool) -> Check:
    dot = shutil.which("dot")
    if dot is None:
        return Check("dot (Graphviz)", FAIL if svg_required else WARN,
                     f"not found: export --svg needs it (apt-get install graphviz / brew install graphviz); {_WITHOUT_DOT}")
    try:
        out = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=20)
        return Check("dot (Graphviz)", OK, ((out.stderr or out.stdout).strip().splitlines()[0] if out.returncode == 0
                                            else f"{dot} -V exited {out.returncode}") + "; export --svg uses it, " + _WITHOUT_DOT)
    except (OSError, subprocess.SubprocessError, IndexError) as err:
        return Check("dot (Graphviz)", FAIL if svg_required else WARN, f"{dot} does not run: {err}")


def triton_params():
    from jax.experimental.pallas import triton as plt

    return plt.CompilerParams(num_warps=4, num_stages=1)


def _compile(chip: Chip) -> Check:
    """An XLA op and a Pallas kernel, compiled for ``chip``: on one chip of its topology, or on
    every device of a slice (``tpu-v5e:4x4``), the kernel under shard_map as sharded code runs
    one (XLA cannot partition a Mosaic kernel itself), each device taking 8 rows."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.sharding import PartitionSpec as P

    from ..compilation.backends import Backend

    def add_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def kernel(x):
        # Pallas picks its backend by the compiler parameters' type: Triton's where the path names it
        params = triton_params() if backend.path.pallas_backend == "triton" else None
        return pl.pallas_call(add_one, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), compiler_params=params)(x)

    def program(x, w):
        y = x @ w
        if backend.mesh_axes:
            return jax.shard_map(kernel, in_specs=P("devices"), out_specs=P("devices"), check_vma=False)(y)
        return kernel(y)

    name = f"compile {chip.name}"
    start = time.perf_counter()
    try:
        backend = Backend(chip)
        rows = 8 * chip.devices if backend.mesh_axes else 128
        with backend.context():
            x, w = backend.place((jax.ShapeDtypeStruct((rows, 128), jnp.float32), jax.ShapeDtypeStruct((128, 128), jnp.float32)),
                                 (P("devices") if backend.mesh_axes else None, None))
            jax.jit(program).lower(x, w).compile()
        kind = backend.device_kind
    except Exception as err:  # a compile that fails is what this check reports
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return Check(name, FAIL, f"{type(err).__name__}: {first[:200]}")
    seconds = time.perf_counter() - start
    where = f"{chip.devices} devices of a {kind!r} slice" if backend.mesh_axes else f"a {kind!r}"
    pallas = f"Pallas-{backend.path.pallas_backend.title()}" if backend.path.pallas_backend else "Mosaic (Pallas)"
    return Check(name, OK, f"XLA and {pallas} compile deviceless for {where} in {seconds:.1f} s")


def _accelerators() -> Check:
    import jax

    import inspector.base.environment as environment
    from ..compilation.backends import attached_chip

    if environment.tpu_attached():
        chip = attached_chip()
        which = (f"a {chip.name} ({chip.device_kind}) is attached" if chip is not None
                 else "a TPU is attached, of a kind neither the PCI bus nor TPU_ACCELERATOR_TYPE names (give --target)")
        use = ("it is the default target, compiled deviceless (the chip stays free); diff and --measure run on it"
               if environment.may_use_chip() else "JAX_PLATFORMS keeps diff and --measure off it")
        return Check("accelerators", INFO, f"{which}: {use}")
    seen = sorted({d.platform for d in jax.devices()})
    local = [p for p in seen if p != "cpu"]
    if local:
        return Check("accelerators", INFO, f"jax runs on {', '.join(local)} here")
    return Check("accelerators", INFO, "none that jax uses here (TPU targets compile deviceless; diff runs Pallas TPU "
                 "kernels in interpret mode on the CPU)")


HUGEPAGES = "/sys/kernel/mm/transparent_hugepage/enabled"


def _hugepages() -> Check | None:
    """jax's start-up warning on a TPU VM of v5e or newer without transparent hugepages, said here
    once (every other command silences it: base/environment.py); None off such a VM."""
    import inspector.base.environment as environment
    from ..compilation.backends import attached_chip

    chip = attached_chip() if environment.tpu_attached() else None
    if chip is None or chip.name in NO_HUGEPAGES_WARNING:
        return None
    try:
        enabled = "[always]" in open(HUGEPAGES).read()
    except OSError:
        enabled = False
    if enabled:
        return Check("hugepages", OK, "transparent hugepages are enabled (the TPU runtime starts and stops faster)")
    return Check("hugepages", WARN, f"{environment.HUGEPAGES_WARNING}: the TPU runtime starts and stops slower on this "
                                    f"{chip.name}; {environment.HUGEPAGES_FIX} (jax's warning about it is silenced "
                                    "in every other command)")


def _default_target() -> Check:
    """What every verb compiles for without --target here, and by which step of the one rule."""
    from ..base.errors import UsageError
    from ..compilation.default_target import RULE, default_target

    try:
        chip, why = default_target("show")
    except UsageError as err:  # a project default that names no chip
        return Check("default target", FAIL, f"{err}; the rule: {RULE}")
    return Check("default target", INFO, f"without --target, every verb compiles for {chip} here ({why}); in a "
                                         f"terminal and in a pipe alike. The rule: {RULE}")


def _cache() -> Check:
    import inspector.compilation.compile_cache as compile_cache
    from ..base.units import fmt_bytes

    try:
        found = compile_cache.info()
    except OSError as err:
        return Check("compile cache", WARN, f"{compile_cache.cache_dir()}: cannot read it ({err})")
    state = "" if compile_cache.enabled() else "; off (INSPECTOR_NO_CACHE or --xla_dump_to in XLA_FLAGS)"
    if found.problem:  # every run compiles again, silently: say so (a warning: nothing else breaks)
        return Check("compile cache", WARN, found.problem + state)
    where = found.path if found.exists else f"{found.path} (not created yet)"
    return Check("compile cache", INFO, f"{where}: {found.entries} entries, {fmt_bytes(found.bytes)}{state}")


def checkup(targets: list[Chip], svg_required: bool = False) -> Checkup:
    """Every check; ``targets``: the TPU chips to compile for (each one a check that must pass)."""
    checks = _packages()
    if not any(c.state == FAIL and c.name in ("jax", "jaxlib") for c in checks):
        has_libtpu = _version("libtpu") is not None
        for chip in targets:
            checks.append(_compile(chip) if has_libtpu else
                          Check(f"compile {chip.name}", FAIL, "libtpu is not installed (see above)"))
        checks.append(_accelerators())
        checks += [c for c in (_hugepages(),) if c is not None]
    checks += [_default_target(), _dot(svg_required), _cache()]
    return Checkup(checks)
