"""`inspector fix --patch`: a fix as a unified diff of the user's source that `git apply` takes:
the pallas_call's arguments (compiler_params' vmem_limit_bytes or dimension_semantics, an input
BlockSpec's pipeline_mode) or the INSPECT entry's params (the chosen value made the default).
Text in, text out: the file is read, never written (the caller writes the patch)."""
from __future__ import annotations

import ast
import difflib
import os

from .base.errors import UsageError
from .base.fix_model import Change

PALLAS = "jax.experimental.pallas"
PALLAS_TPU = "jax.experimental.pallas.tpu"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise UsageError(f"cannot read {path} to patch it: {err.strerror or err}") from err


def _offset(text: str, line: int, col: int) -> int:
    """The character offset of (1-based line, 0-based column in UTF-8 bytes) in ``text``."""
    lines = text.splitlines(keepends=True)
    head = "".join(lines[:line - 1])
    return len(head) + len(lines[line - 1].encode()[:col].decode(errors="ignore"))


def _span(text: str, node: ast.AST) -> tuple[int, int]:
    return (_offset(text, node.lineno, node.col_offset),  # type: ignore[attr-defined]
            _offset(text, node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


def _alias(tree: ast.Module, module: str) -> str | None:
    """The name a module is imported as (``from jax.experimental.pallas import tpu as pltpu``)."""
    parent, _, leaf = module.rpartition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == parent:
            for a in node.names:
                if a.name == leaf:
                    return a.asname or a.name
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == module and a.asname:
                    return a.asname
    return None


def _pallas_call_at(tree: ast.Module, line: int) -> ast.Call:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
             (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "pallas_call"
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not found:  # the call's frame is the line of `)(x, y)`: the pallas_call( ... ) call ends there
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
                 (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "pallas_call"
                 and abs((n.end_lineno or n.lineno) - line) <= 1]
    if not found:
        raise UsageError(f"no pl.pallas_call(...) call at line {line}: the fix cannot be written as a patch")
    return max(found, key=lambda n: n.lineno)


def _with_keyword(text: str, call: ast.Call, name: str, value: str) -> str:
    """``call`` with keyword ``name=value``: its value replaced where given, else added last."""
    for kw in call.keywords:
        if kw.arg == name:
            start, end = _span(text, kw.value)
            return text[:start] + value + text[end:]
    _, end = _span(text, call)
    before = text[:end - 1].rstrip()  # up to the call's ")", without the space before it
    sep = "" if before.endswith(("(", ",")) else ", "
    sep = " " if before.endswith(",") else sep
    return before + sep + f"{name}={value}" + text[len(before):]


def _compiler_params_edit(text: str, tree: ast.Module, call: ast.Call, field: str, value: str) -> str:
    given = next((kw for kw in call.keywords if kw.arg == "compiler_params"), None)
    if given is None:
        tpu = _alias(tree, PALLAS_TPU)
        edited = _with_keyword(text, call, "compiler_params", f"{tpu or 'pltpu'}.CompilerParams({field}={value})")
        return edited if tpu else _with_import(edited, tree, "from jax.experimental.pallas import tpu as pltpu")
    if not isinstance(given.value, ast.Call):
        raise UsageError(f"compiler_params is {ast.unparse(given.value)!r}, not a CompilerParams(...) call: set "
                         f"{field}={value} there by hand")
    return _with_keyword(text, given.value, field, value)


def _with_import(text: str, tree: ast.Module, line: str) -> str:
    """``line`` added after the module's last top-level import (edits below it keep their offsets)."""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
        return line + "\n" + text
    at = _offset(text, (imports[-1].end_lineno or imports[-1].lineno) + 1, 0)
    return text[:at] + line + "\n" + text[at:]


def _buffered_edit(text: str, tree: ast.Module, call: ast.Call, position: int, count: int) -> str:
    specs = next((kw.value for kw in call.keywords if kw.arg == "in_specs"), None)
    if not isinstance(specs, (ast.List, ast.Tuple)) or position >= len(specs.elts) or \
            not isinstance(specs.elts[position], ast.Call):
        raise UsageError(f"in_specs is not a list of BlockSpec(...) calls with input {position}: add "
                         f"pipeline_mode=pl.Buffered({count}) to its BlockSpec by hand")
    pl = _alias(tree, PALLAS) or "pl"
    spec = specs.elts[position]
    assert isinstance(spec, ast.Call)
    return _with_keyword(text, spec, "pipeline_mode", f"{pl}.Buffered({count})")


def _params_edit(text: str, tree: ast.Module, function: str, name: str, value) -> str:
    """INSPECT[function]["params"][name]: ``value`` moved first (the default)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
            if name in keys and isinstance(node.values[keys.index(name)], (ast.List, ast.Tuple)):
                seq = node.values[keys.index(name)]
                assert isinstance(seq, (ast.List, ast.Tuple))
                items = [ast.literal_eval(e) for e in seq.elts]
                if value in items:
                    items.remove(value)
                start, end = _span(text, seq)
                return text[:start] + repr([value] + items) + text[end:]
    raise UsageError(f"no INSPECT params list for {name!r} in the file of {function}: set its default to {value} by hand")


def patch_text(change: Change, target_file: str | None, function: str) -> tuple[str, str]:
    """(the edited file's path, the unified diff) that makes ``change`` in the source."""
    if change.kind == "params":
        if target_file is None:
            raise UsageError("the target is not a file: its INSPECT params cannot be patched")
        path = target_file
    else:
        path, _, line = change.source.rpartition(":")
        if not path or not line.isdigit():
            raise UsageError(f"{change.kernel}: where the pallas_call is called is not known: nothing to patch")
    text = _read(path)
    tree = ast.parse(text)
    if change.kind == "params":
        assert isinstance(change.value, dict)
        (name, value), = change.value.items()
        new = _params_edit(text, tree, function, name, value)
    else:
        call = _pallas_call_at(tree, int(line))
        if change.kind == "order":
            raise UsageError(f"a grid order {change.operand} edits grid= and the arguments of every index_map: make it by "
                             "hand")
        if change.kind == "buffered":
            position, count = change.value  # type: ignore[misc]
            new = _buffered_edit(text, tree, call, position, count)
        elif change.kind == "vmem_limit":
            new = _compiler_params_edit(text, tree, call, "vmem_limit_bytes", str(change.value))
        else:
            new = _compiler_params_edit(text, tree, call, "dimension_semantics", repr(tuple(change.value)))  # type: ignore[arg-type]
    rel = os.path.relpath(path).replace(os.sep, "/")
    diff = difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}")
    return rel, "".join(diff)
