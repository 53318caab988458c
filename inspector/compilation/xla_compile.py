"""One XLA compile of a lowered module, as plain data (the optimized HLO, XLA's cost and memory
analyses, the compiler's error text): from the disk cache where it has the module, else compiled
and stored; with XLA's pass-by-pass dumps or the buffer assignment where asked; under the options
that only change machine code, which the inspector never runs."""
from __future__ import annotations

import contextlib
import time

import inspector.compilation.compile_cache as compile_cache
from .backends import Backend
from ..hlo.buffers import read_dump
from ..jax_internals.mosaic import compile_error_text
from ..base.tempdirs import temp_folder


def memory_dict(stats) -> dict | None:
    """XLA's compiled.memory_analysis() as plain data."""
    if stats is None:
        return None
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
             "temp_size_in_bytes", "generated_code_size_in_bytes")
    return {n: int(getattr(stats, n)) for n in names if hasattr(stats, n)}


def cost_dict(cost) -> dict | None:
    """XLA's compiled.cost_analysis() as plain data."""
    if isinstance(cost, (list, tuple)):  # older jax: a one-element list
        cost = cost[0] if cost else None
    return {k: float(v) for k, v in cost.items()} if cost else None


def dump_options(directory: str, metadata: bool = True) -> dict[str, str | bool]:
    """XLA options (for this one compile) that write the module after every pass to ``directory``.
    Given per compile, they work in-process for the CPU and libtpu alike: XLA_FLAGS is read once,
    when the backend starts, but compile options override its debug options for one compile.
    ``metadata=False`` leaves each instruction's ``metadata={op_name=... stack_frame_id=...}``
    (and the source tables) out of the dumps: a third less for XLA to print and for us to read,
    for a compile whose dumps are counted (the pass list, the pass that made each kernel) but not
    shown. Only the dumps change: the compiled module and its text are the same."""
    return {"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*",
            **({} if metadata else {"xla_dump_disable_metadata": True})}


def compile_lowered(lowered, backend: Backend, use_cache: bool | str, buffers: bool = False,
             dump_to: str | None = None, dump_metadata: bool = True, module_text: str = "") -> tuple[dict, bool]:
    """XLA's result for ``lowered``; from the disk cache when it has this module with its source
    locations (use_cache=compile_cache.REFRESH: compile anyway and store). Failures are not stored.
    ``buffers``: also the compiler's buffer assignment, from a dump written to a temporary folder
    in this compile (an entry stored without it is a miss). With ``dump_to`` (pass dumps) the
    cache is neither read (a hit would write no dump) nor written: the dump options leave the
    compiled module as it is, but only plain compiles are stored."""
    if dump_to:
        use_cache = False
    key = compile_cache.key(module_text or lowered.as_text(debug_info=True), backend.chip.name) if use_cache else None
    kernel_dumps = backend.path.keeps_kernel_dumps  # XLA:GPU: each kernel's launch and PTX, read from its dumps
    if key and use_cache != compile_cache.REFRESH and (hit := compile_cache.load(key)) and (
            not buffers or hit.get("buffers")) and (not kernel_dumps or "kernel_dumps" in hit):
        return hit, True
    with dump_folder((buffers or kernel_dumps) and not dump_to) as dump:
        folder = dump_to or dump
        options = {**(dump_options(dump_to, dump_metadata) if dump_to else {}),
                   **(buffer_dump_options(folder) if buffers or kernel_dumps else {}),
                   **machine_code_options(backend)}
        try:
            start = time.perf_counter()
            compiled = lowered.compile(options) if options else lowered.compile()
            # what the compiler itself took (kept in the cache: a later run that reads it knows it too)
            result = {"hlo": compiled.as_text(), "cost": cost_dict(compiled.cost_analysis()),
                      "memory": memory_dict(compiled.memory_analysis()), "error": None,
                      "seconds": round(time.perf_counter() - start, 3)}
        except Exception as err:  # XLA raises JaxRuntimeError / XlaRuntimeError / ValueError
            result = {"hlo": None, "cost": None, "memory": None, "error": compile_error_text(err)}
        if kernel_dumps and folder:
            from ..families.gpu.jax.compile_dumps import read_dumps
            result["kernel_dumps"] = read_dumps(folder)
        if buffers:  # written even when the compile ran out of HBM: the largest buffers name why
            result["buffers"] = read_dump(folder)
    if result["error"] is not None:
        return result, False
    if key:
        compile_cache.store(key, result)
    return result, False


@contextlib.contextmanager
def dump_folder(wanted: bool):
    """A temporary folder for the compile's dumps (removed after), or None where none is wanted."""
    if not wanted:
        yield None
        return
    with temp_folder("dump") as folder:
        yield folder


def machine_code_options(backend: Backend) -> dict:
    """Compile options that only change the machine code, which the inspector never runs: on the
    CPU, LLVM without optimization (``xla_backend_optimization_level=0``). XLA's HLO passes,
    buffer assignment and cost analysis run before LLVM and do not read that level, so the
    optimized HLO text, the cost and the memory analysis are the same byte for byte
    (tests/test_bad_inputs_edge_cases.py compares them on the samples) while the compile of a large program
    takes about half the CPU time (BENCHMARKS.md, "Wall time of show --view hlo"). TPU and GPU
    compiles are left as they are: their backend passes make what the TPU views read."""
    return backend.path.compile_options()


def buffer_dump_options(folder: str) -> dict:
    """Compile options (DebugOptions for this compile only): the optimized module, its buffer
    assignment and live ranges as text; no per-pass dumps."""
    return {"xla_dump_to": folder, "xla_dump_hlo_as_text": True}
