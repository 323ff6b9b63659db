"""Fixtures of the web tests: the synthetic world served as a live web on loopback."""

from __future__ import annotations

import pytest

from deepresearcher.testing.loopback_web import LoopbackWeb
from deepresearcher.world import build_world


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """A tiny world behind a loopback website and Serper emulator; their env vars set for the module."""
    world = tmp_path_factory.mktemp("world")
    build_world(7, "tiny", world)
    with pytest.MonkeyPatch.context() as mp, LoopbackWeb.from_world(world).running() as running:
        for name, value in running.env_vars.items():
            mp.setenv(name, value)
        yield running
