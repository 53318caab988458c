"""`inspector fix --patch`: a fix as a unified diff of the user's source that `git apply` takes:
the pallas_call's arguments (compiler_params' vmem_limit_bytes or dimension_semantics, Triton's
num_stages or num_warps, an input BlockSpec's pipeline_mode) or the INSPECT entry's params (the
chosen value made the default). Text in, text out: the file is read, never written (the caller
writes the patch). The diff keeps the file's own newlines and encoding (PEP 263, a BOM), and names
the file relative to the git repository that holds it, where `git apply` is run."""
from __future__ import annotations

import ast
import codecs
import difflib
import io
import os
import re
import tokenize
from typing import NamedTuple

from ..base.errors import UsageError
from ..base.fix_model import Change

PALLAS = "jax.experimental.pallas"
PALLAS_TPU = "jax.experimental.pallas.tpu"
PALLAS_TRITON = "jax.experimental.pallas.triton"
# The patch's first line: `git apply` ignores text before the first diff header, and it tells a
# patch this tool wrote (which --patch may replace) from a user's file (which it refuses)
HEADER = "# written by inspector fix --patch"
_LINE = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.S)  # a line as Python (and ast) counts them


class Patch(NamedTuple):
    path: str  # the file, relative to its repository (what the diff names)
    repository: str  # the repository's top folder: `git apply` runs there
    text: str  # the diff, decoded
    encoding: str  # the file's encoding: what the diff's lines are written in

    @property
    def data(self) -> bytes:
        return patch_bytes(self.text, self.encoding)


def patch_bytes(text: str, encoding: str) -> bytes:
    """The diff as `git apply` reads it: the header and the file names in UTF-8, the lines of the
    source in the source's own encoding (a latin-1 file's bytes, not UTF-8's)."""
    head = text.split("\n", 3)
    if len(head) < 4:
        return text.encode()
    return "\n".join(head[:3]).encode() + b"\n" + head[3].encode(encoding)


def is_our_patch(head: bytes) -> bool:
    """Whether a file's first bytes are a patch this tool wrote (--patch may replace it)."""
    return head.startswith(HEADER.encode())


def read_source(path: str) -> tuple[str, str]:
    """(the text, its encoding) of a Python file as it is: newlines untranslated, the encoding its
    PEP 263 line or BOM says (UTF-8 otherwise). A file that cannot be decoded so cannot be patched."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise UsageError(f"cannot read {path} to patch it: {err.strerror or err}") from err
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        codecs.lookup(encoding)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot patch {path}: it is not text in the encoding its coding line gives "
                         f"(utf-8 without one): {err}; leave --patch out, or fix the file's encoding") from None
    return text.removeprefix("\ufeff") if encoding == "utf-8-sig" else text, encoding


def _lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _newline(text: str) -> str:
    """The file's own newline (its first line's), for the lines a patch adds."""
    first = re.search(r"\r\n|\r|\n", text)
    return first.group() if first else "\n"


def repository(path: str) -> str:
    """The top folder of the git repository that holds ``path`` (a `.git` folder, or a worktree's
    `.git` file); a file in none, or an installed copy, is not patched: said in one line."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        raise UsageError(f"{path} is an installed copy (in {'site-packages' if 'site-packages' in parts else 'dist-packages'}): "
                         "not patched; make the change in the project's own source")
    folder = os.path.dirname(real)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        up = os.path.dirname(folder)
        if up == folder:
            raise UsageError(f"{path} is in no git repository, so `git apply` has nowhere to apply a patch: "
                             "not patched; make the change by hand (or `git init` its folder)")
        folder = up


def _offset(text: str, line: int, col: int) -> int:
    """The character offset of (1-based line, 0-based column in UTF-8 bytes) in ``text``."""
    lines = _lines(text)  # not str.splitlines: a form feed or U+2028 in a string is no line end to ast
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


def _triton_edit(text: str, tree: ast.Module, call: ast.Call, field: str, value: int) -> str:
    """Triton's CompilerParams(field=value) in the call: a literal replaced or added; a value the
    source computes (a parameter) is the user's to change, not overwritten with a constant."""
    given = next((kw for kw in call.keywords if kw.arg == "compiler_params"), None)
    if given is None:
        triton = _alias(tree, PALLAS_TRITON)
        edited = _with_keyword(text, call, "compiler_params", f"{triton or 'plt'}.CompilerParams({field}={value})")
        return edited if triton else _with_import(edited, tree, "from jax.experimental.pallas import triton as plt")
    params = given.value
    now = next((kw.value for kw in params.keywords if kw.arg == field), None) if isinstance(params, ast.Call) else None
    if not isinstance(params, ast.Call) or (now is not None and not isinstance(now, ast.Constant)):
        said = ast.unparse(now if now is not None else params)
        raise UsageError(f"{field} is {said!r} in the source, not a number: make it {value} there by hand")
    return _with_keyword(text, params, field, str(value))


def _with_import(text: str, tree: ast.Module, line: str) -> str:
    """``line`` added after the module's last top-level import (edits below it keep their offsets)."""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    newline = _newline(text)
    if not imports:
        return line + newline + text
    end = imports[-1].end_lineno or imports[-1].lineno
    if end >= len(_lines(text)):  # the import is the file's last line
        return text + ("" if text.endswith(("\n", "\r")) else newline) + line + newline
    at = _offset(text, end + 1, 0)
    return text[:at] + line + newline + text[at:]


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


def patch_text(change: Change, target_file: str | None, function: str) -> Patch:
    """The unified diff that makes ``change`` in the source, with the file it edits."""
    if change.kind == "params":
        if target_file is None:
            raise UsageError("the target is not a file: its INSPECT params cannot be patched")
        path = target_file
    else:
        path, _, line = change.source.rpartition(":")
        if not path or not line.isdigit():
            raise UsageError(f"{change.kernel}: where the pallas_call is called is not known: nothing to patch")
    top = repository(path)
    text, encoding = read_source(path)
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
        elif change.kind == "triton":
            assert isinstance(change.value, dict)
            (field, value), = change.value.items()
            new = _triton_edit(text, tree, call, field, value)
        else:
            new = _compiler_params_edit(text, tree, call, "dimension_semantics", repr(tuple(change.value)))  # type: ignore[arg-type]
    if encoding == "utf-8-sig":  # the BOM is the first line's, in the diff as in the file
        text, new, encoding = "\ufeff" + text, "\ufeff" + new, "utf-8"
    rel = os.path.relpath(os.path.realpath(path), top).replace(os.sep, "/")
    return Patch(rel, top, f"{HEADER}: {change.label}\n" + _diff(text, new, rel), encoding)


def _diff(old: str, new: str, rel: str) -> str:
    """difflib's unified diff, with the marker `git apply` needs after a last line without newline."""
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), f"a/{rel}", f"b/{rel}"):
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)
