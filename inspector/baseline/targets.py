"""The targets a baseline command names: ``file.py:function`` as given; a file, a folder or a glob
stands for every entry of the INSPECT dicts found there. INSPECT is read from the file's syntax
(the file is not run here: this is the parent process, before jax)."""
from __future__ import annotations

import ast
import dataclasses
import glob
import os
from pathlib import Path

from ..base.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Targets:
    specs: list[str]  # file.py:function, in the order given (each once)
    files: list[str]  # the files the arguments cover: a baseline's entry of one of them that is gone now was removed


def _norm(path: str) -> str:
    """A file as a baseline keys it: relative to the working folder when under it, so that a baseline
    saved in one checkout compares in another."""
    real = os.path.abspath(path)
    here = os.path.abspath(os.curdir)
    if real == here or real.startswith(here + os.sep):
        return os.path.relpath(real, here)
    return os.path.normpath(path)


def norm_spec(spec: str) -> str:
    where, sep, func = spec.rpartition(":")
    if not sep or not where.endswith(".py"):
        return spec
    return f"{_norm(where)}:{func}"


def inspect_names(path: str) -> list[str] | None:
    """The keys of the file's INSPECT dict in their order; None when it has none. A dict that is not
    written out literally (built by code) is a UsageError: name its functions instead."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"), filename=path)
    except SyntaxError as err:
        raise UsageError(f"{path}: not Python ({err.msg}, line {err.lineno}): fix it or leave it out") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read it ({err.strerror or err})") from None
    found = None
    for node in tree.body:
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "INSPECT" for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "INSPECT":
            value = node.value
        if value is None:
            continue
        if not isinstance(value, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                      for k in value.keys):
            raise UsageError(f"{path}: its INSPECT is not a dict written out with string keys, so its entries cannot be "
                             f"listed without running it: name the functions instead ({path}:FUNCTION)")
        found = [str(k.value) for k in value.keys if isinstance(k, ast.Constant)]
    return found


def _files_of(arg: str) -> tuple[list[str], bool]:
    """(the .py files an argument names, whether it named them one by one)."""
    if any(c in arg for c in "*?["):
        return sorted(p for p in glob.glob(arg, recursive=True) if p.endswith(".py") and os.path.isfile(p)), False
    if os.path.isdir(arg):
        found = []
        for root, dirs, files in os.walk(arg):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            found += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
        return found, False
    return [arg], True


def expand(args: list[str]) -> Targets:
    specs: list[str] = []
    files: list[str] = []
    for arg in args:
        where, sep, func = arg.rpartition(":")
        if sep and (where.endswith(".py") or "/" not in where and "." in where and not os.path.exists(arg)):
            if where.endswith(".py") and not os.path.isfile(where):
                raise UsageError(f"{where}: no such file (a target is path/to/file.py:function, a file, a folder or a glob)")
            specs.append(norm_spec(arg))  # one function: the file's other entries are not asked for
            continue
        paths, named = _files_of(arg)
        if named and not os.path.exists(arg):
            raise UsageError(f"{arg}: no such file or folder (a target is path/to/file.py:function, a file, a folder or a glob)")
        if named and not arg.endswith(".py"):
            raise UsageError(f"{arg}: not a Python file: give path/to/file.py:function, a .py file, a folder or a glob")
        entries = 0
        for path in paths:
            names = inspect_names(path)
            if not names:
                continue
            files.append(_norm(path))
            specs += [f"{_norm(path)}:{name}" for name in names]
            entries += len(names)
        if not entries:
            what = "has no INSPECT dict" if named else "holds no file with an INSPECT dict"
            raise UsageError(f"{arg} {what}: name a function (path/to/file.py:function) or a file whose INSPECT lists its targets")
    unique = list(dict.fromkeys(specs))
    return Targets(specs=unique, files=list(dict.fromkeys(files)))
