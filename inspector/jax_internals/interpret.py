"""What the diff needs from jax's TPU interpreter (jax/_src/pallas/mosaic/interpret/, pinned 0.10.2).

Three kinds of access, all here so nothing else depends on the interpreter's insides:

- the chip being simulated: kernels that ask ``pltpu.get_tpu_info()`` (``pltpu.emit_pipeline``
  does) read the device kind of the current abstract mesh; on a CPU it is "cpu" and the lookup
  raises "Unsupported TPU device kind: cpu". ``simulating(chip)`` traces under an abstract mesh of
  one device of that chip, so the kernel sees the chip it will run on (no patching);
- the interpreter's state: ``reset_state``, ``races_found``;
- the interpreter's texts: its "RACE DETECTED" dumps (race_detection_state.py), the way a kernel's
  exception comes back through the CPU callback ("Computation failed on device D, core C with
  exception: ..." in shared_memory.py), and the errors of kernels it cannot run (listed below).
  The parsers turn them into plain dataclasses.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import re
import sys
from typing import Callable, Literal

import numpy as np  # clocks_ordered runs once per pair of accesses: no import statement on that path

# ----------------------------------------------------------------------------- the chip


def abstract_mesh(chip):
    """An abstract mesh of one device of ``chip``: from libtpu's topology when libtpu is
    installed (what the compiler itself reports), else built from the chip table."""
    import jax
    from jax._src import mesh as mesh_lib

    from ..base.environment import libtpu_available
    from . import tpu_topology

    if libtpu_available():
        try:
            return tpu_topology.tpu_mesh(chip.topology).abstract_mesh
        except Exception:  # a libtpu that refuses the topology: fall back to the table
            pass
    fields = {"device_kind": chip.device_kind, "num_cores": chip.cores_per_device,
              "platform": "tpu"}  # platform: jax 0.10.1 and newer
    known = inspect.signature(mesh_lib.AbstractDevice).parameters
    device = mesh_lib.AbstractDevice(**{k: v for k, v in fields.items() if k in known})
    return jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)


_MESH_AXES: contextvars.ContextVar[tuple[tuple[str, int], ...]] = contextvars.ContextVar("inspector_mesh_axes", default=())


@contextlib.contextmanager
def mesh_axes(axes: dict[str, int] | tuple[str, ...]):
    """Run a sharded program here: a mesh of these axes (name -> size; names alone: each of size 1)
    over the first devices, so that ``shard_map`` over ``get_abstract_mesh()`` finds its axes
    (``simulating`` keeps them). ``cpu_devices`` says how many devices there are for it."""
    sizes = dict(axes) if isinstance(axes, dict) else {name: 1 for name in axes}
    if not sizes:
        yield
        return
    import math

    import jax
    import numpy as np

    token = _MESH_AXES.set(tuple(sizes.items()))
    devices = np.array(jax.devices()[:math.prod(sizes.values())]).reshape(tuple(sizes.values()))
    try:
        with jax.set_mesh(jax.sharding.Mesh(devices, tuple(sizes))):
            yield
    finally:
        _MESH_AXES.reset(token)


@contextlib.contextmanager
def entered_mesh():
    """Re-enter, in another thread, the mesh ``mesh_axes`` set up in this context (jax's mesh is
    per thread; the axes travel with contextvars.copy_context). Nothing outside one."""
    axes = _MESH_AXES.get()
    if not axes:
        yield
        return
    with mesh_axes(dict(axes)):  # the same mesh again where it is already set: harmless
        yield


def mesh_devices() -> int:
    """Devices of the mesh ``mesh_axes`` set up (1 outside one)."""
    import math

    return math.prod(s for _, s in _MESH_AXES.get())


def simulating(chip):
    """Trace under this: ``get_tpu_info()`` and friends answer for ``chip``."""
    import jax

    mesh, axes = abstract_mesh(chip), _MESH_AXES.get()
    if axes:  # the program's own axes, of their sizes here, on the simulated chip
        mesh = jax.sharding.AbstractMesh(tuple(s for _, s in axes), tuple(n for n, _ in axes),
                                         abstract_device=mesh.abstract_device)
    return jax.sharding.use_abstract_mesh(mesh)


def cpu_devices(wanted: int) -> int:
    """Devices jax has here, asking for ``wanted`` CPU devices first where jax has not started its
    backends yet (jax_num_cpu_devices is read once, when the CPU backend starts)."""
    import jax
    from jax._src import xla_bridge

    if wanted > 1 and not xla_bridge.backends_are_initialized():
        try:
            if jax.config.jax_num_cpu_devices < wanted:  # type: ignore[attr-defined]  # a config flag jax 0.10 has
                jax.config.update("jax_num_cpu_devices", wanted)
        except (AttributeError, ValueError):
            pass  # a jax without the flag, or started meanwhile: as many as there are
    return len(jax.devices())


# ----------------------------------------------------------------------------- running


OutOfBoundsReads = Literal["raise", "uninitialized"]  # what InterpretParams accepts
DmaExecutionMode = Literal["eager", "on_wait"]


# Vector-clock entries for DMAs. The interpreter gives each DMA a random "virtual core" among the
# entries past the real cores; with its default (2 x cores) a one-core chip has a single one, so two
# DMAs on the same buffer (a writeback and the next prefetch into it) always look ordered and their
# hazard is never reported. With 64, two DMAs share an entry 1 time in 64.
DMA_CLOCKS = 64


def interpret_params(*, cores: int = 1, detect_races: bool = False, seed: int | None = None,
                     out_of_bounds_reads: OutOfBoundsReads = "raise", dma_execution_mode: DmaExecutionMode = "on_wait",
                     record: bool = False, devices: int = 1):
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.InterpretParams(
        detect_races=detect_races, uninitialized_memory="nan", num_cores_or_threads=cores, random_seed=seed,
        out_of_bounds_reads=out_of_bounds_reads, dma_execution_mode=dma_execution_mode,
        grid_point_recorder=record_grid_point if record else None,
        vector_clock_size=devices * cores + DMA_CLOCKS if detect_races else None)


def forced(params):
    from jax.experimental.pallas import tpu as pltpu

    gpu_kernels_interpreted()
    faster_race_checks()
    return pltpu.force_tpu_interpret_mode(params)


def faster_race_checks() -> None:
    """The race detector compares each access's vector clock with every earlier access to the same
    buffer (race_detection_state.py), so a kernel's run spends most of its time in
    ``vector_clock.ordered``: measured, 60% of an interpreted flash attention's. ``clocks_ordered``
    gives the same answer in half the numpy calls; installed once where the module has it."""
    try:
        from jax._src.pallas.mosaic.interpret import vector_clock
    except ImportError:
        return
    if callable(getattr(vector_clock, "ordered", None)):
        vector_clock.ordered = clocks_ordered


def clocks_ordered(x, y) -> bool:
    """Whether vector clock x happened before y or y before x: jax's ``lt(x, y) | lt(y, x)``, with
    lt(x, y) = all(x <= y) and any(x < y), read off the extremes of x - y."""
    d = np.subtract(x, y)
    high, low = np.maximum.reduce(d), np.minimum.reduce(d)
    return bool((high <= 0 and low < 0) or (low >= 0 and high > 0))


_GPU_FALLBACK: list[Callable | None] = []  # the lowering installed (None: this jax cannot have it)


def gpu_kernels_interpreted() -> None:
    """Forced TPU interpret mode reaches every pallas_call, but the TPU interpreter asserts on a
    GPU kernel's compiler params (Triton's num_warps, Mosaic GPU's): jax's own GPU kernels all give
    them. On the CPU such a call is lowered by the plain interpreter (interpret=True) instead.
    Installed once, as pallas_call's CPU lowering; any other call lowers as jax would."""
    if _GPU_FALLBACK:
        return
    try:  # a jax that moved these: GPU kernels stay unsupported on the CPU, nothing else changes
        from jax._src.interpreters import mlir
        from jax._src.pallas import pallas_call as pc
        from jax._src.pallas.mosaic import core as tpu_core
        from jax._src.pallas.mosaic.interpret import params as tpu_params

        lower = pc._pallas_call_lowering
    except (ImportError, AttributeError):
        _GPU_FALLBACK.append(None)
        return

    def on_cpu(ctx, *in_nodes, interpret, **params):
        given = params.get("compiler_params")
        if isinstance(interpret, tpu_params.InterpretParams) and given is not None \
                and not isinstance(given, tpu_core.CompilerParams):
            interpret = True
        if isinstance(interpret, tpu_params.InterpretParams) and isinstance(given, tpu_core.CompilerParams):
            params["compiler_params"] = _sequential_dynamic_dims(given, params.get("grid_mapping"))
        return lower(ctx, *in_nodes, interpret=interpret, **params)

    mlir.register_lowering(pc.pallas_call_p, on_cpu, platform="cpu")
    _GPU_FALLBACK.append(on_cpu)


def _sequential_dynamic_dims(compiler_params, grid_mapping):
    """The 0.10.2 interpreter shuffles a "parallel" grid dimension and so needs its size while
    tracing: one sized at run time (a KV-cache insert's count of valid rows) is run in order
    instead ("arbitrary"), which a kernel correct under "parallel" computes the same."""
    from .index_maps import is_dynamic_dim

    semantics = getattr(compiler_params, "dimension_semantics", None)
    grid = getattr(grid_mapping, "grid", ())
    if not semantics or len(semantics) != len(grid):
        return compiler_params
    kept = tuple("arbitrary" if is_dynamic_dim(g) and "parallel" in str(d).lower() else d
                 for g, d in zip(grid, semantics))
    return dataclasses.replace(compiler_params, dimension_semantics=kept)


def reset_state() -> None:
    """The interpreter's global state is unusable after a kernel raised (params.py docstring)."""
    from jax.experimental.pallas import tpu as pltpu

    pltpu.reset_tpu_interpret_mode_state()


def races_found() -> bool:
    """The race flag of the last kernel run (the interpreter makes a new state per kernel, so the
    printed reports, see ``parse_races``, are the record for functions with several kernels)."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    races = getattr(ipc, "races", None)
    return bool(races is not None and races.races_found)


GRID_MARK = "@@inspector-grid-point"


def record_grid_point(*args):
    """InterpretParams.grid_point_recorder: the interpreter calls it (token, grid point, local core)
    before each step and threads the token on (jax 0.10.0: no token). It prints a marker into the
    captured output, so grid steps and the interpreter's race reports read back in the order they
    happened."""
    *token, grid_point, core = args
    print(f"{GRID_MARK} {int(core)} {','.join(str(int(i)) for i in grid_point)}", file=sys.stdout, flush=False)
    return token[0] if token else ()


# ----------------------------------------------------------------------------- its texts


@dataclasses.dataclass
class RaceReport:
    """One "RACE DETECTED" dump: an access and the earlier access it is unordered with."""

    access: str  # "write" or "read" (the later access)
    other: str  # the earlier access
    memory_space: str  # "hbm", "vmem", "smem", "any"
    buffer_id: int
    ranges: list[str]  # the later access's index ranges per dim, e.g. ["0:128", "0:128"]
    other_ranges: list[str]
    cores: list[int]  # [later core, earlier core] (local core ids; 0 for a DMA)
    sources: list[str]  # source lines of the two accesses ("pallas_call": the interpreter's own block copy; a DMA's: its start)
    grid_points: dict[int, list[int]]  # core -> the grid point it was at when the race was seen
    dmas: list[bool] = dataclasses.field(default_factory=lambda: [False, False])  # [later, earlier] access made by a DMA


FIRST_DMA_ID = 100  # the interpreter numbers DMAs from 100 and prints a DMA's id where a core's device id would be
_CLOCK = r"\s*clock: \[[^\]]*\]\n"  # a long vector clock wraps over several lines
_RACE = re.compile(
    r"RACE DETECTED\n\s*(write|read) of \('(\w+)', (\d+), (\d+), (\d+)\)\[(.*?)\] from (\d+), (\d+),? ?(.*?)\n"
    + _CLOCK + r"\s*(write|read) of \('\w+', \d+, \d+, \d+\)\[(.*?)\] from (\d+), (\d+),? ?(.*?)\n")
_SLICE = re.compile(r"slice\((\d+|None), (\d+|None)(?:, (?:\d+|None))?\)|(\d+)")


def slice_ranges(text: str) -> list[str]:
    out = []
    for m in _SLICE.finditer(text):
        if m[3] is not None:
            out.append(m[3])
        else:
            out.append(":" if m[1] == "None" and m[2] == "None" else f"{'' if m[1] == 'None' else m[1]}:{'' if m[2] == 'None' else m[2]}")
    return out


def parse_races(text: str) -> list[RaceReport]:
    """Race reports in the captured output, each with where every core was in the grid."""
    at: dict[int, list[int]] = {}
    reports = []
    events = sorted([(m.start(), "grid", m) for m in re.finditer(rf"{GRID_MARK} (\d+) ([\d,]*)", text)]
                    + [(m.start(), "race", m) for m in _RACE.finditer(text)], key=lambda e: e[0])
    for _, kind, m in events:
        if kind == "grid":
            at[int(m[1])] = [int(i) for i in m[2].split(",") if i]
            continue
        reports.append(RaceReport(
            access=m[1], other=m[10], memory_space=m[2], buffer_id=int(m[3]), ranges=slice_ranges(m[6]),
            other_ranges=slice_ranges(m[11]), cores=[int(m[8]), int(m[13])],
            sources=[m[9].strip() or "pallas_call", m[14].strip() or "pallas_call"], grid_points=dict(at),
            dmas=[int(m[7]) >= FIRST_DMA_ID, int(m[12]) >= FIRST_DMA_ID]))
    return reports


def grid_points_of(text: str) -> dict[int, list[int]]:
    """The last grid point each core started, from the recorder's marks."""
    at = {}
    for m in re.finditer(rf"{GRID_MARK} (\d+) ([\d,]*)", text):
        at[int(m[1])] = [int(i) for i in m[2].split(",") if i]
    return at


def without_marks(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(GRID_MARK))


@dataclasses.dataclass
class KernelException:
    type: str  # the exception's own type, e.g. "ValueError"
    message: str
    device: int | None
    core: int | None
    source: str | None  # "file.py:LINE" of the deepest frame outside jax, when the text has one


_FAILED_ON = re.compile(r"Computation failed on device (\w+), core (\w+) with exception")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)): ?(.*)$")
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_WRAPPERS = ("JaxRuntimeError", "XlaRuntimeError", "jaxlib._jax.JaxRuntimeError")


def kernel_exception(err: BaseException) -> KernelException | None:
    """The exception a kernel raised while being interpreted, from the text jax wraps it in
    ("INTERNAL: CpuCallback error calling callback: Traceback ..."); None when ``err`` is not one."""
    text = str(err)
    if "CpuCallback error" not in text and "Computation failed on device" not in text:
        return None
    failed = _FAILED_ON.search(text)
    device = int(failed[1]) if failed and failed[1].isdigit() else None
    core = int(failed[2]) if failed and failed[2].isdigit() else None
    if failed:
        text = text[failed.end():]
    found = None
    for line in text.splitlines():
        m = _EXC_LINE.match(line.strip())
        if m and m[1].split(".")[-1] not in _WRAPPERS and not m[2].startswith("Computation failed on device"):
            found = m  # the last one: the innermost cause
    if found is None:
        return None
    frames = [f for f in _FRAME.finditer(text) if "/jax/" not in f[1] and "/jaxlib/" not in f[1]
              and "/inspector/" not in f[1] and not f[1].startswith("<")]
    source = f"{frames[-1][1]}:{frames[-1][2]}" if frames else None
    return KernelException(found[1].split(".")[-1], found[2].strip(), device, core, source)


# (pattern over the error's text and traceback, the reason shown to the user): kernels libtpu
# compiles that the 0.10.2 interpreter cannot run (jax 0.10.2)
KNOWN_LIMITS = (
    (re.compile(r"unpack_elementwise"), "the interpreter has no CPU rule for unpack_elementwise"),
    (re.compile(r"'ReshapeTransform' object has no attribute 'indices'"),
     "the interpreter cannot DMA through a reshaped ref ('ReshapeTransform' object has no attribute 'indices')"),
    (re.compile(r"the run stopped: no CPU time for"),
     "on several CPU devices the interpreter stopped making progress (its devices wait on each other for ever, as "
     "jax 0.10.2's interpreter does for some collective kernels)"),
    (re.compile(r"MLIR translation rule for primitive '(?:parallel_loop|[a-z_]*subcore[a-z_]*)' not found for platform cpu"),
     "the interpreter cannot lower SparseCore kernels (no CPU rule for plsc.parallel_loop and its kin)"),
    (re.compile(r"safe_zip\(\) argument \d+ (?:is (?:shorter|longer) than argument \d+|has length \d+ but argument \d+ has length)"),
     "the interpreter cannot run a vmapped pallas_call with dimension_semantics (a safe_zip length error)"),
)


def known_limit(err: BaseException) -> str | None:
    import traceback

    text = str(err) + "".join(traceback.format_exception(err))
    for pattern, reason in KNOWN_LIMITS:
        if pattern.search(text):
            return reason
    return None


_OOB_READ = re.compile(r"Out-of-bounds read of \((\d+) (\d+) (\w+) (\d+)\): reading \[(.*?)\] but buffer has shape \(([^)]*)\)")


def zero_length_out_of_bounds(err: BaseException) -> bool:
    """The interpreter's out-of-bounds check counts a zero-length read at offset == dim size
    (a zero-length DMA at the end of a buffer), which the chip accepts."""
    m = _OOB_READ.search(str(err))
    if not m:
        return False
    return any(s == e for s, e in re.findall(r"slice\((\d+), (\d+)", m[5]))


_OOB_INPUT = re.compile(r"Out-of-bounds block index \([^)]*\) for input \"\w+\"")


def out_of_bounds_read(err: BaseException) -> bool:
    """The interpreter refused a read past a buffer's end (a ref read, a DMA's source, or an input
    block): with out_of_bounds_reads="uninitialized" the same run goes on with NaN for those values."""
    text = str(err)
    return bool(_OOB_READ.search(text) or _OOB_INPUT.search(text))


_ZERO_WAIT = re.compile(r"interpret/shared_memory\.py\", line \d+, in wait\s*\n(?:.*\n)*?\s*AssertionError")


def race_detector_zero_wait(err: BaseException) -> bool:
    """jax 0.10.2's race detector asserts when a DMA semaphore that was never signalled is waited on
    for zero bytes (a zero-length DMA, executed on wait, signals nothing first): an AssertionError in
    shared_memory.py's wait. The chip waits for nothing there; the interpreter runs it when DMAs run
    as they start (eager) or without race detection."""
    import traceback

    return bool(_ZERO_WAIT.search(str(err) + "\n" + "".join(traceback.format_exception(err))))


_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def interpreter_assertion(err: BaseException) -> str | None:
    """Where the interpreter's own code asserted ("shared_memory.py:194 in wait"), when the
    innermost frame before an AssertionError is in jax's TPU interpreter (not the kernel's own
    assert); None otherwise. jax 0.10.2 asserts on states the chip runs fine (a zero-byte wait on a
    semaphore never signalled, with race detection on)."""
    import traceback

    text = str(err) + "\n" + "".join(traceback.format_exception(err))
    for m in re.finditer(r"^\s*AssertionError\b", text, re.M):
        frames = list(_FRAME_LINE.finditer(text, 0, m.start()))
        if frames and "/pallas/mosaic/interpret/" in frames[-1][1]:
            return f"{frames[-1][1].rsplit('/', 1)[-1]}:{frames[-1][2]} in {frames[-1][3]}"
    return None
