"""ptxas on a kernel's PTX: its registers per thread, spills, stack and barriers, as ``ptxas -v``
says them, for the architecture the PTX targets (``.target sm_90a``). ptxas comes from the pinned
``nvidia-cuda-nvcc-cu12`` wheel (the GPU extra), else from PATH; without it there are no register
figures, and ``ptxas_path`` returning None says so. Its major version must match the CUDA of the
jax plugin that wrote the PTX (the PTX ``.version``)."""
from __future__ import annotations

import dataclasses
import importlib
import os
import re
import shutil
import subprocess
import tempfile

_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)
_ENTRY = re.compile(r"^\s*\.(?:visible\s+)?\.entry\s+([\w$.]+)", re.MULTILINE)
_FUNCTION = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_ADVICE = re.compile(r"ptxas (?:info|warning)\s*:\s*\(?(C\d+)\)?\s*(.*)")
TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class PtxasKernel:
    """ptxas's figures for one entry function (per thread unless said)."""

    name: str
    arch: str  # "sm_90a"
    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_frame_bytes: int = 0
    barriers: int = 0
    static_shared_bytes: int = 0  # the kernel's static shared memory (a launch's dynamic figure is apart)
    advisories: tuple[str, ...] = ()  # e.g. "C7514: ... wgmma serialized ..."

    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)


def ptx_arch(ptx: str) -> str | None:
    """The architecture the PTX targets (``sm_90a``), None when it names none."""
    match = _TARGET.search(ptx)
    return match.group(1) if match else None


def ptx_entries(ptx: str) -> list[str]:
    """The kernels (``.entry`` functions) the PTX defines."""
    return _ENTRY.findall(ptx)


def ptxas_path() -> str | None:
    """The ptxas of the installed ``nvidia-cuda-nvcc-cu12`` wheel, else the one on PATH, else None."""
    try:  # by name: the GPU extra's wheel, which an environment without the extra lacks
        folders = list(getattr(importlib.import_module("nvidia.cuda_nvcc"), "__path__", []))
    except ImportError:
        folders = []
    for folder in folders:
        candidate = os.path.join(folder, "bin", "ptxas")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("ptxas")


def run_ptxas(ptx: str, ptxas: str, *, arch: str | None = None) -> str:
    """``ptxas -v`` on ``ptx``: its report (stderr), or RuntimeError with ptxas's message when it
    refuses the PTX. The cubin is thrown away."""
    arch = arch or ptx_arch(ptx) or "sm_90a"
    with tempfile.TemporaryDirectory(prefix="inspector-ptxas-") as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(ptx)
        try:
            done = subprocess.run([ptxas, "-v", f"-arch={arch}", source, "-o", os.path.join(folder, "kernel.cubin")],
                                  capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as err:
            raise RuntimeError(f"ptxas ran past {TIMEOUT_S} s on the PTX ({arch})") from err
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().replace(source, "kernel.ptx")
        raise RuntimeError(f"ptxas refused the PTX ({arch}): {message.splitlines()[-1] if message else done.returncode}")
    return done.stderr + done.stdout


def read_ptxas(report: str) -> list[PtxasKernel]:
    """Each entry function of a ``ptxas -v`` report, with its registers, spills and advisories."""
    found: list[PtxasKernel] = []
    current: dict | None = None
    for line in report.splitlines():
        if (function := _FUNCTION.search(line)) is not None:
            if current is not None and "registers" in current:
                found.append(PtxasKernel(**current))
            current = {"name": function.group(1), "arch": function.group(2), "advisories": ()}
        elif current is None:
            continue
        elif (frame := _FRAME.search(line)) is not None:
            current.update(stack_frame_bytes=int(frame.group(1)), spill_store_bytes=int(frame.group(2)),
                           spill_load_bytes=int(frame.group(3)))
        elif (used := _USED.search(line)) is not None:
            current.update(registers=int(used.group(1)), barriers=int(used.group(2) or 0),
                           static_shared_bytes=int(used.group(3) or 0))
        elif (advice := _ADVICE.search(line)) is not None:
            current["advisories"] += (f"{advice.group(1)}: {advice.group(2).strip()}",)
    if current is not None and "registers" in current:
        found.append(PtxasKernel(**current))
    return found
