"""The real services, once each: off by default (``pytest -m live``), skipped without their key or host."""

from __future__ import annotations

import importlib.util
import os

import pytest

from deepresearcher.config import BackendsConfig, BackendSettings, SearchConfig
from deepresearcher.web.backends import make_backend

pytestmark = pytest.mark.live

QUERY = "Frank Herbert Dune novel"


async def _check(backend_name: str, backends: BackendsConfig | None = None) -> None:
    backend = make_backend(SearchConfig(backend=backend_name), backends)
    try:
        hits = await backend.search(QUERY, 5)
    finally:
        await backend.aclose()
    assert 0 < len(hits) <= 5
    assert all(h.url.startswith("http") and h.title for h in hits)
    assert any("herbert" in (h.title + h.snippet).lower() for h in hits)


@pytest.mark.skipif(not os.environ.get("SERPER_API_KEY"), reason="SERPER_API_KEY is not set")
async def test_serper() -> None:
    await _check("serper")


@pytest.mark.skipif(not os.environ.get("BRAVE_API_KEY"), reason="BRAVE_API_KEY is not set")
async def test_brave() -> None:
    await _check("brave")


@pytest.mark.skipif(not os.environ.get("SEARXNG_URL"), reason="SEARXNG_URL (a SearXNG base URL) is not set")
async def test_searxng() -> None:
    await _check("searxng", BackendsConfig(searxng=BackendSettings(base_url=os.environ["SEARXNG_URL"])))


@pytest.mark.skipif(importlib.util.find_spec("ddgs") is None, reason="ddgs is not installed")
async def test_ddgs() -> None:
    await _check("ddgs")
