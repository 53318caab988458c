"""Small target functions for the tests (each kept tiny so compiles are quick)."""
import functools

import jax
import jax.numpy as jnp


def matmul(x, w):
    return jnp.tanh(x @ w)


@functools.partial(jax.jit, static_argnames=("scale",))
def jitted(x, scale: float = 2.0):
    return x * scale


def with_params(x, power: int = 2, shift: float = 0.0, flag: bool = False, mode: str = "a"):
    y = x**power + shift
    return -y if flag else y


def raises_in_trace(x):
    return jnp.dot(x, jnp.ones((3, 3)))  # wrong contracting dim for f32[4,4]


def kw_only(x, *, bias):
    return x + bias


def make_args():
    return (jax.ShapeDtypeStruct((8, 16), jnp.float32), jnp.ones((16, 4), jnp.float32))


def make_tree():
    return ({"a": jax.ShapeDtypeStruct((4,), jnp.float32), "b": [jax.ShapeDtypeStruct((2, 2), jnp.bfloat16)]},)


def tree_fn(t):
    return t["a"].sum() + t["b"][0].astype(jnp.float32).sum()


def ref_matmul(x, w):
    return jnp.tanh(jnp.dot(x, w))


NOT_CALLABLE = 3

INSPECT = {
    "matmul": {"args": "f32[8,16] f32[16,4]", "reference": "ref_matmul"},
    "jitted": {"args": "f32[4,4]"},
    "with_params": {"args": "f32[4]", "params": {"power": [3, 2], "shift": [1.5]}},
    "raises_in_trace": {"args": "f32[4,4]"},
    "tree_fn": {"args": make_tree},
    "kw_only": {"args": "f32[4] bias=f32[4]"},
    "from_callable": {"args": make_args},
}

from_callable = matmul
