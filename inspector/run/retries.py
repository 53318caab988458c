"""The checked interpret-mode run of a kernel, with what the interpreter refuses but the chip runs
retried under the interpreter's options that allow it (each remedy at most once, each said as an
info finding); an out-of-bounds read is an error finding and the run goes on reading NaN there."""
from __future__ import annotations

from ..base.findings import Finding
from ..jax_internals import interpret as ji
import inspector.run.interpreted as interpreted  # not "from . import": that runs the package, whose __init__ imports this module
from .races import confirm_races


def _revisit_any(found_calls) -> bool:
    return any(op.revisit == "any" for call in found_calls for op in call.info.operands if op.role == "output")


def _retried(name: str, why: str) -> Finding:
    return Finding("info", "interpret-retried", f"{name}: {why}", view="diff")


def interpret(kernel, args, kwargs, sim, cores, r_out, tol, found, name, strict):
    """(kernel outputs or None, findings, printed text, the interpreter options it needed) of the
    checked interpret-mode run. What the interpreter refuses but the chip runs is retried with the
    interpreter's options that allow it;
    an out-of-bounds read is an error finding, and the run goes on (NaN for what was read past the end)
    so the outputs are still compared."""
    findings = []
    options: dict = {}
    check = True

    def again():
        return interpreted.run(kernel, args, kwargs, sim, cores=cores, check=check, **options)

    main = again()
    for _ in range(4):  # each remedy at most once
        err = main.error
        if err is None:
            break
        if ji.zero_length_out_of_bounds(err) and "out_of_bounds_reads" not in options:
            options["out_of_bounds_reads"] = "uninitialized"
            findings.append(_retried(name, "the interpreter counts a zero-length read at the end of a buffer (a zero-length "
                                     "DMA at offset == size) as out of bounds, which the chip accepts; ran again with "
                                     "out-of-bounds reads returning uninitialized (NaN) values"))
        elif ji.race_detector_zero_wait(err) and "dma_execution_mode" not in options:
            options["dma_execution_mode"] = "eager"
            findings.append(_retried(name, "the interpreter's race detector fails (an AssertionError in its semaphore "
                                     "wait) on a zero-byte DMA wait, which the chip accepts; ran again with each DMA "
                                     "done when it starts, race detection kept"))
        elif (at := ji.interpreter_assertion(err)) and "dma_execution_mode" not in options:
            options["dma_execution_mode"] = "eager"
            findings.append(_retried(name, f"the interpreter's own assertion failed ({at}), not the kernel's; ran "
                                     "again with each DMA done when it starts"))
        elif ji.interpreter_assertion(err) and check:
            check = False
            findings.append(_retried(name, f"the interpreter's own assertion still fails ({ji.interpreter_assertion(err)}); "
                                     "ran again without race detection (races are not checked in this run)"))
        elif ji.out_of_bounds_read(err) and options.get("out_of_bounds_reads") != "uninitialized":
            read = interpreted.failure_finding(err, main.text, name, sim, strict)
            read.message += "; the outputs are compared from a run that reads NaN there"
            findings.append(read)
            options["out_of_bounds_reads"] = "uninitialized"
        else:
            break
        main = again()
    if main.error is not None:
        finding = interpreted.failure_finding(main.error, main.text, name, sim, strict)
        if finding.code == "interpret-revisit" and _revisit_any(found):
            # the interpreter ignores pl.RevisitMode.ANY (it never reloads an output block): its limit, not the kernel's bug
            reason = "the interpreter refuses the non-consecutive output revisits that pl.RevisitMode.ANY allows"
            finding = Finding("error" if strict else "info", "interpret-unsupported",
                              f"{name}: cannot run in interpret mode: {reason}; the compile views still hold "
                              f"(inspector check/show --target {sim.name})", view="diff",
                              data={"reason": reason, "detail": finding.data.get("detail", "")})
        if (at := ji.interpreter_assertion(main.error)) is not None:  # jax's interpreter, not the kernel, asserted
            reason = f"the interpreter's own assertion fails ({at}) in every setting tried"
            finding = Finding("error" if strict else "info", "interpret-unsupported",
                              f"{name}: cannot run in interpret mode: {reason}; the compile views still hold "
                              f"(inspector check/show --target {sim.name})", view="diff",
                              data={"reason": reason, "detail": interpreted.detail(main.text)})
        if finding.code == "interpret-out-of-bounds" and any(f.code == finding.code for f in findings):
            finding.message = finding.message.replace("; the outputs are compared from a run that reads NaN there", "")
        findings.append(finding)
        return None, findings, main.text, options
    if check and (ji.parse_races(main.text) or ji.races_found() or "RACE DETECTED" in main.text):
        findings.append(confirm_races(kernel, args, kwargs, sim, cores, main.output, r_out, tol, main.text, found, name, options))
    return main.output, findings, main.text, options
