"""Targets that misbehave: exit, print, kill their process, take long to compile."""
import os
import sys

import jax.numpy as jnp


def exits_0(x):
    sys.exit(0)


def exits_5(x):
    sys.exit(5)


def exits_message(x):
    sys.exit("giving up")


def raises_key_error(x):
    return {}["missing"]


def prints(x):
    print("the function says hi")
    return x * 2


def hard_exit(x):
    os._exit(7)


def make_args_exits():
    sys.exit(4)


def make_args_raises():
    raise RuntimeError("no inputs today")


def slow_compile(x):
    """Marks the file named by INSPECTOR_TEST_MARK when traced, then takes seconds to compile."""
    if os.environ.get("INSPECTOR_TEST_MARK"):
        open(os.environ["INSPECTOR_TEST_MARK"], "w").close()
    for i in range(300):
        x = jnp.tanh(x @ x.T) * (i + 1) + jnp.sin(x[::-1])
    return x


def raises_keyboard_interrupt(x):
    raise KeyboardInterrupt  # the user's own, not a Ctrl-C: a failure of the function


def no_reference(x):
    return x + 1


INSPECT = {
    "exits_0": {"args": "f32[4]"},
    "exits_5": {"args": "f32[4]"},
    "exits_message": {"args": "f32[4]"},
    "raises_key_error": {"args": "f32[4]"},
    "prints": {"args": "f32[4]"},
    "hard_exit": {"args": "f32[4]"},
    "args_exit": {"args": make_args_exits},
    "args_raise": {"args": make_args_raises},
    "slow_compile": {"args": "f32[64,64]"},
    "no_reference": {"args": "f32[4]"},
    "raises_keyboard_interrupt": {"args": "f32[4]"},
}
args_exit = args_raise = no_reference
