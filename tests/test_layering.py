"""The direction of imports: every import follows the declared order of the layers (tests/layers.py:
imports inside functions count, type-only ones do not), no module imports another's private name,
no circle between modules (in the strict check, imports under TYPE_CHECKING count too: a circle
closed by a type-only import is still a circle of concerns) nor between folders, and the core
reaches the views only through inspector/base/display.py."""
from __future__ import annotations

import ast
import fnmatch
import functools
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from layers import LAYERS, SEAMS

# on disk -> as installed (pyproject's package-dir)
PACKAGES = {"inspector": "inspector", "views": "inspector.views", "kernels": "inspector.kernels"}
FRONT_ENDS = ("inspector.cli", "inspector.commands", "inspector.views")
DOOR = "inspector.base.display"  # the core's one door to the views (Jupyter's HTML, Report.show)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for top, package in PACKAGES.items():
        for path in (root / top).rglob("*.py"):
            parts = path.relative_to(root / top).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


@functools.cache
def _parsed(text: str) -> tuple[ast.Module, dict]:
    """A module's tree and each node's parent, once per text: every check reads the whole package
    (a mutation test's copy differs in its one changed file only)."""
    tree = ast.parse(text)
    return tree, {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    while (node := parents.get(node)) is not None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str, path: Path, known: set[str], type_only: bool = False) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (under TYPE_CHECKING too with
    ``type_only``). A ``from . import x`` imports the package too: its __init__ runs."""
    tree, parents = _parsed(path.read_text())
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if not type_only and _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = name.split(".")[: len(name.split(".")) - (node.level - (1 if is_package else 0))]
            base = ".".join(parts + ([node.module] if node.module else []))
        targets.add(base)
        targets.update(f"{base}.{a.name}" for a in node.names)
    found = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def _graph(type_only: bool = False, root: Path = ROOT) -> dict[str, set[str]]:
    modules = _modules(root)
    return {name: _imports(name, path, set(modules), type_only) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_no_import_cycles_counting_type_only_imports():
    """No circle even counting the imports made for typing only (the views import the result types
    they draw; inspector.display loads its renderers by name)."""
    assert _cycles(_graph(type_only=True)) == []


def test_the_type_only_check_sees_type_only_imports(tmp_path):
    module = tmp_path / "a.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n")
    assert _imports("pkg.a", module, {"pkg.a", "pkg.b"}) == set()
    assert _imports("pkg.a", module, {"pkg.a", "pkg.b"}, type_only=True) == {"pkg.b"}


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _is(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# Who imports what, beyond the order of the layers: (importers, their exceptions, the imported,
# its exceptions, why). A module is named with the modules under it.
NO_IMPORTS = [
    (("inspector",), FRONT_ENDS + (DOOR,), ("inspector.views",), (), "only the front ends import the views"),
    (("inspector.hlo", "inspector.pallas"), (), FRONT_ENDS + ("inspector.session", "inspector.remote", "inspector.api"), (),
     "the analyses import no front end"),
    # they ask family_of(chip) (inspector.families), never a family's own module (inspector.families.gpu...);
    # measuring measures through family_of whatever the family
    (("inspector.verbs", "inspector.views", "inspector.results", "inspector.baseline"), (), ("inspector.families",),
     ("inspector.families", "inspector.families.measuring"), "the verbs, views, Report and baseline import no family's module"),
]


def _forbidden_imports(rule: tuple, root: Path = ROOT) -> dict[str, list[str]]:
    importers, spared, imported, allowed, _ = rule
    offenders = {m: sorted(t for t in targets if _is(t, imported) and t not in allowed)
                 for m, targets in _graph(root=root).items() if _is(m, importers) and not _is(m, spared)}
    return {m: t for m, t in offenders.items() if t}


@pytest.mark.parametrize("rule", NO_IMPORTS, ids=[r[-1] for r in NO_IMPORTS])
def test_no_forbidden_import(rule):
    assert _forbidden_imports(rule) == {}


def test_the_table_of_views_names_renderers_and_tabs_that_exist():
    import importlib

    from inspector.results.view_table import VIEWS

    keys = [v.key for v in VIEWS]
    assert len(keys) == len(set(keys)), "two views share a TUI key"
    for view in VIEWS:
        if view.render:
            module, function = view.render.split(":")
            assert callable(getattr(importlib.import_module(f"inspector.views.{module}"), function)), view.name
        if view.tab:
            module, cls = view.tab.split(":")
            tab = getattr(importlib.import_module(f"inspector.views.tui.{module}"), cls)
            assert callable(getattr(tab, "reset")) and callable(getattr(tab, "show")), view.name
        assert view.render or view.tab, f"{view.name}: neither a renderer nor a tab"


# Modules of one concern: no module over 450 lines, no function over 80, anywhere in the package.
SPLIT = ("inspector", "views")
MODULE_LINES, FUNCTION_LINES = 450, 80
ROOT_MODULES = 6  # beside the folders and __init__/__main__: the package's faces (issue 65: the root holds 8 or fewer)


def test_the_folders_are_the_layers():
    """inspector/ holds the package's faces only beside its folders (8 modules or fewer, __init__
    and __main__ counted); each folder says in its __init__ what layer it is."""
    root = ROOT / "inspector"
    assert len([p for p in root.glob("*.py") if p.stem not in ("__init__", "__main__")]) <= ROOT_MODULES
    for folder in (p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = folder / "__init__.py"
        assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), f"{folder.name}: say its layer"


def test_modules_and_functions_stay_small():
    too_long = []
    for part in SPLIT:
        path = ROOT / part
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            text = file.read_text()
            where = file.relative_to(ROOT)
            if text.count("\n") > MODULE_LINES:
                too_long.append(f"{where}: {text.count(chr(10))} lines")
            too_long += [f"{where}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
                         for node in ast.walk(ast.parse(text))
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and node.end_lineno - node.lineno + 1 > FUNCTION_LINES]
    assert too_long == []


# ----------------------------------------------------------------------------- the declared order

def _unit(path: Path, root: Path = ROOT) -> tuple[int, str]:
    """(layer index, the LAYERS path that holds ``path``): its own path, else the root's
    ``inspector/*.py``, else its folder."""
    rel = path.relative_to(root).as_posix()
    best: tuple[int, int, str] | None = None
    for index, layer in enumerate(LAYERS):
        for entry in layer.paths:
            if entry.endswith("/"):
                rank = 1 if rel.startswith(entry) else None
            elif "*" in entry:
                rank = 2 if fnmatch.fnmatch(rel, entry) and "/" not in rel[len(entry.rsplit("/", 1)[0]) + 1:] else None
            else:
                rank = 3 if rel == entry else None
            if rank is not None and (best is None or rank > best[0]):
                best = (rank, index, entry)
    assert best is not None, f"{rel}: in no layer of tests/layers.py"
    return best[1], best[2]


def _order_violations(root: Path = ROOT) -> list[str]:
    """Every import (inside functions too, TYPE_CHECKING left out) of a module in a higher layer
    than the importer's, unless SEAMS names it."""
    modules = _modules(root)
    units = {name: _unit(path, root) for name, path in modules.items()}
    allowed = {(s.importer, s.imported) for s in SEAMS}
    found = []
    for name, targets in _graph(root=root).items():
        for target in sorted(targets):
            if units[target][0] > units[name][0] and (name, target) not in allowed:
                found.append(f"{name} ({LAYERS[units[name][0]].name}) imports {target} ({LAYERS[units[target][0]].name})")
    return found


def _unit_cycles(root: Path = ROOT) -> list[list[str]]:
    """Circles between the LAYERS paths (folders, root modules): within a layer they are peers."""
    modules = _modules(root)
    units = {name: _unit(path, root)[1] for name, path in modules.items()}
    graph: dict[str, set[str]] = {u: set() for u in units.values()}
    for name, targets in _graph(root=root).items():
        graph[units[name]].update(units[t] for t in targets if units[t] != units[name])
    return _cycles(graph)


def _private_uses(root: Path = ROOT) -> list[str]:
    """Every use of another module's underscore name: ``from m import _x`` and ``m._x`` where m is
    a module of the package (a name two modules share is public in one of them)."""
    modules = _modules(root)
    known = set(modules)
    found = []
    for name, path in modules.items():
        tree, _ = _parsed(path.read_text())
        is_package = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> the project module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in known:
                        bound[a.asname or a.name] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")[: len(name.split(".")) - (node.level - (1 if is_package else 0))]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        bound[a.asname or a.name] = f"{base}.{a.name}"
                    elif base in known and base != name and a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{name}: from {base} import {a.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                dotted, value = [], node.value
                while isinstance(value, ast.Attribute):
                    dotted.insert(0, value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id in bound:
                    module = ".".join([bound[value.id], *dotted])
                    if module in known and module != name:
                        found.append(f"{name}: {module}.{node.attr}")
    return sorted(set(found))


def test_every_import_follows_the_declared_order():
    assert _order_violations() == []


def test_no_circle_between_folders():
    assert _unit_cycles() == []


def test_no_module_uses_another_modules_private_names():
    assert _private_uses() == []


def test_every_module_is_in_a_layer_and_every_layer_path_exists():
    for path in _modules().values():
        _unit(path)
    for layer in LAYERS:
        for entry in layer.paths:
            assert list(ROOT.glob(entry.rstrip("/"))), f"{layer.name}: {entry} does not exist"
    for seam in SEAMS:
        assert seam.why and seam.imported in _graph()[seam.importer], f"{seam}: not an import (any more)"


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for top in PACKAGES:
        shutil.copytree(ROOT / top, root / top, ignore=shutil.ignore_patterns("__pycache__", "*.json", "vendor"))
    return root


def _append(path: Path, line: str) -> str:
    text = path.read_text()
    path.write_text(text + "\n\ndef _added():\n    " + line + "\n")
    return text


@pytest.mark.parametrize("module, line, what", [
    ("inspector/base/units.py", "from ..compilation import stages", "inspector.base.units (base) imports inspector.compilation.stages"),
    ("inspector/hlo/text.py", "from ..results.report import Report", "inspector.hlo.text (hlo) imports inspector.results.report"),
    ("views/doctor.py", "from ..commands.doctor import checkup", "inspector.views.doctor (views) imports inspector.commands.doctor"),
])
def test_an_import_against_the_order_fails_the_check(tree_copy, module, line, what):
    """The check reads the tree it is given: an import added (inside a function) to a copy fails it."""
    before = _append(tree_copy / module, line)
    try:
        found = _order_violations(tree_copy)
    finally:
        (tree_copy / module).write_text(before)
    assert any(f.startswith(what) for f in found), found
    assert _order_violations(tree_copy) == []


@pytest.mark.parametrize("module, line, what", [
    ("inspector/pallas/tiling.py", "from ..compilation.stages import _MEMO", "from inspector.compilation.stages import _MEMO"),
    ("inspector/results/report.py", "import inspector.compilation.stages as stages; stages._MEMO.clear()",
     "inspector.compilation.stages._MEMO"),
])
def test_a_private_name_of_another_module_fails_the_check(tree_copy, module, line, what):
    before = _append(tree_copy / module, line)
    try:
        found = _private_uses(tree_copy)
    finally:
        (tree_copy / module).write_text(before)
    assert any(what in f for f in found), found
    assert _private_uses(tree_copy) == []


def test_a_verb_importing_a_family_fails_the_check(tree_copy):
    rule, module = NO_IMPORTS[-1], "inspector/verbs/checking.py"
    before = _append(tree_copy / module, "from ..families.gpu.verdict import check_verdict")
    try:
        found = _forbidden_imports(rule, tree_copy)
    finally:
        (tree_copy / module).write_text(before)
    assert found == {"inspector.verbs.checking": ["inspector.families.gpu.verdict"]}
    assert _forbidden_imports(rule, tree_copy) == {}


def test_a_circle_between_folders_fails_the_check():
    assert _cycles({"inspector/run/": {"inspector/measure/"}, "inspector/measure/": {"inspector/run/"}}) \
        == [["inspector/measure/", "inspector/run/"]]


def _readme_layer_paths() -> list[str]:
    """The folders of the README's Architecture table, in its order: a cell's later items are
    short for the first one's top folder (`inspector/hlo/`, `jax_internals/`)."""
    import re

    section = (ROOT / "README.md").read_text().split("## Architecture", 1)[1].split("\n## ", 1)[0]
    paths = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        top = ""
        for item in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if item.split("/")[0] in ("inspector", "views", "kernels", "samples", "tests"):
                top = item.split("/")[0] + "/" if "/" in item else ""
                paths.append(item)
            else:
                paths.append(top + item)
    return paths


def test_the_readme_draws_the_declared_order():
    declared = [p for layer in LAYERS for p in layer.paths]
    assert [p for p in _readme_layer_paths() if p not in ("samples/", "tests/")] == declared
