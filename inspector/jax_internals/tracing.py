"""Source locations and walks over traced programs (jaxprs)."""
from __future__ import annotations

import os
from typing import Iterator

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def exclude_own_frames() -> None:
    """Source locations (jaxpr, HLO metadata) should name the user's code, never the inspector's."""
    from jax._src import source_info_util

    source_info_util.register_exclusion(_PACKAGE_DIR)


def user_frame(traceback) -> tuple[str, int] | None:
    """(file, line) of the innermost user frame of a jax traceback, or None."""
    from jax._src import source_info_util

    frame = source_info_util.user_frame(traceback) if traceback is not None else None
    return (frame.file_name, frame.start_line) if frame else None


def eqn_frame(eqn) -> tuple[str, int] | None:
    return user_frame(eqn.source_info.traceback)


def sub_jaxprs(params: dict) -> Iterator:
    """The jaxprs an equation's params hold (jit bodies, branches, loop bodies, kernels)."""
    from jax._src import core

    yield from core.jaxprs_in_params(params)


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
    return closed_jaxpr.jaxpr.pretty_print(source_info=True, use_color=False)


def eval_jaxpr(closed_jaxpr, *args):
    from jax._src import core

    return core.eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
