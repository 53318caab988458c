"""What a pallas_call is, as plain data: grid, BlockSpecs, scratch, DMAs and body costs.

Read from the traced program by ``inspector.jax_internals.pallas``; every analysis (grid walk,
tiling rules, VMEM budgets) and every view works from these records alone. In base/ because the
jax boundary writes them and the compile path stores them (a kernel's Mosaic MLIR in Stages), and
both sit below the Pallas analyses.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, cast

import numpy as np

GRID_LETTERS = "ijklmn"
# numpy (ml_dtypes) stores these in a whole byte each; Mosaic and XLA pack them into the word
_SUB_BYTE_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}


def dtype_bits(dtype: str) -> int:
    """Bits per element as the TPU stores it."""
    return _SUB_BYTE_BITS.get(str(dtype), np.dtype(dtype).itemsize * 8)


@dataclasses.dataclass(kw_only=True)
class BlockSpecInfo:
    """One pipelined operand: the block of an array each grid step sees."""

    operand: str  # the kernel's name for the ref (q_ref), else jax's origin (args[0], outputs)
    role: str  # input | output
    position: int  # index among the pallas_call's inputs or outputs
    array_shape: list[int]
    dtype: str
    block_shape: list[int | None]  # None: a squeezed dimension (pl.Squeezed / None in the BlockSpec)
    dim_kinds: list[str]  # blocked | squeezed | element | bounded per dimension
    memory_space: str  # vmem | any | smem | hbm ...
    buffer_count: int | None  # pl.Buffered(n), None for the default
    index_map: str  # "(i, j, k) -> (i, j, 0)"
    fixed_window: bool = False  # the index map returns constants only: Mosaic keeps one buffer
    fixed_index: list[int] | None = None  # those constants (the block index), when fixed_window
    grid_axes_read: list[int] | None = None  # the grid axes the index map reads (None: not known)
    index_map_source: str | None = None  # file:line where the index map is defined
    unused: bool = False  # an output nothing in the program reads (scratch passed as an output)
    aliased_input: str | None = None  # an output sharing its buffer with this input (input_output_aliases)
    resident: bool = False  # memory_space=VMEM given without a block: the whole array, copied in once
    revisit: str | None = None  # pl.Buffered(revisit=pl.RevisitMode.ANY): "any"; None for jax's default (immediate)
    made_by_op: bool = False  # an input the program computes before the kernel, not one of its arguments
    read_by_op: bool = False  # an output an op of the program reads after the kernel, not only returned
    # the elements of an output the program reads after the kernel: None for all of them (or an
    # input); else boxes, each [start, stop) per dimension (an empty list: none is read)
    read_boxes: list[list[list[int]]] | None = None
    # ops reading the output at elements chosen at run time (a slice at traced offsets, a gather):
    # whether they read an element no grid step writes is undecided
    read_unfollowed: list[str] = dataclasses.field(default_factory=list)
    # kernels after this one that load blocks of the output but write them before reading them
    # ("_backward_kernel writes it at file.py:257 before reading it")
    read_overwritten: list[str] = dataclasses.field(default_factory=list)
    # an emit_pipeline's operand: the memory of the ref it windows ("vmem" or "smem": its blocks are
    # copied within the chip, no HBM traffic); None for a pallas_call's blocks, which come from HBM
    source_space: str | None = None
    # an input's dims whose elements only reach outputs straight: {dim: [(output position, its dim)]}
    straight_to: dict = dataclasses.field(default_factory=dict)

    def buffers(self, steps: int | None, grid: list | None = None) -> int:
        """VMEM buffers the compiler gives this operand (measured with libtpu 0.0.42.1): pl.Buffered(n)
        when given; one for a resident operand, a block whose index map returns constants only or
        reads only grid axes of one step (``grid``: the sizes the compiler knows, None for one
        computed at run time; a (128, 512) x-block read by the axis of 8 token tiles and an
        (8192, 512) w-block read by the vocab axis of 1 on v5e: 16.62 MiB scoped, w once), or when
        the grid has a single step; else two."""
        if self.buffer_count:
            return self.buffer_count
        if self.memory_space != "vmem" or self.resident or self.fixed_window or steps == 1:
            return 1
        if grid is not None and self.grid_axes_read is not None and all(
                k < len(grid) and grid[k] == 1 for k in self.grid_axes_read):
            return 1
        return 2

    @property
    def pipelined(self) -> bool:
        """Blocks of the outer grid (VMEM/SMEM); memory_space=ANY/HBM operands are the kernel's own
        to copy (manual DMA, nested pipelines) and are not blocks of the grid."""
        return self.memory_space not in ("any", "hbm")

    @property
    def from_hbm(self) -> bool:
        """Its blocks move between HBM and VMEM (not an emit_pipeline over refs already on the chip)."""
        return self.source_space not in ("vmem", "smem")

    @property
    def block_elements(self) -> int:
        return math.prod(b or 1 for b in self.block_shape)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def block_bytes(self) -> int:
        return math.ceil(self.block_elements * dtype_bits(self.dtype) / 8)

    @property
    def array_bytes(self) -> int:
        return math.ceil(math.prod(self.array_shape) * dtype_bits(self.dtype) / 8)

    @property
    def must_write(self) -> bool:
        """An output the kernel writes whole (so, at least once, every byte): not a buffer it
        updates in place (aliased to an input) nor one nothing reads."""
        return self.role == "output" and self.aliased_input is None and not self.unused


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScratchInfo:
    """A buffer the kernel owns: scratch_shapes, or a run_scoped allocation (emit_pipeline's
    buffers among them) when ``scoped`` is set."""

    shape: list[int]
    dtype: str
    memory_space: str  # vmem | smem | semaphore ...
    scoped: bool = False  # allocated inside the body (pltpu.run_scoped / emit_pipeline)

    @property
    def bytes(self) -> int:
        bits = dtype_bits(self.dtype) if self.dtype and self.memory_space != "semaphore" else 32
        return math.ceil(math.prod(self.shape or [1]) * bits / 8)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DmaInfo:
    """One async copy in the kernel body (make_async_copy, emit_pipeline's copies)."""

    source: str  # "x_hbm (any)", the ref as the kernel names it where known
    destination: str
    src_space: str
    dst_space: str
    shape: list[int]
    dtype: str
    bytes: int  # one transfer
    per_step: list[float]  # [min, max] transfers per grid step (branches and loops counted)
    remote: bool  # to another device (device_id given)
    # False: a dimension is sized at run time (pl.ds(start, n) with a traced n); ``shape`` and
    # ``bytes`` are then the most it can copy (the ref's extent) and per_step's min is 0
    size_known: bool = True
    pipeline: bool = False  # an emit_pipeline's block copy (its walk counts those blocks exactly)

    @property
    def touches_hbm(self) -> bool:
        return "any" in (self.src_space, self.dst_space) or "hbm" in (self.src_space, self.dst_space)


class DotLowering(NamedTuple):
    """What one matmul's lowering may hold in the vector registers (body_dots._lowering), in bytes
    of vreg tiles: its operands as it lays them out for the MXU, its result's rows and columns."""

    lhs: int  # the lhs it lays out anew (a packed one, or one the body computes); 0: read again from its block
    lhs_as_bf16: int  # the same with an 8-bit lhs as bf16 (a chip whose MXU does not take it converts it)
    lhs_kind: str  # the lhs's 8-bit kind: "float8", "int8" or ""
    rows: int
    cols: int
    rhs: int = 0  # the rhs where the body computes it (cast, dequantized); 0: latched from its block tile by tile
    rhs_as_bf16: int = 0  # the rhs as bf16 where it is 8-bit (computed or read), else rhs
    rhs_kind: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BodyFacts:
    """What a kernel body holds in VMEM beside its blocks (jax_internals/body_dots.py), in bytes of
    (8 x packing, 128) vreg tiles: the facts the VMEM estimate's rules (pallas/vmem_rules.py) read."""

    held_bytes: int = 0  # the largest matmul result a reduction must see whole before it is used whole
    summed_bytes: int = 0  # of those held, the largest whose chain feeds two reductions (max, then the sum of exp)
    stored_held_bytes: int = 0  # the largest matmul result held so, whose chain then stores it whole in a ref as wide
    summed_operand_bytes: int = 0  # its operands the body computes (not blocks read as they are: _computed_operand_bytes)
    loop_carry_bytes: int = 0  # the most a rolled loop (fori_loop, while) carries from step to step, in vreg tiles
    unrolled_bytes: int = 0  # the most not-streamed matmul results one straight-line stretch computes
    # of unrolled_bytes, what element-wise ops alone do not carry into a store of its size (_built_in_ref)
    unrolled_unbuilt_bytes: int = 0
    met_bytes: int = 0  # the largest matmul result whose element-wise chain meets another's (_meets_another_result)
    # the largest (rows, 1) value (a row max or sum, a mean) in vreg tiles, and how many the body computes of that size
    statistic_bytes: int = 0
    statistic_count: int = 0
    statistic_reductions: int = 0  # of those, how many are reductions of a block-sized value along its rows
    statistic_lanes: int = 0  # the widest value those reductions reduce, in lanes
    reduced_row_bytes: int = 0  # the largest value built in its ref after a reduction along its rows saw it (_reduced_row)
    unrolled_values_bytes: int = 0  # the most an unrolled loop's trips build: trips x its body's largest value
    # the body's largest value not built in the ref it is stored into (None: the body was not followed,
    # then PallasCall.intermediates_bytes[0] stands for it)
    largest_value_bytes: int | None = None
    # of those, the largest that is not a matmul result and is whole: not streamed into reductions
    # (value_chains.streams_into_reductions), not made of indices (value_chains.made_of_indices)
    computed_value_bytes: int = 0
    second_computed_bytes: int = 0  # the second largest value computed element-wise, whole or streamed
    split_operand_bytes: int = 0  # bf16 parts of HIGHEST-precision f32 matmuls' operands (_split_bytes)
    # the largest matmul's two operands in vreg tiles, as read (_mxu_operand_bytes); of matmuls with an
    # 8-bit float operand, the largest with those as bf16
    mxu_operand_bytes: int = 0
    mxu_operand_f8_bf16_bytes: int = 0
    dot_lowerings: tuple[DotLowering, ...] = ()  # per matmul, what its lowering may hold in vregs
    # the largest value the body computes only for a matmul operand (a cast or dequantized block on its
    # way to the MXU: value_chains.feeds_only_matmuls), no value of the body's own
    operand_chain_bytes: int = 0
    in_ref_bytes: int = 0  # the largest value built in the ref it is stored into (``o_ref[...] = f(x)``)


class TritonLoad(NamedTuple):
    """One ref read of a Pallas-Triton kernel body: a tile of a block."""

    ref: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    in_loop: bool
    pipelined: bool  # Triton's pipeliner multi-buffers it for sure whenever num_stages > 1 (triton_body.py)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TritonBody:
    """What a kernel body loads and builds, as Triton's shared memory sees it (jax_internals/triton_body.py):
    the facts the GPU shared-memory bounds (pallas/gpu_smem.py) rest on."""

    loads: tuple[TritonLoad, ...] = ()  # every ref read (``x_ref[...]``, ``x_ref[:, pl.ds(...)]``)
    computed_operand_bytes: int = 0  # matmul operands the body computes (not read straight from a ref)
    largest_value_bytes: int = 0  # the largest array value the body builds (a layout conversion's or reduction's scratch)
    unfollowed: str | None = None  # why the walk could not follow the body (the bounds then say nothing)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PallasCall:
    """One pallas_call as the compiler sees it."""

    name: str
    source: str | None  # file:line of the pallas_call
    kernel_source: str | None  # the kernel function and where it is defined
    grid: list[int | None]  # None: a dimension computed at run time that the example inputs did not decide
    grid_names: list[str]
    grid_dynamic: list[bool]  # the dimension is computed at run time (a traced value)
    dimension_semantics: list[str]  # per grid axis; "arbitrary" when unspecified
    scalar_prefetch: int
    prefetch_bytes: int  # the scalar-prefetch operands, which live in SMEM for the whole kernel
    operands: list[BlockSpecInfo]
    scratch: list[ScratchInfo]
    dmas: list[DmaInfo]
    vmem_limit_bytes: int | None  # CompilerParams(vmem_limit_bytes=...)
    num_stages: int | None  # Triton compiler params, when given
    num_warps: int | None = None  # Triton compiler params, when given
    # the Pallas backend its CompilerParams are for: "mosaic_tpu", "triton", "mosaic_gpu" (None: none given)
    written_for: str | None = None
    step_flops: float  # of the kernel body, one grid step, the costliest branches taken
    step_flops_min: float  # the cheapest branches (pl.when / lax.cond) taken
    step_transcendentals: float
    dots: list[list[int]]  # (m, k, n) of each matmul in the body
    int8_matmuls: bool = False  # one of them multiplies 8-bit integers (the roofline takes the int8 rate)
    mxu_passes: int = 1  # the fewest bf16 MXU passes any of them takes (an f32 matmul at HIGHEST: 6)
    # each unit's [least, most] work over the grid, a top-level pl.when counted at the steps that take it
    # (kernel_body.grid_work: MXU flops, VALU and EUP register instructions); None: the grid's size is not known
    grid_work: dict[str, list[float]] | None = None
    intermediates_bytes: list[int]  # sizes of the body's array values, largest first (top 8)
    cost_estimate: dict | None = None  # the pl.CostEstimate the author gave, if any
    vmapped_dims: list[int] = dataclasses.field(default_factory=list)  # grid axes added by jax.vmap
    # bytes the program writes before the kernel into its computed operands, and copies of aliased
    # arguments: work during which XLA can copy an input into VMEM (operand_origins)
    work_before_bytes: int = 0
    # the operands' origins (made_by_op, read_by_op, work_before_bytes) were followed through the
    # program, not assumed (a kernel inside a loop, branch or shard_map): XLA's placement is relied on
    origins_followed: bool = False
    interpret: bool = False  # pallas_call(interpret=...) given: the interpreter's HLO on every backend, never Mosaic
    unknown_loops: int = 0  # while loops in the body with a trip count unknown here: maxima count them once
    # "pallas_call", or a kernel over a core mesh: "pl.kernel" / "core_map" (the grid is then the mesh,
    # one step per core, and operands stay in HBM for the kernel to copy)
    style: str = "pallas_call"
    core_type: str | None = None  # mesh kernels: "TensorCore", "SparseCore vector subcore", ...
    vmem_unfollowed: str | None = None  # why the kernel's VMEM cannot all be counted (the budget is then undecided)
    body: BodyFacts = dataclasses.field(default_factory=lambda: BodyFacts())  # what the body holds in VMEM
    program_ids: list[int] = dataclasses.field(default_factory=list)  # grid axes the body reads (pl.program_id, num_programs)
    triton: TritonBody | None = None  # a Pallas-Triton kernel's loads and values (None: not a Triton kernel)

    @property
    def steps(self) -> int | None:
        if any(g is None for g in self.grid):
            return None
        return math.prod(cast("list[int]", self.grid)) if self.grid else 1  # no None (above)

    @property
    def compiled_steps(self) -> int | None:
        """The grid's steps as the compiler knows them: None where a dimension is computed at run
        time, even when the example inputs decide it (libtpu pipelines a dynamic grid of what
        turns out to be one step with two buffers per block: measured, tests/test_pallas_third_party_styles.py)."""
        return None if any(self.grid_dynamic) else self.steps

    @property
    def compiled_grid(self) -> list[int | None]:
        """The grid's sizes as the compiler knows them (None: computed at run time)."""
        return [None if d else g for g, d in zip(self.grid, self.grid_dynamic)]

    @property
    def grid_text(self) -> str:
        dims = [("?" if g is None else str(g)) + ("*" if d else "") for g, d in zip(self.grid, self.grid_dynamic)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    @property
    def dma_bytes_per_step(self) -> list[float]:
        """[min, max] HBM bytes the body's own DMAs move per grid step."""
        hbm = [d for d in self.dmas if d.touches_hbm]
        return [sum(d.bytes * d.per_step[0] for d in hbm), sum(d.bytes * d.per_step[1] for d in hbm)]


@dataclasses.dataclass(kw_only=True)
class MosaicKernel:
    """The Mosaic MLIR of one pallas_call, as it was lowered for a TPU."""

    name: str
    source: str | None  # file:line of the pallas_call
    mlir: str
    lines: list[str] = dataclasses.field(default_factory=list)  # file:line of the body's operations, as Mosaic knows them


@dataclasses.dataclass(kw_only=True)
class FoundCall:
    """A PallasCall with what the grid walk needs and the Report does not carry (in-process only)."""

    info: PallasCall
    index_maps: list  # per operand: f(*grid_index_arrays) -> tuple of block-index arrays
    signature: str  # same grid, shapes, index maps and prefetch data: the same walk
    prefetch_known: bool = False  # the scalar-prefetch values are known (constants or example inputs)
    # pltpu.emit_pipeline calls in the body, each as a call of its own to walk (grid, BlockSpecs over
    # the HBM refs it was given); and why each pipeline that could not be read is not walked
    pipelines: list["FoundCall"] = dataclasses.field(default_factory=list)
    unwalked_pipelines: list[str] = dataclasses.field(default_factory=list)
    pipeline_runs: list[float] = dataclasses.field(default_factory=list)  # per pipeline: its whole grid's runs per kernel
