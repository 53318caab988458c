"""The files a deviceless XLA:GPU compile dumps when its options ask (``xla_dump_to``), read by name:
the thunk sequence (each kernel's launch) and each module's PTX, beside the memory-usage report.
Below the compile path, which asks for them (compilation/xla_compile.py, compile/deviceless.py);
the kernels' readers (``kernels/``) parse them."""
from __future__ import annotations

import os

# the dumps kept, by how the file's name ends (the module's prefix "module_0001.jit_f." is dropped)
_KEPT = (".thunk_sequence.txt", ".ptx", "memory-usage-report.txt")


def _short_name(file: str) -> str:
    """"module_0001.jit_f.thunk_sequence.txt" -> "thunk_sequence.txt"; "module_0001.jit_f.3.ptx" -> "3.ptx"."""
    parts = file.split(".")
    return ".".join(parts[2:]) if file.startswith("module_") and len(parts) > 2 else file


def read_dumps(folder: str) -> dict[str, str]:
    """The dumps a GPU compile left in ``folder`` that the GPU readers take (the thunk sequence, each non-empty PTX)."""
    dumps = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith(_KEPT):
            with open(os.path.join(folder, file), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            if text.strip():  # XLA writes an empty PTX for a module with no kernel
                dumps[_short_name(file)] = text
    return dumps
