"""A change ``inspector fix`` tries on a program, as plain data: the jax boundary applies it to the
traced program (jax_internals/variants.py), the Pallas analysis proposes it (pallas/fixes.py), the
patch writer turns it into an edit of the user's source (inspector/patching.py)."""
from __future__ import annotations

import dataclasses

# what a change sets: CompilerParams(vmem_limit_bytes=...), CompilerParams(dimension_semantics=...),
# BlockSpec(pipeline_mode=pl.Buffered(n)) of one input, or the target's static params (block sizes)
KINDS = ("vmem_limit", "semantics", "buffered", "params")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Change:
    kind: str  # one of KINDS
    kernel: str  # the pallas_call's name ("" for params, which reach every kernel)
    call: int | None  # the pallas_call's index in program order (None for params)
    # vmem_limit: bytes; semantics: one per grid axis; buffered: [input position, buffer count];
    # params: {name: value}
    value: int | list | dict
    operand: str = ""  # buffered: the input's name
    why: str = ""  # what the change answers (the finding, the walk's evidence)
    source: str = ""  # file:line of the pallas_call (what --patch edits)

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
        assert isinstance(self.value, dict)
        return " ".join(f"{k}={v}" for k, v in self.value.items())
