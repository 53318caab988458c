"""A finding: something the user should know, how bad it is and where the evidence is; and the
registry of every finding code, which producers and views both read.

Each code declares its usual severity, whether it depends on the chip (``check`` reports
chip-independent findings once, chip-dependent ones per chip), the view that shows its evidence
and the keys its ``data`` carries. Data keys that views read have one meaning everywhere:
``blocks`` is always a list of block indices (each a list of ints), ``grid_point`` one grid
point, ``chip`` a chip name, ``bytes``/``limit`` byte counts, ``count`` how many in all.
"""
from __future__ import annotations

import dataclasses

SEVERITIES = ("error", "warning", "info")


@dataclasses.dataclass(frozen=True)
class Code:
    name: str
    severity: str  # the usual one; a few codes are errors on one chip and warnings on another
    per_chip: bool  # depends on the chip: reported per chip by `check`
    view: str  # the view that shows the evidence
    fields: tuple[str, ...]  # the keys of Finding.data
    summary: str


_MOSAIC_FIELDS = ("chip", "kind", "kernel", "source", "source_of", "op", "rule", "fix", "compiler", "error_code",
                  "pallas_call", "frames", "seen", "details")


_GUARD_FIELDS = ("chip", "guard", "steps", "heavy_steps", "cycles_per_step_skipped", "cycles_per_step_taken",
                 "libtpu_cycles", "low_cycles", "high_cycles")


def _codes(*codes: Code) -> dict[str, Code]:
    return {c.name: c for c in codes}


CODES = _codes(
    # the grid walk (chip-independent)
    Code("block-out-of-bounds", "error", False, "pallas", ("grid_point", "blocks"), "an index map returns a block past the array"),
    Code("output-not-written", "error", False, "pallas", ("blocks", "count"), "output blocks no grid step writes"),
    Code("output-kept-from-input", "info", False, "pallas", ("blocks", "count", "input"),
         "output blocks no grid step writes keep the values of the input aliased to the output"),
    Code("output-unwritten-unread", "info", False, "pallas", ("blocks", "count"),
         "output blocks no grid step writes, which the program never reads (it slices them away)"),
    Code("output-unwritten-undecided", "info", False, "pallas", ("blocks", "count", "ops"),
         "output blocks no grid step writes, which the program may read at elements known only at run time"),
    Code("output-revisit", "error", False, "pallas", ("blocks", "count"), "an output block written in non-consecutive steps"),
    Code("parallel-axis-race", "error", False, "pallas", ("axis", "blocks", "count"),
         "an output block written from several indices of a parallel axis"),
    Code("partial-block", "warning", False, "pallas", ("dim", "array_size", "block_size"), "a last block padded past the array"),
    Code("walk-sampled", "info", False, "pallas", (), "the grid is too large to walk whole"),
    Code("walk-needs-values", "info", False, "pallas", ("why",), "the grid or index maps depend on run-time values"),
    Code("analysis-failed", "warning", False, "pallas", ("what", "why"), "an analysis could not follow a kernel"),
    Code("pipeline-not-walked", "info", False, "pallas", ("why",),
         "an emit_pipeline in a pl.kernel / core_map body whose grid walk cannot be done"),
    # layout rules and budgets (per chip)
    Code("tiling", "error", True, "pallas", (), "a block shape the chip's tiling refuses"),
    Code("tiling-packing", "warning", True, "pallas", ("chip", "rows", "native_rows", "dtype"),
         "a packed dtype's block rows off its native tile (an error for 8-bit types, which Mosaic refuses)"),
    Code("mxu-padding", "warning", True, "pallas", ("m", "k", "n", "waste"), "a matmul padded to the MXU's width"),
    Code("vmem-over-limit", "error", True, "pallas", ("chip", "bytes", "limit"), "the VMEM estimate is over the limit"),
    Code("vmem-may-exceed", "warning", True, "pallas", ("chip", "bytes", "limit", "certain_bytes"),
         "only the body's largest value puts the VMEM estimate over the limit"),
    Code("no-sparse-core", "error", True, "pallas", ("chip",), "a SparseCore kernel traced for a chip without SparseCores"),
    Code("raised-for-chip", "error", True, "overview", ("chip",),
         "the code raised tracing for one chip of a multi-chip check; the other chips are checked"),
    Code("vmem-undecided", "warning", True, "pallas", ("chip", "bytes", "limit", "certain_bytes", "why"),
         "part of a kernel's VMEM is not modelled: the estimate cannot say it fits"),
    Code("vmem-estimate-over-compiler", "warning", True, "pallas", ("chip", "bytes", "limit", "compiler_bytes"),
         "the VMEM estimate is over the limit, but the compiler fitted the kernel"),
    Code("shared-memory-over-limit", "error", True, "pallas", ("chip", "bytes", "limit", "certain_bytes"),
         "the shared memory Triton surely keeps (the lower bound) is over the limit"),
    Code("shared-memory-undecided", "warning", True, "pallas", ("chip", "bytes", "limit", "certain_bytes"),
         "the limit lies between the shared-memory bounds: only a compile decides"),
    Code("compile-shared-memory-oom", "error", True, "pallas", ("chip", "kernel", "source", "bytes", "limit", "fix"),
         "XLA:GPU refused a kernel over the shared memory a block may have"),
    Code("shared-memory-estimate-over-compiler", "warning", True, "pallas", ("chip", "bytes", "limit", "compiler_bytes"),
         "the shared-memory estimate is over the limit, but XLA:GPU compiled the kernel within it"),
    Code("smem-over-limit", "error", True, "pallas", ("chip", "bytes", "limit"), "scalar prefetch and SMEM over the limit"),
    Code("triton-block-pow2", "error", True, "pallas", (), "a Triton block that is not a power of two"),
    Code("mosaic-gpu-minor-bytes", "warning", True, "pallas", (), "a Mosaic GPU minor dim not a multiple of 16 bytes"),
    # the compiler
    Code("compile-vmem-oom", "error", True, "overview", ("chip", "used_bytes", "limit_bytes", "exceeded_by_bytes", "scope",
                                                         "kernel", "op_name", "allocations") + _MOSAIC_FIELDS
         + ("estimate_bytes", "estimate_certain_bytes", "estimate_limit_bytes", "estimate_limit_source"),
         "the compiler ran out of VMEM (with the kernel's line, the rule, the fix and the inspector's estimate)"),
    Code("compile-error", "error", True, "overview", ("chip",), "the compile failed"),
    Code("compile-aborted", "error", True, "overview", ("chip", "exit", "log_lines", "log_tail"),
         "the compiler ended its process while compiling for one chip (libtpu's abort); the other chips still checked"),
    # a Pallas TPU kernel Mosaic refused (inspector/mosaic/error_kinds.py: one row per kind); each
    # names the kernel, the failing operation's source line and the rule and fix
    *(Code(name, "error", True, "mosaic", _MOSAIC_FIELDS + extra, summary) for name, extra, summary in (
        ("mosaic-unproven-alignment", ("dim", "multiple"), "a load or store at an offset Mosaic cannot prove aligned"),
        ("mosaic-unimplemented", ("primitive", "alternative", "lowerable"), "a jax primitive with no Pallas TPU lowering"),
        ("mosaic-shape-cast", ("change",), "a reshape that changes the tiled (last two) dimensions"),
        ("mosaic-layout", ("tile_rows", "tile_cols"), "a block or value layout Mosaic refuses"),
        ("mosaic-dtype", ("subject",), "a type this chip does not lower for the operation"),
        ("mosaic-block-index", ("index", "dim", "blocks", "index_map_source"),
         "a constant block index out of range (libtpu would abort the compile)"),
        ("mosaic-error", (), "a Mosaic error of no known kind: the compiler's words at the source line"),
    )),
    Code("mosaic-passes-unread", "info", True, "mosaic", ("chip", "why"),
         "Mosaic's pass dumps could not be made or read (the other views still hold)"),
    Code("hbm-over-capacity", "error", True, "memory", ("chip", "bytes", "limit", "largest"),
         "the program needs more HBM per device than the chip has (or the compiler refused it for HBM)"),
    Code("pallas-interpreted", "info", False, "hlo", (), "Pallas kernels interpreted on the CPU"),
    Code("simulated-chip", "info", False, "pallas", ("chip",), "the chip a SparseCore program's CPU trace simulated"),
    Code("kernel-interpret-flag", "info", False, "pallas", (), "a pallas_call given interpret=True: no Mosaic kernel on a TPU"),
    Code("no-pallas-call", "info", False, "pallas", (), "nothing to check"),
    # running the kernel (diff)
    Code("mismatch", "error", False, "diff", (), "outputs outside tolerance"),
    Code("output-structure", "error", False, "diff", ("kernel", "reference"), "the output trees differ"),
    Code("output-shape", "error", False, "diff", (), "an output's shape differs from the reference's"),
    Code("output-dtype", "error", False, "diff", (), "an output's dtype differs from the reference's"),
    Code("no-elements", "info", False, "diff", ("shape",), "an output with no elements: nothing compared"),
    Code("all-nan", "warning", False, "diff", ("count",), "an output NaN everywhere on both sides"),
    Code("race-detected", "error", False, "diff", ("chip", "cores", "runs", "races", "detail"),
         "the interpreter saw a race (a warning when every ordering still matches)"),
    Code("dma-hazard", "error", False, "diff", ("chip", "cores", "runs", "races", "detail"),
         "a DMA and another access to the same buffer overlap (a warning when every ordering still matches)"),
    Code("kernel-raised", "error", False, "diff", ("type", "message", "core", "grid_point", "source", "detail"),
         "the kernel raised while running"),
    Code("interpret-out-of-bounds", "error", False, "diff", ("detail",),
         "an out-of-bounds block or read (a read: the outputs are still compared, NaN read past the end)"),
    Code("interpret-revisit", "error", False, "diff", ("detail",), "the interpreter refused a non-consecutive revisit"),
    Code("interpret-unsupported", "info", False, "diff", ("reason", "detail"),
         "the interpreter cannot run this kernel (an error with --strict)"),
    Code("interpret-retried", "info", False, "diff", (), "the run was repeated with other interpreter settings"),
    Code("blocks-unknown", "info", False, "diff", (), "errors folded onto an even grid, not the kernel's blocks"),
    Code("mesh-on-one-device", "info", False, "diff", ("axes", "devices", "sizes", "reduced"),
         "a sharded program ran with each mesh axis of size 1"),
    Code("mesh-on-cpu-devices", "info", False, "diff", ("axes", "devices", "sizes", "reduced"),
         "a sharded program ran on as many CPU devices as its mesh has"),
    Code("mesh-unavailable", "info", False, "diff", ("raised", "detail"),
         "a kernel that failed on a mesh smaller than its own: not diffed here (an error with --strict)"),
    # libtpu's own view of the compiled program (inspector.libtpu: --time, the bundles view): TIME_CODES
    Code("register-spills", "warning", True, "bundles", ("chip", "stores", "fills", "lines", "bundles_per_step"),
         "a kernel's registers spill to VMEM and are filled back within a grid step"),
    Code("mxu-underused", "info", True, "bundles", ("chip", "mxu_share", "bound"),
         "a kernel that does matmuls keeps the MXU busy in under a quarter of its bundles"),
    Code("time-extrapolated", "info", True, "fusions", ("chip", "steps", "grids", "cycles_per_step"),
         "a kernel's time extrapolated from libtpu's simulation of smaller grids of it"),
    Code("time-budget", "info", True, "fusions", ("chip", "seconds", "memory_bytes", "why"),
         "libtpu's simulation would pass the time budget: figures from elsewhere"),
    Code("libtpu-aborted", "info", True, "fusions", ("chip", "reason"), "libtpu ended the compile that writes its dumps"),
    Code("libtpu-alone", "info", True, "fusions", ("chip",),
         "a kernel libtpu left untimed in the whole program, simulated in a program of its own"),
    Code("libtpu-loop-unknown", "warning", True, "fusions", ("chip", "loops"),
         "a Pallas kernel loops a number of times known only at run time: its time cannot count the trips"),
    Code("libtpu-no-time", "info", True, "fusions", ("chip",),
         "libtpu's simulation gave a kernel 0 cycles: its floor stands"),
    Code("libtpu-refused", "warning", True, "fusions", ("chip", "reason"),
         "libtpu simulates nothing of the program on this chip: compiler estimates and floors only"),
    Code("xla-loop-unknown", "warning", True, "fusions", ("chip", "kernels"),
         "XLA ops inside a while loop whose trip count only the run decides: counted once, a floor"),
    Code("xla-cost-unknown", "warning", True, "fusions", ("chip", "roofline_seconds"),
         "an XLA op neither simulated nor estimated by XLA's cost model: its time is a floor"),
    Code("libtpu-dump-unreadable", "info", True, "fusions", ("chip", "file", "why"),
         "a libtpu dump in a format the inspector cannot read"),
    Code("time-roofline-only", "info", True, "fusions", ("chip",), "no libtpu estimate off TPU: times are floors (the roofline)"),
    Code("libtpu-below-roofline", "warning", True, "fusions", ("chip", "libtpu_seconds", "roofline_seconds"),
         "libtpu's simulated time is below the kernel's roofline: the roofline stands"),
    Code("libtpu-guarded-steps", "info", True, "fusions", _GUARD_FIELDS,
         "a kernel's time weights the grid steps that run its guarded code (pl.when) and those that skip it"),
    Code("libtpu-guard-unknown", "warning", True, "fusions", _GUARD_FIELDS,
         "which grid steps run a kernel's guarded code is known only at run time: its time lies in a range"),
    Code("measured-unmatched", "info", False, "fusions", ("ops",),
         "most ops the chip ran have no kernel of that name in the deviceless compile"),
)


@dataclasses.dataclass
class Finding:
    """One thing to know: ``code`` (a key of CODES), a one-line message, where the evidence is
    (kernel, operand, view) and the figures behind it (``data``, keys as the code declares)."""

    severity: str  # error | warning | info
    code: str  # stable identifier, e.g. compile-vmem-oom, block-out-of-bounds
    message: str
    kernel: str | None = None
    operand: str | None = None
    view: str | None = None  # the view that shows the evidence
    data: dict | None = None

    def __post_init__(self) -> None:
        """A finding is made as its code declares it: a registered code, a known severity, data
        with the declared keys only (views read them by name)."""
        known = CODES.get(self.code)
        if known is None:
            raise ValueError(f"finding code {self.code!r} is not registered (inspector.base.findings.register)")
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.code}: severity {self.severity!r} is none of {', '.join(SEVERITIES)}")
        undeclared = set(self.data or {}) - set(known.fields)
        if undeclared:
            raise ValueError(f"{self.code}: data keys {sorted(undeclared)} are not declared for it in CODES")

    @classmethod
    def of(cls, code: str, message: str, **where) -> Finding:
        """A finding with its code's usual severity and view."""
        return cls(CODES[code].severity, code, message, **where)

    @property
    def per_chip(self) -> bool:
        known = CODES.get(self.code)
        return bool(known and known.per_chip)


def register(code: Code) -> Code:
    """Add a code (an extension's own analysis); one place per code."""
    CODES[code.name] = code
    return code


def by_severity(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


# The codes libtpu's simulation gives (--time, the UI's T): a run without it has none of them, so a
# comparison with a run that had it leaves them out (the baseline's figures the same).
TIME_CODES = frozenset((
    "register-spills", "mxu-underused", "time-extrapolated", "time-budget", "libtpu-aborted", "libtpu-alone",
    "libtpu-loop-unknown", "libtpu-no-time", "libtpu-refused", "xla-loop-unknown", "xla-cost-unknown",
    "libtpu-dump-unreadable", "time-roofline-only", "libtpu-below-roofline", "libtpu-guarded-steps", "libtpu-guard-unknown"))
