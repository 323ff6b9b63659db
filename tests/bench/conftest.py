"""Benchmarks are files under the package's ``bench/`` (run by ``deepresearcher bench NAME``), not modules of
an importable package: tests load them by path, as the command does."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from deepresearcher.cli.bench_cmd import BENCH_DIR


@pytest.fixture(scope="module")
def load_bench() -> Iterator[Callable[[str], ModuleType]]:
    """``load_bench("search")`` is ``bench/search.py`` as a module (registered while the test module runs)."""
    loaded: list[str] = []

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"bench_{name}_under_test", BENCH_DIR / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
        spec.loader.exec_module(module)
        loaded.append(spec.name)
        return module

    yield load
    for name in loaded:
        sys.modules.pop(name, None)
