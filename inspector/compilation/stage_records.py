"""The records of a capture: the Stages (plain data: texts, counts, XLA's analyses, a compile error;
cached on disk, sent between processes), the Program (jax objects that stay in the process that
traced them) and the Capture that holds both. Below every module that makes or reads them."""
from __future__ import annotations

import collections
import dataclasses
import functools

from .block_guard import BadBlockIndex
from .compile_errors import CompileError
from ..hlo.text import count_hlo_ops, count_mlir_ops
from ..base.pallas_model import MosaicKernel

STAGES = ("jaxpr", "stablehlo", "hlo")


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaxprEqn:
    primitive: str
    source: str | None  # file:line of the user's code that made it
    outputs: str  # e.g. "f32[2,256,256]"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stages:
    """What the compiler made of a target on one chip, as plain data (no jax objects). Made once
    per phase, as jax's own stages are: the lowering's, then the compile's (a new Stages from the
    lowering's with the compiled fields); never changed after."""

    backend: str  # chip name, e.g. cpu or tpu-v5e
    platform: str
    device_kind: str
    jaxpr: str | None  # the printed jaxpr with source lines; None when not asked for (it is slow on big programs)
    jaxpr_eqns: list[JaxprEqn]
    stablehlo: str
    hlo: str | None = None
    cost: dict | None = None  # XLA's compiled.cost_analysis()
    memory: dict | None = None  # XLA's compiled.memory_analysis(), as a dict
    compile_error: CompileError | None = None
    mosaic: list[MosaicKernel] = dataclasses.field(default_factory=list)
    pallas_interpreted: bool = False  # Pallas kernels ran through the interpreter (CPU)
    simulated_chip: str | None = None  # the TPU whose figures a CPU trace's chip lookups got (SIMULATED_CHIP, or
    # SPARSE_CORE_CHIP for a program that needs SparseCores)
    compile_cached: bool = False
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    mesh: dict[str, int] | None = None  # the mesh the program is sharded over (axis sizes by name)
    devices: int = 1  # devices the program spans; memory and HLO are per device
    buffers: dict | None = None  # the compiler's buffer assignment at the HBM peak (hlo.buffers), when asked
    # options of the compile that only change machine code (machine_code_options): on the CPU,
    # timings["compile_s"] is a compile without LLVM optimization, not what jax.jit would take
    compile_options: dict = dataclasses.field(default_factory=dict)
    # what the kernel compiler's dumps said, by file (XLA:GPU: the thunk sequence and each PTX module;
    # inspector/families/gpu reads them), None where the compile keeps none
    kernel_dumps: dict[str, str] | None = None

    @functools.cached_property  # parses the whole HLO: once, in whichever process made the stages
    def op_counts(self) -> dict[str, dict[str, int]]:
        counts = {"jaxpr": dict(collections.Counter(e.primitive for e in self.jaxpr_eqns).most_common()),
                  "stablehlo": count_mlir_ops(self.stablehlo)}
        if self.hlo is not None:
            counts["hlo"] = count_hlo_ops(self.hlo)
        return counts


@dataclasses.dataclass(frozen=True, kw_only=True)
class FailedKernel:
    """What a failed lowering or compile of a program with Pallas TPU kernels leaves for
    ``inspector.mosaic.explain`` (the exception it was read from does not outlive the capture)."""

    lowering: bool  # the lowering failed (else the compile, or the block guard)
    frames: tuple[tuple[str, int, str], ...] = ()  # (file, line, function) of the equation being lowered, innermost first
    in_pallas_lowering: bool = False  # the exception came out of Pallas's TPU lowering
    bad_block: BadBlockIndex | None = None  # the constant block index libtpu would abort on (not compiled)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Program:
    """The traced program, for analyses that read jax objects (the Pallas readers). It lives in
    the process that traced it: never cached, pickled or changed."""

    closed_jaxpr: object
    example_values: tuple | None  # the flat inputs where the target gave concrete arrays (None per abstract one)
    interpreted: bool = False  # traced under our TPU interpret mode (the CPU): the kernels' interpret flags are ours
    failure: FailedKernel | None = None  # a Pallas TPU kernel failed to lower or compile: what explains it


@dataclasses.dataclass(frozen=True)  # not kw_only yet: checking.py builds one positionally
class Capture:
    stages: Stages
    program: Program
