"""A target that takes its time, for the tests that stop a sweep while it runs: its import sleeps
TUNE_SLEEPY_IMPORT seconds (the sweep's plan), its trace sleeps TUNE_SLEEPY_TRACE seconds (a
candidate); nothing else is slow, and it is never compiled before a test stops it."""
import os
import time

import jax.numpy as jnp

time.sleep(float(os.environ.get("TUNE_SLEEPY_IMPORT", "0")))


def scale(x, n: int = 1):
    time.sleep(float(os.environ.get("TUNE_SLEEPY_TRACE", "0")))
    return x * jnp.float32(n)


INSPECT = {"scale": {"args": "f32[8,128]", "params": {"n": [1, 2, 3]}}}
