"""The NVIDIA GPU family (docs/backends.md): deviceless XLA:GPU compiles for the chips whose target
config ships in ``specs/``, and the readers of what those compiles leave. ``jax/``: the target
configs and the cuda topology; ``compile/``: the compile and its shared-memory refusal;
``kernels/``: the thunk sequence and ptxas. The ``Family`` object joins them on the backend seam."""
