import jax.numpy as jnp


def double(x):
    return 2 * x
