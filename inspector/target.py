"""Load ``path/to/file.py:func`` or ``package.module:func`` with its inputs, reference and params.

Inputs, reference and static params come from the command line or from the file's optional
``INSPECT`` dict (see the README); the command line wins. Nothing here imports jax at module
level so that argument errors answer before jax loads.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from .errors import TargetFailure, UsageError
from .specs import ArgSpec, parse_specs
from .user_code import describe_error, reraise_interrupt, short_path  # noqa: F401  (re-exported)


@dataclasses.dataclass
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


def _check_path(path: Path) -> Path:
    """The file to import, or a one-line UsageError: missing, not a file, not Python, a name the
    file system refuses (too long) or that is not UTF-8 (jax's source locations need text)."""
    from .environment import LOCALE_FIX, locale_hides_utf8

    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        if locale_hides_utf8(str(path)):  # valid UTF-8 that LC_ALL=C (ascii) could not decode
            raise UsageError(f"the path {ascii(str(path))} is UTF-8 that this locale ({_locale()}) cannot "
                             f"decode: {LOCALE_FIX}") from None
        raise UsageError(f"the path {ascii(str(path))} is not valid UTF-8: rename the file or folder") from None
    try:
        os.fsencode(path)
    except UnicodeEncodeError:  # a name given as text (the Python API) that the locale cannot encode
        raise UsageError(f"the path {ascii(str(path))} cannot be named in this locale ({_locale()}): {LOCALE_FIX}") from None
    try:
        if not path.exists():
            near = nearest_path(path)
            raise UsageError(f"{path}: no such file; did you mean {near}?" if near else
                             f"{path}: no such file (give path/to/file.py:function)")
        resolved = path.resolve()
        is_file = resolved.is_file()
    except OSError as err:  # ENAMETOOLONG, ELOOP, EACCES
        raise UsageError(f"cannot open {path}: {err.strerror or err}") from err
    if path.suffix != ".py":
        raise UsageError(f"{path} is not a Python file (give path/to/file.py:function)")
    if not is_file:
        raise UsageError(f"{path} is not a file (give path/to/file.py:function)")
    if not os.access(resolved, os.R_OK):
        raise UsageError(f"cannot read {path}: permission denied")
    return resolved


def nearest_path(path: Path) -> Path | None:
    """The existing path nearest to a mistyped one, part by part (`samples/atention.py` ->
    `samples/attention.py`, `sample/attention.py` -> `samples/attention.py`); None when a part has
    no close name. Only the names in the folders on the way are read."""
    import difflib

    found = Path(path.anchor) if path.is_absolute() else Path()
    for part in path.parts[1:] if path.is_absolute() else path.parts:
        candidate = found / part
        if part in ("..", ".") or candidate.exists():
            found = candidate
            continue
        try:
            names = sorted(entry.name for entry in os.scandir(found))
        except OSError:
            return None
        close = difflib.get_close_matches(part, names, n=1, cutoff=0.75)
        if not close:
            return None
        found = found / close[0]
    return found if found != path and found.exists() else None


def _locale() -> str:
    setting = next((f"{k}={os.environ[k]}" for k in ("LC_ALL", "LC_CTYPE", "LANG") if os.environ.get(k)), "no LANG set")
    return f"{setting}, file names read as {sys.getfilesystemencoding()}"


def _import_file(path: Path):
    resolved = _check_path(path)
    module_name = "_inspected_" + hashlib.sha1(os.fsencode(resolved)).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    sys.path.insert(0, str(resolved.parent))  # let the file import its neighbours
    # The loader is named, not picked by suffix: a link file.py -> data.bin still loads as source.
    loader = importlib.machinery.SourceFileLoader(module_name, str(resolved))
    spec = importlib.util.spec_from_file_location(module_name, resolved, loader=loader)
    assert spec is not None and spec.loader is not None  # the loader is given
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        del sys.modules[module_name]
        if err.lineno is None:  # null bytes: not source at all (a link to a binary, say)
            raise UsageError(f"{path} is not Python source ({err.msg})") from err
        where = f"{short_path(err.filename or str(path))}:{err.lineno}"
        raise UsageError(f"{where}: SyntaxError: {err.msg} (fix the file and run again)") from err
    except (ValueError, UnicodeDecodeError) as err:  # null bytes, not text: not Python source at all
        del sys.modules[module_name]
        if err.__traceback__ is not None and any(f.filename == str(resolved) for f in traceback.extract_tb(err.__traceback__)):
            raise UsageError(describe_error(err, str(resolved), f"raised while importing {path}")) from err
        raise UsageError(f"{path} is not Python source ({type(err).__name__}: {err})") from err
    except Exception as err:
        del sys.modules[module_name]
        raise UsageError(describe_error(err, str(resolved), f"raised while importing {path}")) from err
    except BaseException as err:  # sys.exit() at module level: the user's code failed, with its code
        del sys.modules[module_name]
        reraise_interrupt(err)
        raise TargetFailure(describe_error(err, str(resolved), f"raised while importing {path}")) from err
    return module


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise UsageError(f"cannot import module {name!r}: {err} (give path/to/file.py:function or an installed package.module:function)") from err
    except Exception as err:
        raise UsageError(describe_error(err, None, f"raised while importing {name}")) from err
    except BaseException as err:
        reraise_interrupt(err)
        raise TargetFailure(describe_error(err, None, f"raised while importing {name}")) from err


def split_spec(spec: str) -> tuple[str, str]:
    where, sep, func = spec.rpartition(":")
    if not sep or not where or not func:
        raise UsageError(f"target {spec!r} must be path/to/file.py:function or package.module:function")
    return where, func


def load_module(where: str):
    """Import a file path or a dotted module name; returns (module, file path or None)."""
    if where.endswith(".py") or os.sep in where or "/" in where or os.path.isfile(where):
        return _import_file(Path(where))
    return _import_module(where)


def resolve_callable(module, func: str, spec: str) -> Callable:
    obj = module
    for part in func.split("."):
        if not hasattr(obj, part):
            own = getattr(module, "__name__", None)
            names = sorted(n for n, v in vars(module).items()
                           if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == own)
            hint = f"; functions there: {', '.join(names[:12])}" if names else ""
            raise UsageError(f"{spec}: no function named {func!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{spec}: {func!r} is a {type(obj).__name__}, not a function")
    return obj


def _signature(fn: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)  # follows __wrapped__, so jax.jit-wrapped functions work
    except (TypeError, ValueError):
        return None


def parse_value(text: str) -> Any:
    """``--set`` values: ints, floats, bools, else the string itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def same_kind(value, like) -> bool:
    """Whether a parsed --set value fits the kind of ``like`` (INSPECT's first choice or the
    function's default): "maybe" for a bool would be passed on as a truthy string."""
    if like is None or value is None or isinstance(like, str):
        return True
    if isinstance(like, bool):
        return isinstance(value, bool)
    if isinstance(like, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(like, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


class FlagValue(str):
    """A ``NAME=VALUE`` item that remembers the flag it came with (compare's ``--set-a``), so a
    message names the flag the user typed."""

    flag: str

    def __new__(cls, text: str, flag: str):
        item = super().__new__(cls, text)
        item.flag = flag
        return item

    def __reduce__(self):
        return FlagValue, (str(self), self.flag)


def _params(fn_sig, entry: dict, sets: list[str], spec: str, func: str = "") -> tuple[dict, dict]:
    defaults = {p.name: p.default for p in fn_sig.parameters.values() if p.default is not p.empty} if fn_sig else {}
    choices: dict[str, list] = {}
    for name, value in (entry.get("params") or {}).items():
        if not isinstance(value, (list, tuple)):  # taken as [value], it was a choice nobody was told about
            raise UsageError(f"{spec}: INSPECT[{func!r}][\"params\"][{name!r}] is {value!r}: give a list of the "
                             f"values to try, the first the default, e.g. [{value!r}] (or --set {name}=... on the "
                             "command line)")
        choices[name] = list(value)
        _check_choices(name, choices[name], defaults.get(name), f"{spec}: INSPECT[{func!r}][\"params\"][{name!r}]")
    check_param_names(fn_sig, choices, spec, f"INSPECT[{func!r}][\"params\"] names {{name!r}}")
    params = {name: values[0] for name, values in choices.items() if values}
    for item in sets:
        flag = getattr(item, "flag", "--set")
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise UsageError(f"{flag} {str(item)!r}: write {flag} name=value, e.g. {flag} block_q=256")
        value = parse_value(raw)
        like = params[name] if name in params else defaults.get(name)
        if not same_kind(value, like):
            kind = type(like).__name__
            raise UsageError(f"{flag} {name}={raw}: {name} takes {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                             f"(like {like!r}), e.g. {flag} {name}={like}")
        check_param_names(fn_sig, {name: value}, spec, f"{flag} {{name}}=...")
        params[name] = value
    return params, choices


def _check_choices(name: str, values: list, default, where: str) -> None:
    """INSPECT's values of a static param, checked as --set checks one: at least one, each of the
    kind of the function's default (else of the first value)."""
    if not values:
        raise UsageError(f"{where} is an empty list: give the values to try (the first is the default), "
                         f"or leave {name!r} out")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if default is None and numbers:
        return  # ints and floats together: a float param offered as [1, 0.5]
    like = default if default is not None else values[0]
    for value in values:
        if not same_kind(value, like):
            kind = type(like).__name__
            raise UsageError(f"{where} holds {value!r} (a {type(value).__name__}) but {name} takes "
                             f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} (like {like!r})")


def check_param_names(fn_sig, params: dict, spec: str, how: str = "--set {name}=...") -> None:
    """Every static param must be one the function takes (or it takes ``**kwargs``)."""
    if fn_sig is None:
        return
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in fn_sig.parameters.values())
    for name in params:
        if name not in fn_sig.parameters and not accepts_any:
            takes = ", ".join(fn_sig.parameters)
            raise UsageError(f"{spec}: {how.format(name=name)} but the function takes no parameter {name!r} (it takes: {takes})")


def _abstract(specs: list[ArgSpec]) -> tuple[tuple, dict]:
    import jax
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


_OPTION_KEYS = ("atol", "rtol", "int_ranges", "shapes")  # read from Target.options: by diff; shapes by tune
INSPECT_KEYS = ("args", "params", "reference", *_OPTION_KEYS, "mesh", "shardings")


def _closest(word: str, known) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, [k for k in known if isinstance(k, str)], n=1)
    return found[0] if found else None


def _unknown_keys(entry: dict, spec: str, func: str) -> None:
    """A mistyped INSPECT key would be ignored and its setting silently lost: refuse it."""
    for key in entry:
        if key not in INSPECT_KEYS:
            close = _closest(str(key), INSPECT_KEYS)
            raise UsageError(f"{spec}: INSPECT[{func!r}] has an unknown key {key!r}"
                             + (f" (did you mean {close!r}?)" if close else "") + f"; it takes {', '.join(INSPECT_KEYS)}")


def _check_int_ranges(entry: dict, names: list[str], spec: str, func: str, inputs: dict | None = None) -> None:
    """diff reads int_ranges as {input name: (low, high)}: another shape would fail mid-run with an
    internal error, and a mistyped name would drop its range silently."""
    ranges = entry.get("int_ranges")
    if ranges is None:
        return
    where = f"{spec}: INSPECT[{func!r}][\"int_ranges\"]"
    if not isinstance(ranges, dict):
        raise UsageError(f"{where} must be a dict of input name to (low, high), e.g. {{{names[0] if names else 'x'!r}: "
                         f"(-8, 8)}}, not a {type(ranges).__name__}")
    for name, bounds in ranges.items():
        if name not in names:
            close = _closest(str(name), names)
            raise UsageError(f"{where} names {name!r}, which is no input of {func}"
                             + (f" (did you mean {close!r}?)" if close else "") + f"; its inputs are {', '.join(names) or 'none'}")
        ok = (isinstance(bounds, (tuple, list)) and len(bounds) == 2
              and all(hasattr(b, "__index__") and not isinstance(b, bool) for b in bounds) and bounds[0] < bounds[1])
        if not ok:
            raise UsageError(f"{where}[{name!r}] must be two integers (low, high) with low < high (high excluded), not {bounds!r}")
        if inputs is not None and name in inputs:
            _check_range_fits(inputs[name], name, tuple(bounds), where)


def _check_range_fits(tree, name: str, bounds: tuple, where: str) -> None:
    """int_ranges sets the values of an input's integer arrays: one with none (a float input) would
    drop the range silently, and a range past the dtype would wrap around."""
    import jax
    import numpy as np

    dtypes = [np.dtype(leaf.dtype) for leaf in jax.tree.leaves(tree) if hasattr(leaf, "dtype")]
    integers = [d for d in dtypes if np.issubdtype(d, np.integer)]
    if dtypes and not integers:
        raise UsageError(f"{where} names {name!r}, a {', '.join(sorted({str(d) for d in dtypes}))} input: int_ranges "
                         "sets the values of integer inputs (floats are drawn from a normal distribution)")
    low, high = bounds
    for d in integers:
        info = np.iinfo(d)
        if low < info.min or high - 1 > info.max:
            raise UsageError(f"{where}[{name!r}] = {bounds!r} does not fit {d} ({info.min} to {info.max}): "
                             f"give a range inside it (high is excluded, so up to ({info.min}, {info.max + 1}))")


def _no_inputs(spec: str, func: str, sig, orphans: list) -> UsageError:
    params = [p for p in (sig.parameters.values() if sig else []) if p.default is p.empty]
    example = " ".join("f32[8,128]" for _ in params) or "f32[8,128]"
    close = _closest(func, orphans)
    mistyped = f" (INSPECT has no entry {func!r}; is {close!r} meant to be it?)" if close else ""
    return UsageError(
        f"{spec}: no example inputs{mistyped}. Give them with --args \"{example}\" or in the file: "
        f"INSPECT = {{\"{func}\": {{\"args\": \"{example}\"}}}}"
    )


def _check_arity(sig, args: tuple, kwargs: dict, params: dict, spec: str) -> None:
    if sig is None:
        return
    try:
        sig.bind(*args, **kwargs, **params)
    except TypeError as err:
        required = [p.name for p in sig.parameters.values() if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        raise UsageError(f"{spec}: the inputs do not match the signature ({err}); it needs {len(required)} inputs ({', '.join(required)}) and got {len(args)} positional, {len(kwargs)} keyword") from err


def _reference(module, ref_cli: str | None, entry: dict, spec: str) -> tuple[Callable | None, str | None]:
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
    from .sharding import check_mesh, parse_mesh, parse_specs

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
    table = getattr(module, "INSPECT", None) or {}
    if not isinstance(table, dict):
        raise UsageError(f"{spec}: INSPECT must be a dict keyed by function name")
    entry = table.get(func) or {}
    if not isinstance(entry, dict):
        raise UsageError(f"{spec}: INSPECT[{func!r}] must be a dict such as {{\"args\": \"f32[8,128]\", \"params\": {{...}}}}, "
                         f"not a {type(entry).__name__}")
    _unknown_keys(entry, spec, func)
    if not isinstance(entry.get("params") or {}, dict):
        raise UsageError(f"{spec}: INSPECT[{func!r}][\"params\"] must be a dict of static keyword values, "
                         f"e.g. {{\"block_q\": [128, 256]}}, not a {type(entry['params']).__name__}")
    sig = _signature(fn)
    params_, choices = _params(sig, entry, sets or [], spec, func)
    if params:
        check_param_names(sig, params, spec, "params={name}=...")
        params_.update(params)
    params = params_

    if inputs is not None:
        pos, kw = tuple(inputs[0]), dict(inputs[1])
    elif args is not None:
        pos, kw = _abstract(parse_specs(args))
    elif "args" in entry:
        given = entry["args"]
        if not isinstance(given, str) and not callable(given):
            raise UsageError(f"{spec}: INSPECT args must be a shape spec string such as \"f32[8,128]\" or a callable "
                             f"returning the inputs, not a {type(given).__name__}")
        pos, kw = _abstract(parse_specs(given)) if isinstance(given, str) else _from_callable(given, spec)
    elif sig is not None and not any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                                     for p in sig.parameters.values()):
        pos, kw = (), {}  # a function of no inputs (a constant, a generated table) needs none
    else:
        # an INSPECT entry named after no function of the file may be this one's, mistyped
        raise _no_inputs(spec, func, sig, [k for k in table if not callable(getattr(module, str(k), None))])
    _check_arity(sig, pos, kw, params, spec)
    axes, shardings = _sharding(entry, mesh, shard, spec)
    reference, reference_name = ((reference, getattr(reference, "__name__", "reference")) if reference is not None
                                 else _reference(module, ref, entry, spec))

    file = getattr(module, "__file__", None)
    code = getattr(inspect.unwrap(fn), "__code__", None)
    source_hash = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if sig else []
    arg_names = [names[i] if i < len(names) else f"arg{i}" for i in range(len(pos))]
    _check_int_ranges(entry, arg_names + list(kw), spec, func, {**dict(zip(arg_names, pos)), **kw})
    return Target(
        arg_names=arg_names, spec=spec, options={k: entry[k] for k in _OPTION_KEYS if k in entry},
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
    sig = _signature(fn)
    params = dict(params or {})
    check_param_names(sig, params, spec, "params={name}=...")
    if not args and not kwargs and sig is not None and any(
            p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in params
            for p in sig.parameters.values()):
        raise UsageError(f"{spec}: no example inputs: pass arrays, jax.ShapeDtypeStructs or shape specs such as "
                         f"\"f32[8,128] f32[8,128]\" after the function")
    _check_arity(sig, tuple(args), dict(kwargs), params, spec)
    names = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] if sig else []
    source_hash = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    return Target(
        spec=spec, name=name, fn=fn, file=file, line=code.co_firstlineno if code is not None else None,
        args=tuple(args), kwargs=dict(kwargs), params=params, param_choices={k: [v] for k, v in params.items()},
        options=dict(options or {}), reference=reference,
        reference_name=getattr(reference, "__name__", "reference") if reference is not None else None,
        source_hash=source_hash, arg_names=[names[i] if i < len(names) else f"arg{i}" for i in range(len(args))],
    )
