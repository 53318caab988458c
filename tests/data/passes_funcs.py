"""Small targets for the passes and compare tests: quick to compile, with something to fuse."""
import jax.numpy as jnp


def chain(x, y):
    """A matmul, then elementwise ops that the fusion pass folds into one kernel."""
    return jnp.tanh(x @ y) * 2.0 + 1.0


def scaled(x, factor: int = 1):
    """Another parameter, another program: the same ops on a tensor `factor` times wider."""
    return jnp.sin(jnp.tile(x, (1, factor))) * 3.0


INSPECT = {
    "chain": {"args": "f32[64,64] f32[64,64]"},
    "scaled": {"args": "f32[64,128]", "params": {"factor": [1, 2]}},
}
