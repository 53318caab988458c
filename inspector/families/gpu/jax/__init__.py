"""The GPU family's jax boundary (layer jax_internals): XLA's target configs read, and the cuda
topology jax builds from one without a GPU (jax's private plugin registry where it must)."""
