"""Source locations and walks over traced programs (jaxprs)."""
from __future__ import annotations

import functools
import os
from typing import Iterator

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Each reader here degrades on a jax that lays its internals out differently: no source
# locations, a plainer jaxpr text, a generic walk; never an exception out of a capture.

@functools.cache
def exclude_own_frames() -> None:
    """Source locations (jaxpr, HLO metadata) should name the user's code, never the inspector's.
    Once per process: each registration lengthens jax's list of excluded paths and drops its
    compiled pattern and its memo of user files, so every capture registering again made each
    source lookup after it recompile a longer pattern (a fifth of the test suite's time)."""
    try:
        from jax._src import source_info_util

        source_info_util.register_exclusion(PACKAGE_DIR)
    except (ImportError, AttributeError):
        pass


def user_frame(traceback) -> tuple[str, int] | None:
    """(file, line) of the innermost user frame of a jax traceback, or None."""
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(traceback) if traceback is not None else None
        return (frame.file_name, frame.start_line) if frame else None
    except Exception:
        return None


def eqn_frame(eqn) -> tuple[str, int] | None:
    source = getattr(eqn, "source_info", None)
    return user_frame(getattr(source, "traceback", None))


def sub_jaxprs(params: dict) -> Iterator:
    """The jaxprs an equation's params hold (jit bodies, branches, loop bodies, kernels)."""
    try:
        from jax._src.core import jaxprs_in_params
    except ImportError:
        jaxprs_in_params = _jaxprs_in
    yield from jaxprs_in_params(params)


def _jaxprs_in(params: dict) -> Iterator:
    def found(value):
        if hasattr(value, "eqns") and hasattr(value, "invars"):
            yield value
        elif hasattr(getattr(value, "jaxpr", None), "eqns"):
            yield value.jaxpr
        elif isinstance(value, (tuple, list)):
            for v in value:
                yield from found(v)

    for value in params.values():
        yield from found(value)


def walk_eqns(jaxpr) -> Iterator:
    """Every equation, nested jaxprs (jit, scan, cond, custom_vjp, pallas kernels) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in sub_jaxprs(eqn.params):
            yield from walk_eqns(sub)


def eqn_outputs(eqn) -> str:
    """The equation's output types, e.g. "f32[2,256,256]"."""
    return " ".join(str(v.aval.str_short()) if hasattr(v.aval, "str_short") else str(v.aval) for v in eqn.outvars)


def print_jaxpr(closed_jaxpr) -> str:
    try:
        return closed_jaxpr.jaxpr.pretty_print(source_info=True, use_color=False)
    except Exception:  # without source locations: `l` has nothing to link from the jaxpr
        pass
    try:
        return str(closed_jaxpr)
    except Exception as err:
        import jax

        return f"(jax {jax.__version__} could not print this jaxpr: {type(err).__name__}: {err})"


def eval_jaxpr(closed_jaxpr, *args):
    from jax._src import core

    return core.eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
