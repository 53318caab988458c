"""XLA:GPU's refusal of a kernel over the shared-memory budget, read from its message:
``RESOURCE_EXHAUSTED: Shared memory size limit exceeded: requested 524288, available: 232448``
(the kernel's dynamic shared memory against the target's opt-in limit per block). A Mosaic GPU
kernel is refused earlier, by Mosaic GPU at lowering, against Hopper's 227 KiB whatever the target:
``Mosaic GPU kernel exceeds available shared memory: smem_bytes=393216 > max_smem_bytes=232448``."""
from __future__ import annotations

import dataclasses
import re

_REFUSAL = re.compile(r"Shared memory size limit exceeded: requested (\d+), available: (\d+)")
_MOSAIC_REFUSAL = re.compile(r"Mosaic GPU kernel exceeds available shared memory: smem_bytes=(\d+) > max_smem_bytes=(\d+)")


@dataclasses.dataclass(frozen=True)
class SharedMemoryRefusal:
    """The compiler's own figures for a kernel that does not fit shared memory."""

    requested_bytes: int
    available_bytes: int
    message: str  # the compiler's line, as it said it
    compiler: str = "XLA:GPU"  # or "Mosaic GPU": which refused (what to change differs)

    @property
    def exceeded_by_bytes(self) -> int:
        return self.requested_bytes - self.available_bytes

    memory = "shared memory"


def shared_memory_refusal(text: str) -> SharedMemoryRefusal | None:
    """The refusal in ``text`` (an exception's message, a log), or None when it holds none."""
    for pattern, compiler in ((_REFUSAL, "XLA:GPU"), (_MOSAIC_REFUSAL, "Mosaic GPU")):
        match = pattern.search(text)
        if match is not None:
            line = next(line for line in text.splitlines() if match.group(0) in line).strip()
            return SharedMemoryRefusal(requested_bytes=int(match.group(1)), available_bytes=int(match.group(2)),
                                       message=line[line.index(match.group(0)):] if compiler == "Mosaic GPU" else line,
                                       compiler=compiler)
    return None
