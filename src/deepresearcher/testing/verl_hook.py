"""Ray's worker setup hook for the verl stand-ins (:mod:`deepresearcher.testing.verl_trainer`,
:mod:`deepresearcher.testing.verl_async`), kept light on purpose.

verl's ``TaskRunnerV1`` looks its trainer up by name in a registry filled when a trainer class is imported,
inside its own Ray worker; the asynchronous recipes' task runners build the rollouter and trainer classes
their module imported. This hook runs in every Ray worker of the run (storage units, agent-loop workers, ...);
importing the stand-ins there would load verl and torch into each. So it only waits: when a worker
imports one of ``STANDINS``' verl modules (the task runner's process does), the matching stand-ins are
imported right after it, registering their trainer mode or putting their classes in place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

STANDINS = {
    "verl.trainer.ppo.v1": "deepresearcher.testing.verl_trainer",
    "verl.experimental.fully_async_policy.fully_async_main": "deepresearcher.testing.verl_async",
    "verl.experimental.one_step_off_policy.main_ppo": "deepresearcher.testing.verl_async",
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of each verl module of ``STANDINS`` so its stand-ins load once
    it has run."""

    def __init__(self) -> None:
        self.waiting = dict(STANDINS)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.waiting:
            return None
        standins = self.waiting.pop(name)
        if not self.waiting:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            importlib.import_module(standins)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Load the stand-ins as soon as this worker imports the verl modules they stand in for."""
    if any(isinstance(f, _AfterImport) for f in sys.meta_path):
        return
    finder = _AfterImport()
    for trigger, standins in STANDINS.items():
        if trigger in sys.modules:
            finder.waiting.pop(trigger)
            importlib.import_module(standins)
    if finder.waiting:
        sys.meta_path.insert(0, finder)
