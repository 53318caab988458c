"""Running a Pallas TPU kernel on the CPU the way a chip would: TPU interpret mode, traced for the
simulated chip (so ``get_tpu_info()`` answers for it), with as many cores sharing the grid as that
chip splits a grid over (2 on megacore v4/v5p and on TPU7x, else 1), race detection, NaN-filled
uninitialized memory, and everything the interpreter prints kept off the terminal.

A race the detector reports is confirmed before it is an error: the kernel runs again on one core
and with the "parallel" steps in another order, and a race whose outputs match the reference in
every ordering is a warning. An exception inside the kernel is reported with its own type, message
and grid point; kernels the interpreter cannot run (jax 0.10.2: unpack_elementwise, a DMA through a reshaped ref, a vmapped kernel with dimension semantics) are an info finding.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..base.chips import Chip
from ..base.findings import Finding
from ..jax_internals import interpret as ji
from ..base.user_code import describe_error, short_path
from .capture import captured_output

DETAIL_CHARS = 20_000  # of the interpreter's output kept with a finding


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    output: Any  # the kernel's outputs (a pytree), None when it raised
    error: BaseException | None
    text: str  # what the interpreter printed (grid-point marks included)


def cores_of(chip: Chip) -> int:
    """TensorCores that share one kernel's grid on ``chip`` (its "parallel" axes are split)."""
    return chip.tensor_cores or 1


def block(tree):
    import jax

    return jax.tree.map(lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x, tree)


def plain(fn, args, kwargs):
    """fn(*args, **kwargs) as jax runs it, no interpret mode: (outputs, None), or (None, the exception)."""
    try:
        return block(fn(*args, **kwargs)), None
    except Exception as err:  # noqa: BLE001 - the caller reports the function's failure
        return None, err


def run(fn, args, kwargs, chip: Chip, *, cores: int, check: bool, seed: int | None = None,
        out_of_bounds_reads: ji.OutOfBoundsReads = "raise", dma_execution_mode: ji.DmaExecutionMode = "on_wait") -> Outcome:
    """fn(*args, **kwargs) in TPU interpret mode as ``chip`` (on the devices of ji.mesh_axes' mesh), its prints captured."""
    import numpy as np

    params = ji.interpret_params(cores=cores, detect_races=check, seed=seed, out_of_bounds_reads=out_of_bounds_reads,
                                 dma_execution_mode=dma_execution_mode, record=check, devices=ji.mesh_devices())
    ji.reset_state()
    # the interpreter draws each DMA's vector-clock entry from numpy's global generator: seeded, so the
    # same diff finds the same DMA hazards every time; the caller's generator is left as it was
    rng_state = np.random.get_state()
    np.random.seed(0 if seed is None else seed)
    def go():
        with ji.entered_mesh(), ji.simulating(chip), ji.forced(params):
            return block(fn(*args, **kwargs))

    with captured_output() as printed:
        try:
            if ji.mesh_devices() > 1:  # devices that wait on each other can wait for ever: watched
                out, err = watched(go), None
            else:
                out, err = go(), None
        except Exception as e:  # noqa: BLE001 - the kernel's failure is the finding
            out, err = None, e
        finally:
            np.random.set_state(rng_state)
    if isinstance(err, Stalled):
        return Outcome(output=None, error=err, text=printed.text)  # its threads still wait: no reset, nothing more runs on them
    if err is not None:
        ji.reset_state()  # the interpreter's state is unusable after a raise
    return Outcome(output=out, error=err, text=printed.text)


STALL_S = 60.0  # seconds without CPU time that mean a multi-device run waits for ever


class Stalled(RuntimeError):
    """A run that stopped using the CPU: its devices wait on each other for ever."""


def watched(go, stall_s: float = STALL_S, poll_s: float = 5.0):
    """go() in a thread of its own, watched: it raises Stalled once the process has used no CPU
    for ``stall_s`` (jax 0.10.2's interpreter deadlocks on some collective kernels over several CPU
    devices, e.g. JAX's own all_gather: every device waits in an allocation callback). A run that
    computes, however long, uses CPU and is left alone. The stalled thread is a daemon: the CLI's
    process ends without it."""
    import contextvars
    import threading
    import time

    box: dict = {}

    def target():
        try:
            box["out"] = go()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["err"] = e

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True, name="inspector-interpret")
    thread.start()
    last_cpu, since = time.process_time(), time.monotonic()
    while thread.is_alive():
        thread.join(poll_s)
        cpu = time.process_time()
        if cpu - last_cpu > 0.05 * poll_s:
            last_cpu, since = cpu, time.monotonic()
        elif time.monotonic() - since > stall_s:
            raise Stalled(f"the run stopped: no CPU time for {stall_s:g} s, its devices waiting on each other")
    if "err" in box:
        raise box["err"]
    return box.get("out")


def detail(text: str) -> str:
    text = ji.without_marks(text).strip()
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS // 2] + "\n...\n" + text[-DETAIL_CHARS // 2:]


# ----------------------------------------------------------------------------- failures

_INTERPRETER_ERRORS = [
    (re.compile(r"Out-of-bounds block index \(([^)]*)\) for (\w+) \"(\w+)\" in iteration \(([^)]*)\)"), "interpret-out-of-bounds",
     lambda m: f"{m[3]} ({m[2]}): block index ({m[1]}) is out of bounds at grid point ({m[4]})"),
    (re.compile(r"Out-of-bounds read of \(\d+ \d+ (\w+) (\d+)\): reading \[\(?(.*?),?\)?\] but buffer has shape (\([^)]*\))"),
     "interpret-out-of-bounds", lambda m: f"reads [{', '.join(ji.slice_ranges(m[3]))}] of {m[1].upper()} buffer {m[2]} of shape {m[4]}, "
     "past its end"),
    (re.compile(r"[Rr]evisit\w* block[^\n]*"), "interpret-revisit",
     lambda m: f"the interpreter refused a non-consecutive output revisit: {m[0].strip()}"),
]


def _point(p: list[int]) -> str:
    return f"({', '.join(map(str, p))}{',' if len(p) == 1 else ''})"


def failure_finding(err: BaseException, text: str, what: str, chip: Chip, strict: bool) -> Finding:
    """The finding for a kernel that raised while being interpreted."""
    message = str(err)
    for pattern, code, describe in _INTERPRETER_ERRORS:
        m = pattern.search(message)
        if m:
            where = ""
            if "grid point" not in describe(m):  # a read inside the kernel body: where the grid was, and the line
                at = ji.grid_points_of(text)
                raised = ji.kernel_exception(err)
                where = "".join([f" at grid point {_point(p)}" + (f" on core {c}" if len(at) > 1 else "") for c, p in sorted(at.items())][:2])
                where += f" ({short_path(raised.source)})" if raised is not None and raised.source else ""
            return Finding("error", code, f"{what}: {describe(m)}{where}", view="diff", data={"detail": detail(text)})
    reason = ji.known_limit(err)
    if reason is not None:
        return Finding("error" if strict else "info", "interpret-unsupported",
                       f"{what}: cannot run in interpret mode: {reason}; the compile views still hold "
                       f"(inspector check/show --target {chip.name})", view="diff", data={"reason": reason, "detail": detail(text)})
    raised = ji.kernel_exception(err)
    if raised is not None:
        at = ji.grid_points_of(text)
        core = raised.core if raised.core in at else (next(iter(at)) if len(at) == 1 else None)
        where = (f" at grid point {_point(at[core])}" + (f" on core {core}" if len(at) > 1 or raised.core is not None else "")
                 if core is not None else
                 (" with the cores at grid points " + ", ".join(f"{c}: {_point(p)}" for c, p in sorted(at.items())) if at else ""))
        source = f" ({short_path(raised.source)})" if raised.source else ""
        return Finding("error", "kernel-raised", f"{what} raised {raised.type}: {raised.message}{where}{source}", view="diff",
                       data={"type": raised.type, "message": raised.message, "core": core,
                             "grid_point": at.get(core) if core is not None else None, "source": raised.source,
                             "detail": detail(text + "\n" + message)})
    return Finding("error", "kernel-raised", f"{what}: " + describe_error(err, None, "raised while running"), view="diff",
                   data={"detail": detail(text + "\n" + message)})


# ----------------------------------------------------------------------------- races


def _operand_of(report: ji.RaceReport, found_calls) -> tuple[str, list[int] | None]:
    """Name the buffer a race is on. HBM buffers are numbered from 100 in the order the interpreter
    allocates them (the pallas_call's inputs, then its outputs); with one kernel that names the operand."""
    space = "HBM" if report.memory_space in ("any", "hbm") else report.memory_space.upper()
    name = f"{space} buffer {report.buffer_id}"
    if space != "HBM" or len(found_calls) != 1:
        return name, None
    operands = found_calls[0].info.operands
    k = report.buffer_id - 100
    if not 0 <= k < len(operands):
        return name, None
    op = operands[k]
    if len(report.ranges) != len(op.array_shape):  # not that operand: allocation order was not as assumed
        return name, None
    blk = None
    starts = [int(r.split(":")[0] or 0) if ":" in r else int(r) for r in report.ranges]
    if len(starts) == len(op.block_shape):
        blk = [s // (b or 1) for s, b in zip(starts, op.block_shape)]
    return f"{name} ({op.operand}, {op.role} {op.position} of {found_calls[0].info.name})", blk


def describe_race(report: ji.RaceReport, found_calls) -> str:
    name, blk = _operand_of(report, found_calls)
    cores = sorted(set(report.cores))
    if all(report.dmas):
        who = "two DMAs"
    elif any(report.dmas):
        who = f"core {report.cores[report.dmas.index(False)]} and a DMA"
    else:
        who = f"cores {cores[0]} and {cores[1]}" if len(cores) == 2 else f"core {cores[0]} and a DMA"
    rng = "[" + ", ".join(report.ranges) + "]" if report.ranges else " (all of it)"
    points = ", ".join(f"core {c} at {_point(p)}" for c, p in sorted(report.grid_points.items()) if c in report.cores)
    sources = [f"{'the DMA started at ' if dma else ''}{short_path(s)}" for s, dma in zip(report.sources, report.dmas)
               if s != "pallas_call"]
    sources = list(dict.fromkeys(sources))
    via = f" at {', '.join(sources)}" if sources else " (the interpreter's copy of an output block)" if report.access == "write" else ""
    return (f"{who}: {report.access} and {report.other} of {name}{rng}" + (f", block {tuple(blk)}" if blk else "")
            + via + (f"; grid points {points}" if points else ""))
