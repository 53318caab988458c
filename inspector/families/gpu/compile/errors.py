"""XLA:GPU's refusal of a kernel over the shared-memory budget, read from its message:
``RESOURCE_EXHAUSTED: Shared memory size limit exceeded: requested 524288, available: 232448``
(the kernel's dynamic shared memory against the target's opt-in limit per block)."""
from __future__ import annotations

import dataclasses
import re

_REFUSAL = re.compile(r"Shared memory size limit exceeded: requested (\d+), available: (\d+)")


@dataclasses.dataclass(frozen=True)
class SharedMemoryRefusal:
    """The compiler's own figures for a kernel that does not fit shared memory."""

    requested_bytes: int
    available_bytes: int
    message: str  # the compiler's line, as it said it

    @property
    def exceeded_by_bytes(self) -> int:
        return self.requested_bytes - self.available_bytes

    memory = "shared memory"


def shared_memory_refusal(text: str) -> SharedMemoryRefusal | None:
    """The refusal in ``text`` (an exception's message, a log), or None when it holds none."""
    match = _REFUSAL.search(text)
    if match is None:
        return None
    line = next(line for line in text.splitlines() if match.group(0) in line).strip()
    return SharedMemoryRefusal(requested_bytes=int(match.group(1)), available_bytes=int(match.group(2)), message=line)
