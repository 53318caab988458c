"""The table of Mosaic and Pallas-TPU error kinds: how to recognise each in the compiler's words,
the rule it enforces in one sentence, the usual fix, and where it was seen.

Each kind is one row; ``classify`` is the only reader of the compiler's error texts. A rule or
fix is a template filled from what the pattern captured (``{dim}``, ``{multiple}``,
``{primitive}``) and from what ``explain`` adds (``{chip}``, ``{alternative}``); every key a
template names has a default in the row, so a message that says less still reads as a sentence.
The texts were captured with jax 0.10.2 and libtpu 0.0.42.1 (samples/mosaic_errors.py has one
kernel per kind; tests/test_mosaic_errors.py compiles each on the chip named in ``seen``).
"""
from __future__ import annotations

import dataclasses
import re

from ..base.mosaic_failure import UNKNOWN_KIND

SEEN_WITH = "jax 0.10.2, libtpu 0.0.42.1"


@dataclasses.dataclass(frozen=True)
class ErrorKind:
    name: str  # stable identifier, e.g. "unproven-alignment"
    code: str  # the finding code (inspector.base.findings.CODES)
    title: str  # a few words for a headline
    patterns: tuple[str, ...]  # regexes over the compiler's message; the first that matches wins
    rule: str  # one sentence (a template)
    fix: str  # the usual fix (a template)
    seen: str  # the versions and chips it was seen with, and the kernel that shows it
    defaults: dict = dataclasses.field(default_factory=dict)  # for the template keys a message may not give

    def match(self, message: str) -> dict | None:
        for pattern in self.patterns:
            m = re.search(pattern, message, re.S)
            if m:
                return {k: v for k, v in m.groupdict().items() if v is not None}
        return None


class _Defaults(dict):
    def __missing__(self, key):
        return "?"


def fill(template: str, values: dict) -> str:
    return template.format_map(_Defaults(values))


# What to write instead of a primitive that has no Pallas TPU lowering (jax 0.10.2): used when a
# kernel body calls it. Keys are jax primitive names.
ALTERNATIVES = {
    "sort": "sort outside the kernel (jnp.sort before the pallas_call), or sort a short axis in the kernel with a "
            "bitonic network of jnp.minimum / jnp.maximum over pltpu.roll-ed copies",
    "cumsum": "a matmul with a triangular matrix: jnp.dot(x, (row <= col).astype(x.dtype)) with row, col from "
              "jax.lax.broadcasted_iota (runs on the MXU), or a log-step scan of pltpu.roll and jnp.where",
    "cumprod": "a log-step scan: log2(n) steps of x * jnp.where(lane >= shift, pltpu.roll(x, shift, axis), 1)",
    "cummax": "a log-step scan: log2(n) steps of jnp.maximum(x, jnp.where(lane >= shift, pltpu.roll(x, shift, axis), -inf))",
    "cummin": "a log-step scan: log2(n) steps of jnp.minimum(x, jnp.where(lane >= shift, pltpu.roll(x, shift, axis), inf))",
    "cumlogsumexp": "a log-step scan with jnp.logaddexp over pltpu.roll-ed copies, or exp, a triangular matmul and log",
    "top_k": "k rounds of jnp.max (or jnp.argmax, which lowers) and masking the winner with jnp.where",
    "argsort": "sort outside the kernel, or k rounds of jnp.argmax and masking for the first k",
    "dynamic_slice": "index the ref instead of the value: x_ref[pl.ds(start, size)] (pl.multiple_of(start, 8) when aligned)",
    "dynamic_update_slice": "store through the ref: o_ref[pl.ds(start, size)] = value",
    "scatter": "store through the ref, one pl.ds window per index in a jax.lax.fori_loop",
    "scatter-add": "read, add and store through the ref, one pl.ds window per index in a jax.lax.fori_loop",
    "reduce_prod": "jnp.exp(jnp.sum(jnp.log(x))) for positive x, or a loop of multiplies over slices",
    "expm1": "jnp.exp(x) - 1 (less precise near 0), or a short Taylor series there",
    "log1p": "jnp.log(1 + x)",
    "erfc": "1 - jax.lax.erf(x)",
    "asin": "jnp.arctan2(x, jnp.sqrt(1 - x * x))",
    "acos": "jnp.arctan2(jnp.sqrt(1 - x * x), x)",
    "atan": "jnp.arctan2(x, 1.0)",
    "sinh": "(jnp.exp(x) - jnp.exp(-x)) / 2",
    "cosh": "(jnp.exp(x) + jnp.exp(-x)) / 2",
    "asinh": "jnp.log(x + jnp.sqrt(x * x + 1))",
    "acosh": "jnp.log(x + jnp.sqrt(x * x - 1))",
    "atanh": "0.5 * jnp.log((1 + x) / (1 - x))",
    "cbrt": "jnp.sign(x) * jnp.exp(jnp.log(jnp.abs(x)) / 3)",
    "lgamma": "compute it outside the kernel",
    "digamma": "compute it outside the kernel",
    "conv_general_dilated": "a sum of jnp.dot over shifted slices of the input (one per kernel tap)",
    "fft": "compute it outside the kernel, or as a matmul with the DFT matrix",
    "rng_bit_generator": "pltpu.prng_seed and pltpu.prng_random_bits (or jax.random with the threefry PRNG, which lowers)",
    "select_and_gather_add": "compute it outside the kernel",
}
NO_ALTERNATIVE = "compute it outside the kernel (before or after the pallas_call), or with the primitives that lower"

UNPROVEN_ALIGNMENT = ErrorKind(
    "unproven-alignment", "mosaic-unproven-alignment", "unproven alignment",
    (r"(?P<error_code>E2003)\b.*?cannot statically prove that index in dimension (?P<dim>\d+) is a multiple of (?P<multiple>\d+)",
     r"cannot statically prove that index in dimension (?P<dim>\d+) is a multiple of (?P<multiple>\d+)",
     r"(?P<error_code>E2003)\b|CompileTimeMosaicUnprovenMemoryAccessAlignment"),
    rule=("A vector load or store at a dynamic offset must start on a tile boundary in its tiled dimensions "
          "(here dimension {dim}: a multiple of {multiple}) and Mosaic must prove that when it compiles the kernel; "
          "an offset read at run time (a scalar-prefetch value, a loop index times a stride) proves nothing by itself."),
    fix=("If the offset is aligned, say so: pl.ds(pl.multiple_of(start, {multiple}), size). If it is not, read an aligned "
         "window that covers it and slice the value, or move the rows with a DMA (pltpu.make_async_copy), which "
         "takes any offset."),
    seen=(f"{SEEN_WITH}: tpu-v5e, a bf16 x_ref[pl.ds(start, 16), :] at a scalar-prefetched start (dimension 0, "
          "multiple of 8) and an f32 x_ref[:, pl.ds(start, 128)] (dimension 1, multiple of 128); the same f32 row "
          "read compiles without a hint. samples/mosaic_errors.py:unaligned_rows"),
    defaults={"dim": "?", "multiple": "the tile size"},
)

UNIMPLEMENTED_PRIMITIVE = ErrorKind(
    "unimplemented-primitive", "mosaic-unimplemented", "no TPU lowering",
    (r"Unimplemented primitive in Pallas TPU lowering for (?P<core>\w+): (?P<primitive>[\w\-]+)",),
    rule=("Inside a Pallas TPU kernel only the jax primitives that have a Mosaic lowering rule can be used "
          "({lowerable_count} do in jax {jax_version} on the {core} core); {primitive} has none."),
    fix="Instead of {primitive}: {alternative}.",
    seen=(f"{SEEN_WITH}: tpu-v5e, jnp.sort and jnp.cumsum in a kernel body (the lowering has no rule, whatever the "
          "chip). samples/mosaic_errors.py:sort_rows, cumsum_rows"),
    defaults={"core": "tc", "primitive": "this primitive", "alternative": NO_ALTERNATIVE},
)

SHAPE_CAST = ErrorKind(
    "shape-cast", "mosaic-shape-cast", "unsupported reshape",
    (r"unsupported shape cast", r"[Uu]nsupported shape cast", r"Reshape 1D ref is not supported",
     r"(?:[Rr]eshape|shape_cast)[^\n]*(?:not supported|unsupported|[Nn]ot implemented)"),
    rule=("In a kernel the last two dimensions of a value are laid onto vector registers (sublanes x 128 lanes; "
          "8 sublanes for 32-bit types), so a reshape may change the leading dimensions freely but the last two only "
          "when whole tiles regroup (the last dimension kept, or merged and split in multiples of 128, the second to "
          "last in multiples of the sublane tile){change}."),
    fix=("Keep the last two dimensions as they are: add or drop unit dimensions in front (x[None], not x[:, None]), "
         "build a mask or an index 2-D from the start (jax.lax.broadcasted_iota(jnp.int32, (rows, cols), 0)), or "
         "reshape outside the kernel (in the wrapper, or through the BlockSpec's block shape)."),
    seen=(f"{SEEN_WITH}: tpu-v4, v5e, v6e and tpu7x, a (32,) bool mask made (32, 1) with mask[:, None] (infer-vector-layout: "
          "unsupported shape cast). samples/mosaic_errors.py:mask_column"),
    defaults={"change": ""},
)

LAYOUT = ErrorKind(
    "layout", "mosaic-layout", "layout or tiling refused",
    (r"(?P<error_code>E2002)\b.*?tiling \((?P<tile_rows>\d+), (?P<tile_cols>\d+)\), but its block shape \((?P<block>[^)]*)\)",
     r"(?P<error_code>E2002)\b|CompileTimeMosaicMisalignedBlockAndTiling",
     r"last two dimensions of your block shape are divisible by (?P<tile_rows>\d+) and (?P<tile_cols>\d+)",
     r"XLA layout \((?P<xla_layout>[^)]*)\) does not match Mosaic layout",
     r"Non-trivial layouts unsupported", r"unsupported operand shapes or layouts", r"[Uu]nsupported layout",
     r"The last dim size is not 128", r"[Nn]ot implemented:[^\n]*layout"),
    rule=("Mosaic keeps each operand in tiles of (sublanes, 128 lanes) whose sublane count grows as the dtype narrows "
          "(8 rows for 32-bit, 16 for 16-bit, 32 for 8-bit types): a block must cover whole tiles in its last two "
          "dimensions (here ({tile_rows}, {tile_cols})) or span the whole array there, and a value's layout must be one "
          "the operation using it accepts."),
    fix=("Make the block's last two dimensions multiples of ({tile_rows}, {tile_cols}), or equal to the array's; for "
         "8-bit data that means 32 rows, for 16-bit 16. For an operation that refuses its operand's layout, give it "
         "tile-sized operands (pad the short dimension to the tile) or compute in 32-bit."),
    seen=(f"{SEEN_WITH}: tpu-v5e, an int8 (64, 128) array in (8, 128) blocks (E2002: tiling (32, 128)); Pallas's own "
          "check refuses a last block dimension that is not a multiple of 128. samples/mosaic_errors.py:int8_rows"),
    defaults={"tile_rows": "8", "tile_cols": "128"},
)

DTYPE = ErrorKind(
    "dtype", "mosaic-dtype", "dtype not supported on this chip",
    (r"(?P<error_code>E2001)\b[^\n]*?Unsupported matmul (?P<side>LHS|RHS) type on target: vector<(?:\d+x)*(?P<mlir_dtype>\w+)>",
     r"CompileTimeMosaicUnsupported(?P<side>Lhs|Rhs)Type",
     r"failed to legalize operation '(?P<mlir_op>[\w.]+)'[^\n]*?x(?P<mlir_dtype>f8E\w+|i4|i2|f4E\w+)>",
     r"Only (?P<supported>vector<\w+>(?: and vector<\w+>)*) are supported, but got '(?P<mlir_dtype>\w+)'",
     r"Unsupported cast: (?P<from_dtype>\w+) -> (?P<to_dtype>\w+)",
     r"64-bit types are not supported", r"Unsupported (?P<what>preferred_element_type|dtype)"),
    rule=("Each TPU generation lowers a fixed set of types per operation, and {subject} is not among them on {chip} "
          "(seen with libtpu 0.0.42.1: fp8 and int4 matmul operands on v5e, v6e and tpu7x, not on v4; arithmetic on fp8 "
          "values on none of v4, v5e, v6e, tpu7x; int8 arithmetic not on v5e; no 64-bit types in a kernel)."),
    fix=("Convert to a type the chip computes in before the operation (x.astype(jnp.bfloat16) for a matmul operand, "
         "jnp.float32 for arithmetic) and back after it if needed; keep the narrow type for storage and DMA only."),
    seen=(f"{SEEN_WITH}: tpu-v4, an fp8 (float8_e5m2) and an int4 matmul (E2001: Unsupported matmul RHS type); v5e, "
          "v6e and tpu7x compile both. fp8 + fp8 fails on v4, v5e, v6e and tpu7x ('failed to legalize operation arith.addf'); "
          "int8 * 2 on v5e: 'Only vector<i16> and vector<i32> are supported, but got i8'. "
          "samples/mosaic_errors.py:fp8_matmul"),
    defaults={"subject": "this type for this operation", "chip": "this chip"},
)

BLOCK_INDEX = ErrorKind(
    "block-index", "mosaic-block-index", "block index out of range",
    (r"block index (?P<index>-?\d+) in dimension (?P<dim>\d+) is out of range \[0, (?P<blocks>\d+)\)",
     r"Check failed: llo::CouldL[te]S32"),
    rule=("An index map returns block indices, not element offsets, and along dimension {dim} each must be in "
          "[0, {blocks}) (the array's size over the block's, rounded up); an index that is a constant is checked "
          "while the kernel compiles, and libtpu 0.0.42.1 then aborts the whole process (Check failed: "
          "llo::CouldLtS32) instead of reporting an error, so the inspector does not compile it."),
    fix=("Return a block index below {blocks}: divide an element offset by the block size (offset // block), clamp "
         "it (jnp.minimum(index, {last})), or grow the array or shrink the block so that the block exists."),
    seen=(f"{SEEN_WITH}: tpu-v4, v5e, v5p, v6e and tpu7x all abort, an index map returning the constant block "
          "(2, 0) of a (16, 128) array in (8, 128) blocks, for an input or an output: SIGABRT in windowing_util. A traced index past the end "
          "compiles (and reads what lies there). samples/mosaic_errors.py:past_the_end"),
    defaults={"dim": "?", "blocks": "n", "last": "n - 1"},
)

VMEM_OOM = ErrorKind(
    "vmem-oom", "compile-vmem-oom", "VMEM out of memory",
    (r"(?P<error_code>E1001)\b", r"CompileTimeScopedVmemOom", r"Ran out of memory in memory space vmem",
     r"exceeded scoped vmem limit"),
    rule=("Everything a kernel holds in VMEM at once (each pipelined block times its buffers, two by default, plus "
          "scratch and the values the body builds) must fit the scoped VMEM limit, {scoped} on {chip} unless "
          "pltpu.CompilerParams(vmem_limit_bytes=...) raises it, up to the {physical} the chip has."),
    fix=("Shrink the blocks (the compiler lists the largest allocations), keep one buffer for a block that never "
         "moves (pipeline_mode=pl.Buffered(1)), or raise this kernel's limit with "
         "pltpu.CompilerParams(vmem_limit_bytes=...) up to {physical}."),
    seen=(f"{SEEN_WITH}: tpu-v5e, a copy kernel with two (2048, 1024) f32 blocks double-buffered (32 MiB of 16 MiB, "
          "E1001). samples/mosaic_errors.py:too_big_blocks"),
    defaults={"scoped": "the scoped limit", "physical": "the physical VMEM", "chip": "this chip"},
)

UNKNOWN = ErrorKind(
    UNKNOWN_KIND, "mosaic-error", "Mosaic error",
    (), rule="", fix="",
    seen="any message no row above recognises: the compiler's own words, at the failing operation's source line",
)

KINDS: tuple[ErrorKind, ...] = (UNPROVEN_ALIGNMENT, UNIMPLEMENTED_PRIMITIVE, SHAPE_CAST, LAYOUT, DTYPE, BLOCK_INDEX,
                                VMEM_OOM)
BY_NAME = {k.name: k for k in KINDS + (UNKNOWN,)}


def classify(message: str) -> tuple[ErrorKind, dict]:
    """The first kind whose pattern matches the message, with what the pattern captured;
    (UNKNOWN, {}) when none does."""
    for kind in KINDS:
        found = kind.match(message)
        if found is not None:
            return kind, found
    return UNKNOWN, {}
