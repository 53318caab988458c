"""Time measured on the attached TPU: the program run under jax's profiler, each kernel's device
time read back from its trace (``--measure``, ``tune --measure``, diff on a TPU).

``model`` holds the records, ``profile`` reads a trace into them (no chip needed: tests feed it
committed traces), ``on_chip`` runs a target on the chip (in a process of its own, the only one of
the inspector's that opens the chip), ``attach`` matches a measurement to a Report's kernels.
"""
from .model import KernelMeasure, Measurement

__all__ = ["KernelMeasure", "Measurement"]
