"""The compiler's shared-memory verdict on a deviceless XLA:GPU compile, per Pallas kernel: the
shared memory each kernel's launch asks for (the thunk sequence), its registers and spills (ptxas
on its PTX), or the compiler's refusal. The compile is the answer: where it compiled, an estimate
over the limit becomes a warning that says so; where it refused, the refusal is an error at the
kernel's source line, with the compiler's words and what to change. The shared-memory estimate
(pallas/gpu_smem.py) is a range, shown beside: where the compile decides, the estimate's
"undecided" gives way to it."""
from __future__ import annotations

import dataclasses
import functools

from ...base.families import CheckVerdict
from ...base.findings import Finding
from ...compilation.stage_records import Stages
from .compile.errors import shared_memory_refusal
from .foreign import HOPPER_ONLY
from .kernels.launches import KernelLaunch, kernel_launches
from .kernels.mosaic_gpu import mosaic_launches
from ...base.chips import Chip, get_chip
from .kernels.occupancy import Occupancy, with_occupancy
from .kernels.ptxas import ptxas_path

STAGES = "fewer num_stages (each keeps a copy of the loop's input tiles)"
# the params that set Triton's num_stages and num_warps (stages, num_stages, warps): said as those, not as blocks
_NOT_BLOCKS = ("stage", "warp")


def fix_advice(params: dict | None) -> str:
    """What to change where XLA:GPU refused a kernel for shared memory, in the kernel's own words:
    its block parameters (the target's int params, INSPECT's and --set's: bm; block_q, block_k),
    else its blocks and loop tiles."""
    names = [name for name, value in (params or {}).items() if type(value) is int
             and not any(word in name.lower() for word in _NOT_BLOCKS)]
    return f"{STAGES}, or smaller blocks ({', '.join(names) if names else 'its BlockSpecs and loop tiles'})"
# Mosaic GPU's pipeline keeps every BlockSpec's block in shared memory, one copy per step in flight
MOSAIC_FIX = "fewer max_concurrent_steps (each keeps one more copy of the BlockSpecs' blocks), or smaller blocks"


@dataclasses.dataclass(frozen=True)
class GpuKernel:
    """One kernel of the compile, as the compiler launched it (JSON-ready)."""

    name: str
    grid: tuple[int, ...] | None
    threads: tuple[int, ...] | None
    shared_memory_bytes: int | None  # the launch's dynamic shared memory (Triton's buffers)
    registers: int | None = None  # per thread, ptxas; None without ptxas
    spill_bytes: int | None = None  # spill stores + loads per thread, ptxas
    ptxas_error: str | None = None
    static_shared_memory_bytes: int | None = None  # ptxas: the kernel's static shared memory (XLA's reductions)
    occupancy: Occupancy | None = None  # blocks per SM and waves on the chip (kernels/occupancy.py)


@functools.lru_cache(maxsize=32)
def _launches(thunks: str, ptx: tuple[tuple[str, str], ...]) -> tuple[KernelLaunch, ...]:
    return tuple(kernel_launches(thunks, dict(ptx), ptxas_path()))


def gpu_kernels(stages: Stages) -> list[GpuKernel]:
    """Every kernel the compile launches, with ptxas's figures where ptxas is installed; a Mosaic
    GPU kernel's launch from its module (no PTX before it runs: no registers)."""
    mosaic = [GpuKernel(name=t.name, grid=t.grid, threads=t.threads, shared_memory_bytes=t.shared_memory_bytes)
              for t in mosaic_launches(stages.stablehlo)] if stages.hlo is not None else []
    dumps = stages.kernel_dumps or {}
    ptx = tuple(sorted((n, t) for n, t in dumps.items() if n.endswith(".ptx")))
    return [GpuKernel(name=k.name, grid=k.launch.grid, threads=k.launch.threads,
                      shared_memory_bytes=k.launch.shared_memory_bytes,
                      registers=k.ptxas.registers if k.ptxas else None,
                      spill_bytes=k.ptxas.spill_store_bytes + k.ptxas.spill_load_bytes if k.ptxas else None,
                      static_shared_memory_bytes=k.ptxas.static_shared_bytes if k.ptxas else None,
                      ptxas_error=k.ptxas_error)
            for k in _launches(dumps.get("thunk_sequence.txt", ""), ptx)] + mosaic


def _of_call(name: str, kernel: str) -> bool:
    """A Pallas call's kernel is launched under its kernel function's name (XLA may add a suffix)."""
    return kernel == name or kernel.startswith(name + "_") or kernel.startswith(name + ".")


def compiler_shared_memory(stages: Stages, calls: list[str]) -> dict[str, int]:
    """Per pallas_call name, the compiler's shared-memory figure: its launch's, or what it asked
    for when the compile refused it (the refusal names no kernel: every call of the program)."""
    refusal = shared_memory_refusal(stages.compile_error.message) if stages.compile_error is not None else None
    if refusal is not None:
        return {name: refusal.requested_bytes for name in calls}
    found: dict[str, int] = {}
    for kernel in gpu_kernels(stages):
        for name in calls:
            if _of_call(name, kernel.name) and kernel.shared_memory_bytes is not None:
                found[name] = max(found.get(name, 0), kernel.shared_memory_bytes)
    return found


def _words(message: str) -> str:
    """The compiler's sentence without jax's prefix and XLA's empty context."""
    return message.split("RESOURCE_EXHAUSTED: ")[-1].removesuffix(", context: []")


def compiler_verdict(findings: list[Finding], stages: Stages, chip: str, kernels,
                     params: dict | None = None) -> tuple[list[Finding], bool | None, int | None]:
    """``findings`` with the compiler's verdict on ``chip`` in place of the estimate's, whether it
    fits (None: no compile) and the compiler's largest figure. ``kernels``: the PallasReports;
    ``params``: the target's static params (a refusal's advice names the block ones)."""
    if stages.hlo is None and stages.compile_error is None:
        return findings, None, None
    figures = compiler_shared_memory(stages, [k.call.name for k in kernels])
    most = max(figures.values(), default=None)
    refusal = shared_memory_refusal(stages.compile_error.message) if stages.compile_error is not None else None
    if stages.compile_error is not None and refusal is None:
        if stages.compile_error.status == HOPPER_ONLY:  # no budget to decide on a GPU it cannot run on
            findings = [f for f in findings if not (f.code == "shared-memory-undecided" and (f.data or {}).get("chip") == chip)]
        return findings, False, most
    if refusal is not None and refusal.compiler == "Mosaic GPU":  # it checked against 227 KiB, whatever the target
        refusal = dataclasses.replace(refusal, available_bytes=get_chip(chip).shared_mem_per_block or refusal.available_bytes)
    kept = []
    for f in findings:
        on_chip = f.data is not None and f.data.get("chip") == chip
        over = f.code == "shared-memory-over-limit" and on_chip
        if f.code == "shared-memory-undecided" and on_chip:
            continue  # the compile decided it
        if refusal is not None and (over or (f.code == "compile-error" and on_chip)):
            continue  # said once below, in the compiler's words
        if over and refusal is None:
            assert f.data is not None
            used = figures.get(f.kernel or "", most)
            f = Finding("warning", "shared-memory-estimate-over-compiler",
                        f"{f.kernel} on {chip}: the estimate's lower bound ({f.data['certain_bytes'] / 1024:.0f} KiB) is "
                        "over the limit, but XLA:GPU compiled it"
                        + (f" with {used / 1024:.0f} KiB of shared memory" if used is not None else "") + ": the estimate "
                        "is wrong here (please report it)", kernel=f.kernel, view="pallas",
                        data={**{k: f.data[k] for k in ("chip", "bytes", "limit")}, "compiler_bytes": used})
        kept.append(f)
    if refusal is not None:
        fix = MOSAIC_FIX if refusal.compiler == "Mosaic GPU" else fix_advice(params)
        for k in kernels or [None]:
            name, source = (k.call.name, k.call.source) if k is not None else (None, None)
            kept.append(Finding("error", "compile-shared-memory-oom",
                                f"{chip}: {name or 'a kernel'}" + (f" at {source}" if source else "")
                                + f": {_words(refusal.message)} "
                                f"(over by {refusal.exceeded_by_bytes / 1024:.0f} KiB); change: {fix}",
                                kernel=name, view="pallas",
                                data={"chip": chip, "kernel": name, "source": source, "bytes": refusal.requested_bytes,
                                      "limit": refusal.available_bytes, "fix": fix}))
    return kept, refusal is None, most


def settle_report(kernels: list, findings: list[Finding], stages: Stages, chip: str,
                  params: dict | None = None) -> tuple[list, list[Finding]]:
    """A Report's Pallas kernels and findings with the compiler's verdict on ``chip`` in each
    kernel's findings (the Pallas view shows those), and the compile's own error dropped where a
    kernel's finding says it in the compiler's words; ``params``: the target's static params."""
    settled = [dataclasses.replace(k, findings=compiler_verdict(k.findings, stages, chip, [k], params)[0]) for k in kernels]
    old = {id(f) for k in kernels for f in k.findings}
    refused = bool(kernels) and stages.compile_error is not None and shared_memory_refusal(stages.compile_error.message) is not None
    rest = [f for f in findings if id(f) not in old and not (refused and f.code == "compile-error")]
    return settled, rest + [f for k in settled for f in k.findings]


def calls_kernels(stages, calls: list[str]) -> list:
    """The kernels the compile launched for ``calls`` (pallas_call names)."""
    return [k for k in gpu_kernels(stages) if any(_of_call(name, k.name) for name in calls)]


def calls_occupancy(stages, chip: Chip, calls: list[str]) -> Occupancy | None:
    """The least occupancy of the kernels the compile launched for ``calls``: the one with the
    fewest CTAs per SM; None where none launched (or the compile refused)."""
    found = [k.occupancy for k in with_occupancy(calls_kernels(stages, calls), chip) if k.occupancy is not None]
    return min(found, key=lambda o: o.ctas_per_sm, default=None)


def check_verdict(findings: list[Finding], stages: Stages, chip: Chip, reports: list,
                  params: dict | None = None) -> CheckVerdict:
    """XLA:GPU's verdict for check's row (fits or not, its shared-memory figure, the Pallas kernels'
    least occupancy, registers and spills), the findings with it (``params``: the target's, whose
    block params a refusal's advice names)."""
    findings, fits, most = compiler_verdict(findings, stages, chip.name, reports, params)
    names = [r.call.name for r in reports]
    least = calls_occupancy(stages, chip, names) if fits else None
    ours = calls_kernels(stages, names) if stages.hlo is not None else []
    err = stages.compile_error
    if err is not None and not any(f.code == "compile-shared-memory-oom" for f in findings):
        findings = findings + [err.finding(stages.backend, view="pallas")]  # a failure other than shared memory: said
    return CheckVerdict(findings, fits, most, err.headline if err is not None else None,
                        ctas_per_sm=least.ctas_per_sm if least else None, occupancy_limit=least.limit if least else None,
                        registers=max((k.registers for k in ours if k.registers is not None), default=None),
                        spill_bytes=max((k.spill_bytes for k in ours if k.spill_bytes is not None), default=None))
