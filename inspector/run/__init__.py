"""`inspector diff`: run a function and its reference on the same inputs and say where they differ.

Modules: ``run`` (the diff: the trace, the reference's run, the verdict), ``interpreted`` (TPU
interpret mode as a chip would run it: kernel exceptions, interpreter limits), ``retries`` (the
checked interpret-mode run, what the interpreter refuses retried), ``races`` (races and DMA hazards
confirmed by rerunning), ``mesh`` (the CPU devices a sharded target runs on), ``trees`` (the output
trees compared, folded onto the kernel's blocks), ``outputs`` (tree structure, shapes, dtypes,
values, error maps), ``tolerance`` (atol/rtol given, or derived from the dtype and the terms the
reference sums), ``gradients`` (the vjp of both compared), ``timing`` (device or wall-clock time),
``inputs`` (seeded inputs, the memory check), ``capture`` (the interpreter's prints kept off the
terminal), ``result`` (the dataclasses the views read), ``fix_numerics`` (`inspector fix`'s
check: a variant against the unfixed kernel, in interpret mode).
"""
from .outputs import MANTISSA_BITS, compare, error_map
from .tolerance import TOLERANCES
from .inputs import make_inputs
from .result import BadBlock, DiffResult, ErrorMap, LeafDiff, Timing, Tolerance
from .run import check_tolerance, run_diff

__all__ = ["BadBlock", "DiffResult", "ErrorMap", "LeafDiff", "MANTISSA_BITS", "TOLERANCES", "Timing", "Tolerance", "check_tolerance",
           "compare", "error_map", "make_inputs", "run_diff"]
