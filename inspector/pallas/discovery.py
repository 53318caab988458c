"""The pallas_calls of a traced program, read once into data (``model``) by the jax boundary.
A call the reader cannot follow is a finding, never a crash of the command."""
from __future__ import annotations

from ..base.findings import Finding
from ..jax_internals.pallas import read_pallas_calls
from ..base.pallas_model import FoundCall


def read_program(program) -> tuple[list[FoundCall], list[Finding]]:
    """(every pallas_call it could read, a finding for each it could not). ``program`` is a
    stages.Program, or a bare closed jaxpr (no example values)."""
    closed = getattr(program, "closed_jaxpr", program)
    values = getattr(program, "example_values", None)
    calls, findings = [], []
    try:
        read = read_pallas_calls(closed, values, getattr(program, "interpreted", False))
    except Exception as err:  # the program itself could not be walked (a jax laid out differently)
        import jax

        return [], [Finding("warning", "analysis-failed", f"could not read the pallas_calls of this program with "
                            f"jax {jax.__version__}: {type(err).__name__}: {err}; the compile views still hold",
                            view="pallas", data={"what": "pallas_call", "why": str(err)})]
    for name, found in read:
        if isinstance(found, Exception):
            findings.append(Finding("warning", "analysis-failed", f"could not analyse the pallas_call {name}: "
                                    f"{type(found).__name__}: {found}; the compile views still hold", kernel=name,
                                    view="pallas", data={"what": "pallas_call", "why": str(found)}))
        else:
            calls.append(found)
    return calls, findings


def find_pallas_calls(program) -> list[FoundCall]:
    return read_program(program)[0]
