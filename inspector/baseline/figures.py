"""What a baseline holds, as data: its schema's name, each figure with its unit, and the keys of
targets and kernels. Read by the record (record.py) and the check of a file (schema.py)."""
from __future__ import annotations

import re

SCHEMA = "inspector-baseline/1"
PROGRAM = "(program)"  # the kernel column of a figure of the whole program on a chip

# figure -> (unit, what it is); the unit says how it prints and whether a tolerance applies
FIGURES: dict[str, tuple[str, str]] = {
    "compiled": ("flag", "the compiler (libtpu, XLA:GPU) compiled the program (false: it refused it)"),
    "error_kind": ("text", "why the compile failed: the finding's code (compile-vmem-oom, mosaic-...)"),
    "vmem_estimate": ("bytes", "the inspector's VMEM (on a GPU: shared memory) estimate (the largest Pallas kernel's; "
                               "per kernel: its own)"),
    "vmem_fits": ("flag", "the estimate's VMEM verdict (null: undecided)"),
    "compiler_vmem": ("bytes", "the compiler's own figure: libtpu's scoped VMEM, XLA:GPU's launch shared memory "
                               "(used, or asked for when it refused)"),
    "compiler_fits": ("flag", "the compiler's VMEM (shared memory) verdict"),
    "hbm_device": ("bytes", "HBM per device: arguments, outputs and temporaries (the compile's buffer assignment)"),
    "hbm_fits": ("flag", "the program fits the chip's HBM"),
    "hbm_bytes": ("bytes", "HBM traffic, read and written (per kernel; the program's sum)"),
    "flops": ("count", "floating-point operations"),
    "time": ("time", "libtpu's estimated time (--time): an estimate, a floor or a range; on a GPU a floor"),
    "bundles": ("count", "VLIW bundles (per grid step of a Pallas kernel; --time)"),
    "spills": ("count", "spill stores and fills (per grid step; --time)"),
    "registers": ("count", "registers per thread (a GPU kernel's, ptxas)"),
    "spill_bytes": ("bytes", "spill stores and loads per thread (a GPU kernel's, ptxas)"),
    "findings": ("codes", "the findings' codes"),
}
NUMERIC = tuple(name for name, (unit, _) in FIGURES.items() if unit in ("bytes", "count", "time"))

_NUMBERED = re.compile(r"\.\d+$")


def stem(name: str) -> str:
    """An HLO op's name without XLA's numbering: fusion.12 -> fusion, matmul.1 -> matmul."""
    return _NUMBERED.sub("", name)


def target_label(spec: str, sets: list[str]) -> str:
    """The key of a target: its spec and its --set values (sorted: their order changes nothing)."""
    return " ".join([spec, *(f"--set {s}" for s in sorted(sets))])
