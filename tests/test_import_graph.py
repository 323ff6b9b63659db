"""Imports run one way: no module of ``deepresearcher`` reaches itself again through its imports.

The graph is read from the source with ``ast``, lazy imports inside functions included: a cycle hidden
in a function body still couples the modules (``eval.report`` <-> ``eval.runner`` <-> ``eval.viewer`` once).
"""

from __future__ import annotations

import ast
from pathlib import Path

import deepresearcher

PACKAGE = Path(deepresearcher.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports (anywhere in its body)."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from a.b import c` imports a.b, and a.b.c too when c is a module
                imported |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
        graph[name] = {m for m in imported if m in files and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert {"deepresearcher.eval.runner", "deepresearcher.reports.page", "deepresearcher.train.report"} <= graph.keys()
    assert "deepresearcher.eval.report" in graph["deepresearcher.eval.runner"], "the graph sees lazy imports"
    assert cycles(graph) == [], "modules that import each other; make the dependency one-way"


def test_reports_depend_on_neither_eval_nor_train() -> None:
    """The report page is shared: eval and training import it, it imports neither."""
    graph = import_graph()
    for name in (m for m in graph if m.startswith("deepresearcher.reports")):
        assert not {m for m in graph[name] if m.startswith(("deepresearcher.eval", "deepresearcher.train"))}, name
    assert "deepresearcher.reports" in graph["deepresearcher.eval.report"]
    assert "deepresearcher.reports" in graph["deepresearcher.train.report"]
