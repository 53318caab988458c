"""The user's code imported: ``path/to/file.py`` (checked first, so a mistyped or unreadable path
is a one-line usage error naming the nearest path there is) or an installed ``package.module``, and
the function named in it. Nothing here imports jax, so argument errors answer before jax loads."""
from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Callable

from ..base.environment import LOCALE_FIX, locale_hides_utf8
from ..base.errors import TargetFailure, UsageError
from ..base.user_code import describe_error, reraise_interrupt, short_path


def _check_path(path: Path) -> Path:
    """The file to import, or a one-line UsageError: missing, not a file, not Python, a name the
    file system refuses (too long) or that is not UTF-8 (jax's source locations need text)."""
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
                             f"{path}: no such file{'' if path.is_absolute() else f' in {Path.cwd()}'} (give path/to/file.py:function)")
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
