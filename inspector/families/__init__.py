"""The accelerator families behind the backend seam (docs/backends.md), one folder each: how to
compile for a chip of the family without the chip, what its kernels leave and who reads it. Each
family's modules sit at the layer of what they do (tests/layers.py)."""
