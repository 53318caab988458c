"""Load ``path/to/file.py:func`` or ``package.module:func`` with its inputs, reference and params.

Inputs, reference and static params come from the command line or from the file's optional
``INSPECT`` dict (see the README); the command line wins. Nothing here imports jax at module
level so that argument errors answer before jax loads. The pieces: ``user_files`` (importing the
file), ``static_params`` (``--set`` and INSPECT's params), ``target_inputs`` (the example inputs),
``inspect_entry`` (INSPECT's entry checked), ``sharding`` (the mesh and shardings).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import os
from pathlib import Path
from typing import Any, Callable

from ..base.errors import UsageError
from .inspect_entry import OPTION_KEYS, check_int_ranges, inspect_entry
from .sharding import check_mesh, parse_mesh, parse_specs
from .static_params import check_param_names, signature_of, static_params
from .target_inputs import check_arity, example_inputs
from ..base.user_code import short_path
from .user_files import load_module, resolve_callable, split_spec


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """A function ready to trace: example inputs, static params and an optional reference."""

    spec: str  # what the user typed, e.g. samples/attention.py:flash
    name: str
    fn: Callable
    file: str | None
    line: int | None
    args: tuple  # positional example inputs (ShapeDtypeStructs or arrays, any pytree)
    kwargs: dict  # keyword example inputs
    params: dict  # static keyword params, baked into the trace
    param_choices: dict  # every value INSPECT offers per param (first is the default)
    options: dict  # the rest of the INSPECT entry: atol, rtol, int_ranges (used by diff)
    reference: Callable | None
    reference_name: str | None
    source_hash: str  # of the target file, part of the in-process cache key
    arg_names: list[str]  # a name for each positional input, from the signature where it has one
    mesh: dict | None = None  # axis sizes by name (one may be -1): the program is sharded over a topology
    shardings: Any = None  # one PartitionSpec pytree per positional input: callable(mesh), "P(...) P(...)" or None

    def call(self, *args, **kwargs):
        return self.fn(*args, **kwargs, **self.params)


def _reference(module, ref_cli: str | None, entry: dict, spec: str) -> tuple[Callable | None, str | None]:
    """The reference and its name: ``--ref`` (``file.py:function``, or a function of the target's file), else INSPECT's."""
    if ref_cli:
        where, func = split_spec(ref_cli) if ":" in ref_cli else (None, ref_cli)
        mod = load_module(where) if where else module
        return resolve_callable(mod, func, ref_cli), ref_cli
    ref = entry.get("reference")
    if ref is None:
        return None, None
    if callable(ref):
        return ref, getattr(ref, "__name__", "reference")
    return resolve_callable(module, str(ref), f"{spec} (INSPECT reference)"), str(ref)


def _sharding(entry: dict, mesh: str | None, shard: str | None, spec: str) -> tuple[dict | None, Any]:
    """The mesh and shardings: the command line's, else INSPECT's; parsed, never evaluated."""
    axes = parse_mesh(mesh) if mesh is not None else (
        check_mesh(entry["mesh"], f"{spec}: INSPECT mesh") if entry.get("mesh") is not None else None)
    given = shard if shard is not None else entry.get("shardings")
    if isinstance(given, str):
        parse_specs(given)  # a bad spec answers now, before jax loads
    elif given is not None and not callable(given):
        raise UsageError(f"{spec}: INSPECT shardings must be a callable taking the mesh or a string such as \"P('data',None) P()\"")
    if given is not None and axes is None:
        raise UsageError(f"{spec}: shardings without a mesh: give --mesh data=4,model=4 or INSPECT's \"mesh\"")
    return axes, given


def load_target(spec: str, args: str | None = None, ref: str | None = None, sets: list[str] | None = None,
                mesh: str | None = None, shard: str | None = None, *,
                inputs: tuple[tuple, dict] | None = None, params: dict | None = None,
                reference: Callable | None = None) -> Target:
    """Everything the stages need to trace ``spec``; raises UsageError with a one-line message.
    The Python API gives ``inputs`` (positional, keyword: arrays or ShapeDtypeStructs), ``params``
    (static values, over INSPECT's) and ``reference`` as objects rather than command-line text."""
    where, func = split_spec(spec)
    module = load_module(where)
    fn = resolve_callable(module, func, spec)
    entry = inspect_entry(module, spec, func)
    sig = signature_of(fn)
    params_, choices = static_params(sig, entry, sets or [], spec, func)
    if params:
        check_param_names(sig, params, spec, "params={name}=...")
        params_.update(params)
    params = params_
    pos, kw = example_inputs(module, entry, sig, spec, func, args=args, inputs=inputs)
    check_arity(sig, pos, kw, params, spec)
    axes, shardings = _sharding(entry, mesh, shard, spec)
    reference, reference_name = ((reference, getattr(reference, "__name__", "reference")) if reference is not None
                                 else _reference(module, ref, entry, spec))

    file = getattr(module, "__file__", None)
    code = getattr(inspect.unwrap(fn), "__code__", None)
    source_hash = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if sig else []
    arg_names = [names[i] if i < len(names) else f"arg{i}" for i in range(len(pos))]
    check_int_ranges(entry, arg_names + list(kw), spec, func, {**dict(zip(arg_names, pos)), **kw})
    return Target(
        arg_names=arg_names, spec=spec, options={k: entry[k] for k in OPTION_KEYS if k in entry},
        name=func, fn=fn, file=file, line=code.co_firstlineno if code else None,
        args=pos, kwargs=kw, params=params, param_choices=choices,
        reference=reference, reference_name=reference_name, source_hash=source_hash, mesh=axes, shardings=shardings,
    )


def callable_target(fn: Callable, args: tuple, kwargs: dict, *, params: dict | None = None,
                    reference: Callable | None = None, options: dict | None = None) -> Target:
    """The Target of a function object (the Python API): what ``load_target`` makes of a
    ``file.py:function``, with the inputs, params and reference given as objects. ``spec`` names
    the function where it was defined (``file.py:qualname``, or ``module:qualname``)."""
    if not callable(fn):
        raise UsageError(f"expected a function or a 'file.py:function' spec, got a {type(fn).__name__}")
    inner = inspect.unwrap(fn)
    while isinstance(inner, functools.partial):
        inner = inspect.unwrap(inner.func)
    name = getattr(fn, "__name__", None) or getattr(inner, "__name__", None) or type(fn).__name__
    qualname = getattr(inner, "__qualname__", name)
    code = getattr(inner, "__code__", None)
    # a notebook cell's code names a file that need not exist: then the function is module:qualname
    file = code.co_filename if code is not None and os.path.isfile(code.co_filename) else None
    spec = f"{short_path(file)}:{qualname}" if file else f"{getattr(inner, '__module__', None) or '__main__'}:{qualname}"
    sig = signature_of(fn)
    params = dict(params or {})
    check_param_names(sig, params, spec, "params={name}=...")
    if not args and not kwargs and sig is not None and any(
            p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in params
            for p in sig.parameters.values()):
        raise UsageError(f"{spec}: no example inputs: pass arrays, jax.ShapeDtypeStructs or shape specs such as "
                         f"\"f32[8,128] f32[8,128]\" after the function")
    check_arity(sig, tuple(args), dict(kwargs), params, spec)
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if sig else []
    source_hash = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    return Target(
        spec=spec, name=name, fn=fn, file=file, line=code.co_firstlineno if code is not None else None,
        args=tuple(args), kwargs=dict(kwargs), params=params, param_choices={k: [v] for k, v in params.items()},
        options=dict(options or {}), reference=reference,
        reference_name=getattr(reference, "__name__", "reference") if reference is not None else None,
        source_hash=source_hash, arg_names=[names[i] if i < len(names) else f"arg{i}" for i in range(len(args))],
    )
