"""`inspector baseline`: a performance gate that needs no TPU. What the inspector computes without
one (compile status, VMEM per chip, HBM bytes and flops per kernel, libtpu's time, bundles,
spills, findings) is a pure function of the program, the chip and the compiler versions, so a
baseline saved beside the kernels and compared in CI says exactly what a change moved.

- ``targets``: the targets a command line names (a folder, a glob, a file: every INSPECT entry)
- ``record``: the figures of one target on one chip, keyed per kernel by what survives edits;
  the baseline document, written and read back (its schema checked)
- ``compare``: tolerances per figure and what moved past them
- ``work``: the figures computed (in a child process per target: jax, the user's code)

Analyses here return data; ``views/baseline.py`` prints them."""
