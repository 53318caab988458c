"""The bottom layer: what every other layer uses and that uses nothing of theirs. Errors and
exit codes, units and their formatting, the chip table (every hardware figure with its source),
findings and their codes, argument specs, the process settings made before jax starts
(``environment``), atomic writes and temporary folders. Nothing here imports jax at module top."""
