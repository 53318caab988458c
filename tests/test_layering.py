"""The direction of imports: no cycles (imports inside functions count, and so, in the strict
check, do imports under TYPE_CHECKING: a circle closed by a type-only import is still a circle of
concerns), the core reaches the views only through inspector/display.py, and the analyses (hlo/,
pallas/) import no front end."""
from __future__ import annotations

import ast
from pathlib import Path


from conftest import ROOT

# on disk -> as installed (pyproject's package-dir)
PACKAGES = {"inspector": "inspector", "views": "inspector.views", "kernels": "inspector.kernels"}
FRONT_ENDS = ("inspector.cli", "inspector.commands", "inspector.views")
DOOR = "inspector.display"  # the core's one door to the views (Jupyter's HTML, Report.show)


def _modules() -> dict[str, Path]:
    found = {}
    for top, package in PACKAGES.items():
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT / top).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    while (node := parents.get(node)) is not None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str, path: Path, known: set[str], type_only: bool = False) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (under TYPE_CHECKING too with
    ``type_only``). A ``from . import x`` imports the package too: its __init__ runs."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
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


def _graph(type_only: bool = False) -> dict[str, set[str]]:
    modules = _modules()
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


def test_only_the_front_ends_import_the_views():
    offenders = {m: sorted(t for t in targets if _is(t, ("inspector.views",)))
                 for m, targets in _graph().items() if not _is(m, FRONT_ENDS + (DOOR,))}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_the_analyses_import_no_front_end():
    front = FRONT_ENDS + ("inspector.session", "inspector.remote", "inspector.api")
    offenders = {m: sorted(t for t in targets if _is(t, front))
                 for m, targets in _graph().items() if _is(m, ("inspector.hlo", "inspector.pallas"))}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_the_table_of_views_names_renderers_and_tabs_that_exist():
    import importlib

    from inspector.view_table import VIEWS

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
ROOT_MODULES = 12  # beside the folders: the Report and its front doors


def test_the_folders_are_the_layers():
    """inspector/ holds a dozen modules or fewer beside its folders; each folder says in its
    __init__ what layer it is."""
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
