"""A compilation-pipeline inspector for JAX functions and Pallas kernels (the core, no UI)."""

__version__ = "0.1.0"
