"""A change ``inspector fix`` tries on a program, and what it found, as plain data: the jax
boundary applies a change to the traced program (jax_internals/variants.py), the Pallas analysis
proposes it or refuses it (pallas/fixes.py), the patch writer turns it into an edit of the user's
source (inspector/verbs/patching.py); ``inspector.verbs.fixing`` compiles, times and checks each (``Trial``,
``Fix``) and ranks them (``FixResult``), which the Report carries for the overview and the TUI."""
from __future__ import annotations

import dataclasses

from .display import html

# what a change sets: CompilerParams(vmem_limit_bytes=...), CompilerParams(dimension_semantics=...),
# BlockSpec(pipeline_mode=pl.Buffered(n)) of one input, the target's static params (block sizes), or
# the grid's axis order (grid= and each index_map's arguments), a Triton CompilerParams field
# (num_stages or num_warps, on a GPU)
KINDS = ("vmem_limit", "semantics", "buffered", "params", "order", "triton")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    kind: str  # one of KINDS
    kernel: str  # the pallas_call's name ("" for params, which reach every kernel)
    call: int | None  # the pallas_call's index in program order (None for params)
    # vmem_limit: bytes; semantics: one per grid axis; buffered: [input position, buffer count];
    # params: {name: value}; order: the old axis at each new position; triton: {field: value}
    value: int | list | dict
    operand: str = ""  # buffered: the input's name; order: the new order by axis name, "(j, i)"
    why: str = ""  # what the change answers (the finding, the walk's evidence)
    source: str = ""  # file:line of the pallas_call (what --patch edits)
    # ranked after the changes whose figures tie with it (Triton's num_stages=1: it compiles where
    # nothing else does, but turns the loop's pipelining off, which no time figure here shows)
    last_resort: bool = False

    @property
    def label(self) -> str:
        if self.kind == "vmem_limit":
            assert isinstance(self.value, int)
            return f"{self.kernel}: vmem_limit_bytes={self.value} ({self.value / 2 ** 20:.0f} MiB)"
        if self.kind == "semantics":
            assert isinstance(self.value, list)
            return f"{self.kernel}: dimension_semantics={tuple(self.value)}"
        if self.kind == "buffered":
            assert isinstance(self.value, list)
            return f"{self.kernel}: {self.operand} pipeline_mode=pl.Buffered({self.value[1]})"
        if self.kind == "order":
            assert isinstance(self.value, list)
            return f"{self.kernel}: grid order {self.operand or tuple(self.value)}"
        assert isinstance(self.value, dict)
        said = " ".join(f"{k}={v}" for k, v in self.value.items())
        return f"{self.kernel}: {said}" if self.kind == "triton" else said


@dataclasses.dataclass(frozen=True, kw_only=True)
class Refusal:
    """A change not tried, and why (before any compile)."""

    change: Change
    reason: str
    chip: str | None = None  # the chip it was refused for (None: every chip)


@dataclasses.dataclass(kw_only=True)
class Trial:
    """A program (unfixed, or with one change) compiled for one chip."""

    chip: str
    compiles: bool | None  # libtpu's verdict (None: no compile, e.g. the change does not apply)
    compile_error: str | None = None  # its headline when refused
    vmem_bytes: int | None = None  # the compiler's scoped VMEM figure, shared memory on a GPU (needed, when refused)
    vmem_limit_bytes: int | None = None  # the limit it was held to
    seconds: float | None = None  # libtpu's time for the whole program
    estimate_kind: str | None = None  # estimate | floor | range ("Time on kernels nobody calibrated")
    high_seconds: float | None = None  # the top of a range
    measured_seconds: float | None = None  # --measure: device time on the attached TPU
    kernel: str | None = None  # the pallas_call the compiler refused, where it says
    errors: list[str] = dataclasses.field(default_factory=list)  # "code: message" of each error finding


@dataclasses.dataclass(kw_only=True)
class Fix:
    change: Change
    trials: list[Trial]  # one per chip the change applies to
    # match | differ | failed | not checked (interpret mode vs the unfixed kernel) | unchanged (a
    # change the interpreter never sees: the program it would run is the unfixed one, not run again)
    numerics: str = "not checked"
    numerics_detail: str = ""
    gains: dict[str, float] = dataclasses.field(default_factory=dict)  # per chip: time before / after (same kind)
    recommended: list[str] = dataclasses.field(default_factory=list)  # the chips it is recommended for
    # per chip: the first error finding the variant has and the unfixed program does not (the grid
    # walk's unwritten rows): never recommended there, numerics or not
    wrong: dict[str, str] = dataclasses.field(default_factory=dict)
    # per chip: the codes of the error findings of the program as it is that the variant has not
    # (recommended there, faster or not)
    clears: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(repr=False, kw_only=True)
class FixResult:
    target: str
    chips: list[str]
    before: list[Trial]  # the unfixed program per chip
    fixes: list[Fix]  # ranked: recommended first, by gain
    refused: list[Refusal]
    best: dict[str, int]  # chip -> index in ``fixes`` of the best fix there
    # chip -> index of the best fix the source can express (not a param the command line set):
    # what --patch writes; the same as ``best`` unless the best changes a --set
    best_in_source: dict[str, int] = dataclasses.field(default_factory=dict)
    in_source: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # chip -> each such fix, best first
    # chip -> "change --set block_q=4096 to --set block_q=1024", where the best fix changes a param
    # the command line set (the user's command decides it: no patch of the source can)
    command_line: dict[str, str] = dataclasses.field(default_factory=dict)
    # "code@chip" -> the fixes (indices in ``fixes``, best first) that answer a finding of that code
    # on that chip: the overview and the TUI show them beside it
    answers: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    not_tried: list[str]  # changes this version does not try, said once
    memory: str = "VMEM"  # the on-chip memory the trials' figures are of ("shared memory" on a GPU)
    compiler: str = "libtpu"  # whose verdicts they are
    timed_by: str = "libtpu"  # whose time estimates: the compiler's simulation, or "floor" (a lower bound of the inspector's)
    ok: bool = False  # every chip compiles as it is with no error finding, or has a recommended fix
    patch: str | None = None  # --patch: the best fix's unified diff
    patch_note: str = ""  # what the patch does, or why none was written
    patch_encoding: str = "utf-8"  # the source's: what the diff's lines are written in (patching.Patch.data)

    def __repr__(self) -> str:
        return f"<FixResult {self.target}: {len(self.fixes)} fixes, {len(self.refused)} refused>"

    def _repr_html_(self) -> str:
        return html(self)
