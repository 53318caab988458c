"""The thunk sequence XLA:GPU dumps (``*.thunk_sequence.txt``): the program's steps in order, each
kernel with its launch. A kernel's line::

    001: kCustomKernel [source | next=002 (1)] gemm_fusion_dot grid: [2048, 1, 1] threads: [64, 1, 1]  shared_memory: 1024 bytes

Other steps (collectives, copies, memsets) have a kind and a name only. ``shared_memory`` is the
dynamic shared memory the launch asks for: for a Triton kernel, the whole of its buffers (ptxas
does not count dynamic shared memory)."""
from __future__ import annotations

import dataclasses
import re

_STEP = re.compile(r"^\s*(\d+):\s+(k\w+)\s+\[[^\]]*\]\s+(\S+)(.*)$")
_LAUNCH = re.compile(r"grid:\s*\[([\d,\s]+)\]\s+threads:\s*\[([\d,\s]+)\]\s+shared_memory:\s*(\d+)\s*bytes")


@dataclasses.dataclass(frozen=True)
class Thunk:
    """One step of the program; the launch fields are None for a step that is no kernel."""

    index: int
    kind: str  # "kCustomKernel", "kKernel", "kAllReduce", ...
    name: str  # the kernel's name: its HLO fusion's (or a Pallas call's kernel function's)
    grid: tuple[int, ...] | None = None  # blocks (x, y, z)
    threads: tuple[int, ...] | None = None  # threads per block (x, y, z)
    shared_memory_bytes: int | None = None

    @property
    def is_kernel(self) -> bool:
        return self.grid is not None

    @property
    def blocks(self) -> int | None:
        return _product(self.grid)

    @property
    def threads_per_block(self) -> int | None:
        return _product(self.threads)


def _product(dims: tuple[int, ...] | None) -> int | None:
    if dims is None:
        return None
    total = 1
    for d in dims:
        total *= d
    return total


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def read_thunk_sequence(text: str) -> list[Thunk]:
    """Every step of a thunk sequence dump, in order (nested steps too, as they are listed)."""
    thunks = []
    for line in text.splitlines():
        step = _STEP.match(line)
        if step is None:
            continue
        launch = _LAUNCH.search(step.group(4))
        thunks.append(Thunk(index=int(step.group(1)), kind=step.group(2), name=step.group(3),
                            grid=_dims(launch.group(1)) if launch else None,
                            threads=_dims(launch.group(2)) if launch else None,
                            shared_memory_bytes=int(launch.group(3)) if launch else None))
    return thunks


def kernels(text: str) -> list[Thunk]:
    """The steps of a thunk sequence that launch a kernel."""
    return [t for t in read_thunk_sequence(text) if t.is_kernel]
