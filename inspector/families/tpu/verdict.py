"""libtpu's verdict for `inspector check`'s row of a TPU: fits or not, and its own scoped-VMEM figure."""
from __future__ import annotations

from ...base.families import CheckVerdict
from ...base.findings import Finding
from ...compilation.stage_records import Stages
from ...pallas.analysis import compiler_scoped_vmem


def check_verdict(findings: list[Finding], stages: Stages, reports: list) -> CheckVerdict:
    """What the compile said, the compile error's finding with ``findings`` where it failed."""
    err = stages.compile_error
    if err is not None:
        # an HBM refusal says nothing about VMEM: the HBM columns carry it
        return CheckVerdict(findings + [err.finding(stages.backend, view="pallas", buffers=stages.buffers)],
                            None if err.hbm else False, err.vmem.used_bytes if err.vmem else None, err.headline)
    assert stages.hlo is not None  # compiled without an error
    used = compiler_scoped_vmem(stages.hlo)
    if not used and any(r.call.interpret for r in reports):  # pallas_call(interpret=True): Mosaic never saw the kernels
        return CheckVerdict(findings, None)
    return CheckVerdict(findings, True, max(used) if used and max(used) > 0 else None)
