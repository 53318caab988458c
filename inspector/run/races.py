"""A race the interpreter's detector reports, confirmed by rerunning: the kernel runs again on one
core and with its "parallel" steps (or its DMAs) in another order, and the race is an error only
when some ordering's outputs differ from the reference. A race where a DMA is one side is a DMA
hazard, reported with the lines that started the DMAs."""
from __future__ import annotations

from ..base.findings import Finding
from ..jax_internals import interpret as ji
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .trees import wrong


def confirm_races(kernel, args, kwargs, chip, cores, main_out, ref_out, tol, text, found, name, options=None) -> Finding:
    """Rerun a racy kernel in other orderings: a race is an error only when some ordering's
    outputs differ from the reference. A race where a DMA is one side (a DMA hazard: a writeback
    and the next prefetch into the same buffer, a store into a buffer a DMA still reads) is
    reported as such, with the lines that started the DMAs."""
    options = dict(options or {})
    if cores > 1:
        others = [("one core", dict(options, cores=1)), ("the parallel steps in another order", dict(options, cores=cores, seed=1))]
    else:
        flip = ("DMAs done on wait", "on_wait") if options.get("dma_execution_mode") == "eager" else ("eager DMAs", "eager")
        others = [(flip[0], dict(options, cores=1, dma_execution_mode=flip[1])), ("another order", dict(options, cores=1, seed=1))]
    verdicts = [(f"{cores} cores" if cores > 1 else "as checked", wrong(main_out, ref_out, tol))]
    for label, kw in others:
        outcome = interpreted.run(kernel, args, kwargs, chip, check=False, **kw)
        verdicts.append((label, None if outcome.error is not None else wrong(outcome.output, ref_out, tol)))
    reports = ji.parse_races(text)
    first = interpreted.describe_race(reports[0], found) if reports else "(the interpreter's report was not captured)"
    dma = bool(reports) and any(reports[0].dmas)
    kind = "DMA hazard" if dma else "race"
    count = f"{len(reports)} {kind}{'s' if len(reports) != 1 else ''}" if reports else f"a {kind}"
    if cores > 1:
        where = f"{name} as {chip.name} ({cores} TensorCores sharing the grid): {count}, first {first}"
    else:
        where = f"{name} as {chip.name}: {count}, first {first}"
    runs = "; ".join(f"{label}: {'matches' if bad == 0 else 'did not finish' if bad is None else f'{bad} wrong'}"
                     for label, bad in verdicts)
    benign = all(bad == 0 for _, bad in verdicts)
    code = "dma-hazard" if dma else "race-detected"
    data = {"chip": chip.name, "cores": cores, "runs": {label: bad for label, bad in verdicts},
            "races": [r.__dict__ for r in reports[:20]], "detail": interpreted.detail(text)}
    if dma:
        fix = ("wait for the DMA that reads or writes the buffer before the next access to it (a writeback before "
               "the next prefetch into the same buffer), or give the two their own buffers (double buffering)")
        if benign:
            return Finding("warning", code, f"{where}. The outputs match the reference in every ordering tried ({runs}), "
                           f"but on the chip the two overlap: {fix}", view="diff", data=data)
        return Finding("error", code, f"{where}. Confirmed: the outputs depend on when the DMAs run ({runs}); {fix}",
                       view="diff", data=data)
    if benign:
        return Finding("warning", code, f"{where}. The outputs match the reference in every ordering tried "
                       f"({runs}): benign here (the same values written twice?), but it depends on the data", view="diff", data=data)
    return Finding("error", code, f"{where}. Confirmed: the outputs depend on the ordering ({runs}); "
                   "make the axis \"arbitrary\" or give each parallel step its own output block", view="diff", data=data)
