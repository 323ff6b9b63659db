"""The import arrows of docs/ARCHITECTURE.md point one way: a module never imports a layer above it.

Checked on the source (every ``import`` and ``from ... import``, lazy ones inside functions included),
so a new import that crosses a layer fails here before it makes a cycle at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import deepresearcher

PACKAGE = Path(deepresearcher.__file__).parent

FORBIDDEN = {
    "inference": ("generate", "llm", "agent", "train", "warmstart", "quickstart", "eval", "web", "endpoint", "cli"),
    "llm": ("generate", "agent", "train", "warmstart", "quickstart", "eval", "endpoint", "cli"),
    "generate": ("llm", "agent", "train", "warmstart", "quickstart", "eval", "endpoint", "cli"),
    "web": ("agent", "train", "warmstart", "quickstart", "eval", "endpoint", "cli"),
    "world": ("web", "agent", "train", "warmstart", "quickstart", "eval", "endpoint", "cli"),
    "agent": ("train", "warmstart", "quickstart", "eval", "endpoint", "cli"),
    "train": ("warmstart", "quickstart", "cli"),
    "warmstart": ("quickstart", "cli"),
    "quickstart": ("cli",),
    "endpoint": ("train", "warmstart", "quickstart", "eval", "cli"),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n.split(".")[1] for n in names if n.startswith("deepresearcher.") and n.count(".") >= 1}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    crossings = {
        f"{path.relative_to(PACKAGE)} imports deepresearcher.{name}"
        for path in (PACKAGE / layer).rglob("*.py")
        for name in _imports(path) & set(FORBIDDEN[layer])
    }
    assert not crossings, sorted(crossings)
