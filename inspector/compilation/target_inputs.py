"""A target's example inputs: given as objects (the Python API), as a shape spec (``--args`` or
INSPECT's ``"args"``), or made by INSPECT's callable; checked against the function's signature."""
from __future__ import annotations

from typing import Callable

from ..base.errors import TargetFailure, UsageError
from .inspect_entry import closest
from ..base.specs import ArgSpec, parse_specs
from ..base.user_code import describe_error, reraise_interrupt


def _abstract(specs: list[ArgSpec]) -> tuple[tuple, dict]:
    import jax  # only here: --args is parsed (and refused) before jax loads
    import jax.numpy as jnp

    def sds(s: ArgSpec):
        return jax.ShapeDtypeStruct(s.shape, jnp.dtype(s.dtype))

    args = tuple(sds(s) for s in specs if s.name is None)
    kwargs = {s.name: sds(s) for s in specs if s.name is not None}
    return args, kwargs


def inputs_from_specs(text: str) -> tuple[tuple, dict]:
    """Shape specs (``"f32[8,128] k=i32[16]"``) as ShapeDtypeStructs: (positional, keyword)."""
    return _abstract(parse_specs(text))


def _from_callable(make: Callable, spec: str) -> tuple[tuple, dict]:
    try:
        made = make()
    except Exception as err:
        raise UsageError(describe_error(err, None, f"raised by the INSPECT args of {spec}")) from err
    except BaseException as err:
        reraise_interrupt(err)
        raise TargetFailure(describe_error(err, None, f"raised by the INSPECT args of {spec}")) from err
    if made is None or isinstance(made, (str, bytes)) or (
            isinstance(made, (tuple, list, dict)) and any(isinstance(v, (str, bytes)) for v in (made.values() if isinstance(made, dict) else made))):
        got = "None (a missing return?)" if made is None else f"a {type(made).__name__} holding text" if not isinstance(made, (str, bytes)) else f"the text {str(made)[:40]!r}"
        raise UsageError(f"{spec}: INSPECT args returned {got}: return the inputs as arrays or jax.ShapeDtypeStructs "
                         "(a tuple for several, a dict for keyword inputs), or give a shape spec string such as \"f32[8,128]\"")
    if isinstance(made, dict):
        return (), dict(made)
    if isinstance(made, (tuple, list)):
        return tuple(made), {}
    return (made,), {}


def example_inputs(module, entry: dict, sig, spec: str, func: str, *, args: str | None = None,
                   inputs: tuple[tuple, dict] | None = None) -> tuple[tuple, dict]:
    """(positional, keyword) example inputs: the API's objects, else ``--args``, else INSPECT's
    ``"args"`` (a shape spec or a callable that makes them); a function with no required parameter
    needs none. A UsageError says how to give them where there are none."""
    if inputs is not None:
        return tuple(inputs[0]), dict(inputs[1])
    if args is not None:
        return _abstract(parse_specs(args))
    if "args" in entry:
        given = entry["args"]
        if not isinstance(given, str) and not callable(given):
            raise UsageError(f"{spec}: INSPECT args must be a shape spec string such as \"f32[8,128]\" or a callable "
                             f"returning the inputs, not a {type(given).__name__}")
        return _abstract(parse_specs(given)) if isinstance(given, str) else _from_callable(given, spec)
    if sig is not None and not any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                                   for p in sig.parameters.values()):
        return (), {}  # a function of no inputs (a constant, a generated table) needs none
    # an INSPECT entry named after no function of the file may be this one's, mistyped
    table = getattr(module, "INSPECT", None) or {}
    raise _no_inputs(spec, func, sig, [k for k in table if not callable(getattr(module, str(k), None))])


def _no_inputs(spec: str, func: str, sig, orphans: list) -> UsageError:
    params = [p for p in (sig.parameters.values() if sig else []) if p.default is p.empty]
    example = " ".join("f32[8,128]" for _ in params) or "f32[8,128]"
    close = closest(func, orphans)
    mistyped = f" (INSPECT has no entry {func!r}; is {close!r} meant to be it?)" if close else ""
    return UsageError(
        f"{spec}: no example inputs{mistyped}. Give them with --args \"{example}\" or in the file: "
        f"INSPECT = {{\"{func}\": {{\"args\": \"{example}\"}}}}"
    )


def check_arity(sig, args: tuple, kwargs: dict, params: dict, spec: str) -> None:
    """The inputs and static params must bind to the function's signature (a usage error otherwise)."""
    if sig is None:
        return
    try:
        sig.bind(*args, **kwargs, **params)
    except TypeError as err:
        required = [p.name for p in sig.parameters.values() if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        raise UsageError(f"{spec}: the inputs do not match the signature ({err}); it needs {len(required)} inputs ({', '.join(required)}) and got {len(args)} positional, {len(kwargs)} keyword") from err


def make_inputs(target, seed: int):
    """Concrete arrays for every input of a Target (the diff's and the measurement's): INSPECT's arrays as given, random ones for shape specs
    (normal floats; integers in [0, 16) unless INSPECT's "int_ranges" names a range)."""
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    ranges = target.options.get("int_ranges", {})

    def fill(name, leaf):
        if isinstance(leaf, (jax.Array, np.ndarray)):
            return jnp.asarray(leaf)
        if not hasattr(leaf, "shape"):
            return leaf
        dtype = np.dtype(leaf.dtype)
        if np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16":
            return jnp.asarray(rng.standard_normal(leaf.shape, dtype=np.float32)).astype(leaf.dtype)
        if dtype == np.bool_:
            return jnp.asarray(rng.random(leaf.shape) < 0.5)
        lo, hi = ranges.get(name, (0, 16))
        return jnp.asarray(rng.integers(lo, hi, leaf.shape)).astype(leaf.dtype)

    args = tuple(jax.tree.map(functools.partial(fill, name), a) for name, a in zip(target.arg_names, target.args))
    kwargs = {k: jax.tree.map(functools.partial(fill, k), v) for k, v in target.kwargs.items()}
    return args, kwargs
