"""Each kernel of a deviceless GPU compile with its launch (the thunk sequence) and its ptxas
figures (the PTX of its module), joined by the kernel's name, which the PTX's ``.entry`` and the
thunk share."""
from __future__ import annotations

import dataclasses

from .ptxas import PtxasKernel, ptx_entries, read_ptxas, run_ptxas
from .thunks import Thunk, kernels


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel: how it is launched, and (where ptxas ran) what it uses per thread."""

    launch: Thunk
    ptxas: PtxasKernel | None = None  # None: no ptxas here, or no PTX for this kernel
    ptxas_error: str | None = None  # ptxas refused this kernel's PTX: its message

    @property
    def name(self) -> str:
        return self.launch.name


def kernel_launches(thunk_sequence: str, ptx: dict[str, str], ptxas: str | None) -> list[KernelLaunch]:
    """Every kernel in ``thunk_sequence``, with ptxas's figures from the PTX module (``ptx``: dump
    name -> text) that defines it, when ``ptxas`` (its path) is given."""
    figures: dict[str, PtxasKernel] = {}
    errors: dict[str, str] = {}
    for text in ptx.values():
        if ptxas is None:
            break
        try:
            figures.update((k.name, k) for k in read_ptxas(run_ptxas(text, ptxas)))
        except (RuntimeError, OSError) as err:  # one module refused, or ptxas could not run: the others stand
            errors.update((entry, str(err)) for entry in ptx_entries(text))
    return [KernelLaunch(launch=t, ptxas=figures.get(t.name), ptxas_error=errors.get(t.name)) for t in kernels(thunk_sequence)]
