"""No package imports one that imports it back (docs/architecture.md).

The graph's nodes are the packages of ``engine`` and ``tenants`` (a folder
with ``__init__.py``), and each module that sits directly in ``engine/`` or
``tenants/`` (``tenants.errors``, ``engine.pipeline``...), which is a unit of
its own. An edge is any import of another node's code: at the top of a module
or inside a function (a function-level import dodges Python's import order,
not the dependency), but not under ``if TYPE_CHECKING:``, which is only for
annotations. Any cycle fails, naming the files that make it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.helpers.paths import ROOT

TOP = ("engine", "tenants")


def _modules() -> dict[str, Path]:
    out = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _node(module: str, modules: dict[str, Path]) -> str:
    """The package a module belongs to, or the module itself if it sits at the top."""
    path = modules[module]
    if path.name == "__init__.py":
        return module
    parent = module.rpartition(".")[0]
    return module if parent in TOP else parent


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return found


def package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, path in modules.items():
        source = _node(module, modules)
        for name, line in _imports(path):
            target_module = _resolve(name, modules)
            if target_module is None:
                continue
            target = _node(target_module, modules)
            # A package's __init__ naming its own submodules is not a dependency.
            if target != source and not target.startswith(source + "."):
                edges[source].add(target)
                where[(source, target)].append(f"{path.relative_to(ROOT)}:{line}")
    return edges, where


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_package_imports_one_that_imports_it_back():
    edges, where = package_graph()
    report = []
    for component in cycles(edges):
        report.append(" <-> ".join(component))
        for a in component:
            for b in component:
                if b in edges.get(a, ()):
                    report.append(f"  {a} -> {b}: {', '.join(where[(a, b)][:3])}")
    assert not report, "import cycles between packages:\n" + "\n".join(report)


def test_the_pipeline_values_import_nothing_from_engine():
    """engine.pipeline is the leaf every package may name."""
    edges, where = package_graph()
    engine_deps = sorted(t for t in edges.get("engine.pipeline", ()) if t.startswith("engine"))
    assert not engine_deps, [where[("engine.pipeline", t)] for t in engine_deps]


def test_the_graph_sees_function_level_imports(tmp_path):
    """The checker itself: an import inside a function is an edge, one under
    TYPE_CHECKING is not."""
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from a import x\n"
        "def f():\n    from b import y\n"
    )
    assert [name for name, _ in _imports(path)] == ["typing.TYPE_CHECKING", "b.y"]
    assert cycles({"p": {"q"}, "q": {"p"}, "r": {"p"}}) == [["p", "q"]]


# --- the layout (docs/architecture.md, "Layout") ---------------------------------------------

TOP_LEVEL_MODULES = 20
"""At most so many modules directly in ``tenants/``: the rest sit in packages
named for their concern (catalog, objectstore, objects, reads, timeline, spark)."""
ENGINE_CATALOG = "tenants.catalog.engine"
"""The catalog statements only the engine runs (its journal, pins, installs, staging, GC)."""


def _catalog_imports() -> tuple[dict[str, list[str]], set[str]]:
    """(catalog module -> where the engine imports it, catalog modules the store imports)."""
    modules = _modules()
    by_engine: dict[str, list[str]] = defaultdict(list)
    by_store: set[str] = set()
    for module, path in modules.items():
        for name, line in _imports(path):
            target = _resolve(name, modules)
            if target is None or not target.startswith("tenants.catalog"):
                continue
            if module.startswith("engine."):
                by_engine[target].append(f"{path.relative_to(ROOT)}:{line}")
            elif not module.startswith(ENGINE_CATALOG):
                by_store.add(target)
    return by_engine, by_store


def test_the_engine_reaches_the_stores_catalog_only_where_the_store_does():
    """The engine's own statements sit in tenants.catalog.engine; any other catalog
    module it imports is one the store itself uses (a shared concept, not a back door)."""
    by_engine, by_store = _catalog_imports()
    stray = {
        target: where[:3]
        for target, where in by_engine.items()
        if not target.startswith(ENGINE_CATALOG) and target not in by_store
    }
    assert not stray, f"engine imports catalog modules the store does not use: {stray}"


def test_the_store_never_imports_the_engines_catalog_statements():
    modules = _modules()
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in modules.items()
        if module.startswith("tenants") and not module.startswith(ENGINE_CATALOG)
        for name, line in _imports(path)
        if (_resolve(name, modules) or "").startswith(ENGINE_CATALOG)
    ]
    assert not found, found


def test_tenants_keeps_a_small_top_level():
    top = sorted(p.name for p in (ROOT / "tenants").glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, f"{len(top)} modules directly in tenants/: {top}"


def test_no_file_is_imported_under_two_names():
    """Every module of tenants, engine and the tests imported in one process: no
    file may be loaded twice under two names (a helper reached both as ``oracle``
    and ``tests.helpers.oracle`` is two modules with two copies of its state)."""
    names = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for top in (*TOP, "tests")
        for p in sorted((ROOT / top).rglob("*.py"))
        if p.name != "__init__.py"
    ]
    script = (
        "import importlib, sys, collections\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "seen = collections.defaultdict(list)\n"
        "for name, module in list(sys.modules.items()):\n"
        "    path = getattr(module, '__file__', None)\n"
        "    if path and path.startswith(tuple(sys.argv[1:])):\n"
        "        seen[path].append(name)\n"
        "print([sorted(n) for n in seen.values() if len(n) > 1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *(f"{ROOT / top}/" for top in (*TOP, "tests"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout
