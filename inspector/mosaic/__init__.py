"""Mosaic, the Pallas TPU compiler: the one place that reads its undocumented output (compile
errors, pass-by-pass dumps) and turns it into the inspector's data.

Modules: ``error_kinds`` (the table of error kinds: pattern, rule, fix, versions seen),
``explain`` (a failed lowering or compile -> MosaicFailure at the user's source line),
``block_guard`` (block indices a compile would abort on), ``locations`` (MLIR locations ->
file:line), ``dumps`` (the pass dumps -> passes, layouts, relayouts), ``passes`` (a compile in
a fresh child process with the dump flags).
"""
