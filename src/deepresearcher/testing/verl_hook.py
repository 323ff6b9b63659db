"""Ray's worker setup hook for :mod:`deepresearcher.testing.verl_trainer`, kept light on purpose.

verl's ``TaskRunnerV1`` looks its trainer up by name in a registry filled when a trainer class is imported,
inside its own Ray worker. This hook runs in every Ray worker of the run (storage units, agent-loop
workers, ...); importing the stand-ins there would load verl and torch into each. So it only waits: when
a worker imports ``verl.trainer.ppo.v1`` (the TaskRunner does, to find its trainer), the stand-ins are
imported right after it and their trainer mode is registered.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

TRIGGER = "verl.trainer.ppo.v1"
STANDINS = "deepresearcher.testing.verl_trainer"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of ``TRIGGER`` so the stand-ins load once it has run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            importlib.import_module(STANDINS)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Register the stand-in trainer mode as soon as this worker imports verl's v1 trainers."""
    if TRIGGER in sys.modules:
        importlib.import_module(STANDINS)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
