"""Live search backends over real HTTP against loopback emulators of Serper, SearXNG and Brave."""

from __future__ import annotations

import importlib.util
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepresearcher.config import BackendsConfig, BackendSettings, SearchConfig
from deepresearcher.errors import (
    BackendUnavailableError,
    BadResponseError,
    ConfigError,
    MissingDependencyError,
    RateLimitedError,
    ReplayMissError,
)
from deepresearcher.testing.emulators import Fault, SearchEmulator
from deepresearcher.web.backends import make_backend
from deepresearcher.web.backends.brave import BraveBackend
from deepresearcher.web.backends.searxng import SearxngBackend
from deepresearcher.web.backends.serper import SerperBackend
from deepresearcher.web.cache import WebCache, cached
from deepresearcher.web.leak_filter import LeakFilter
from deepresearcher.web.types import SearchHit

DOCS = [
    {"url": "https://example.org/dune", "title": "Dune (novel)", "text": "Dune is a 1965 novel by Frank Herbert."},
    {"url": "https://example.org/herbert", "title": "Frank Herbert", "text": "Frank Herbert was an American writer."},
    {"url": "https://huggingface.co/datasets/hotpot_qa", "title": "hotpot_qa", "text": "Who wrote Dune? Frank Herbert"},
    {"url": "https://example.org/tea", "title": "Tea", "text": "Tea is an aromatic beverage."},
]
KEY = "sk-test-SECRET-4242"


def make(flavor: str, base_url: str, key: str = KEY):
    if flavor == "serper":
        return SerperBackend(key, base_url=base_url)
    if flavor == "brave":
        return BraveBackend(key, base_url=base_url)
    return SearxngBackend(base_url)


@pytest.fixture(params=["serper", "searxng", "brave"])
def emu(request: pytest.FixtureRequest) -> Iterator[SearchEmulator]:
    with SearchEmulator(DOCS, flavor=request.param, api_key=KEY).running() as server:
        yield server


async def test_each_format_is_normalized_to_title_url_snippet(emu: SearchEmulator) -> None:
    """Every API's answer becomes ranked SearchHits with plain-text snippets."""
    backend = make(emu.flavor, emu.base_url)
    try:
        hits = await backend.search("Dune novel Frank Herbert", 2)
    finally:
        await backend.aclose()
    assert len(hits) == 2
    assert hits[0].url == "https://example.org/dune"
    assert hits[0].title == "Dune (novel)"
    assert "1965 novel" in hits[0].snippet and "<strong>" not in hits[0].snippet
    assert emu.queries == ["Dune novel Frank Herbert"]


async def test_errors_are_mapped(emu: SearchEmulator) -> None:
    """429 -> RateLimitedError with Retry-After, 500 -> BackendUnavailableError, odd JSON -> BadResponseError."""
    backend = make(emu.flavor, emu.base_url)
    emu.script(Fault(429, retry_after=7), Fault(500), Fault(200))
    try:
        with pytest.raises(RateLimitedError) as rate:
            await backend.search("dune", 3)
        assert rate.value.retry_after == pytest.approx(7)
        with pytest.raises(BackendUnavailableError, match="HTTP 500"):
            await backend.search("dune", 3)
        if emu.flavor == "searxng":
            with pytest.raises(BadResponseError, match="'results' list"):
                await backend.search("dune", 3)
        else:  # Serper and Brave leave their result list out when nothing matched
            assert await backend.search("dune", 3) == []
    finally:
        await backend.aclose()


async def test_unreachable_backend_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = SerperBackend(KEY, base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(BackendUnavailableError, match="unreachable"):
        await backend.search("q", 3)
    await backend.aclose()


async def test_api_key_never_appears_in_errors_logs_or_reprs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The key from the environment is sent (the emulator accepts it) but never printed anywhere."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    with SearchEmulator(DOCS, flavor="serper", api_key=KEY).running() as server:
        settings = BackendSettings(base_url=server.base_url, api_key_env="SERPER_API_KEY", retries=1, backoff_s=0.0)
        backend = make_backend(SearchConfig(backend="serper"), BackendsConfig(serper=settings))
        assert (await backend.search("dune", 1))[0].url == "https://example.org/dune"
        messages = [repr(backend), repr(backend.backend), repr(backend.backend.backend)]
        server.script(Fault(429, retry_after=0), Fault(500), Fault(500), Fault(500))
        for _ in range(2):
            with pytest.raises(Exception) as err:
                await backend.search("dune", 1)
            messages += [str(err.value), repr(err.value), str(err.value.__cause__)]
        await backend.aclose()
        wrong = SerperBackend("sk-wrong-SECRET-0000", base_url=server.base_url)
        with pytest.raises(ConfigError) as err:
            await wrong.search("dune", 1)
        assert "api_key_env" in str(err.value)
        messages.append(str(err.value))
        await wrong.aclose()
    messages += [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "SECRET" in m]


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="export BRAVE_API_KEY="):
        make_backend(SearchConfig(backend="brave"))


def test_registry_rejects_unknown_names_and_loads_dotted_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="use one of local, serper, searxng, brave, ddgs"):
        make_backend(SearchConfig(backend="bing"))
    backend = make_backend(
        SearchConfig(backend="deepresearcher.web.backends.searxng:SearxngBackend.from_settings"),
        BackendsConfig(blocked=[], custom=BackendSettings(base_url="http://127.0.0.1:9")),
        resilient=False,
    )
    assert isinstance(backend, SearxngBackend)
    with pytest.raises(ConfigError, match="needs an index"):
        make_backend(SearchConfig(backend="local"))


@pytest.mark.skipif(importlib.util.find_spec("ddgs") is not None, reason="ddgs is installed")
def test_ddgs_without_its_package_names_the_install_command() -> None:
    with pytest.raises(MissingDependencyError, match="pip install ddgs"):
        make_backend(SearchConfig(backend="ddgs"))


def test_leak_filter_patterns() -> None:
    leak = LeakFilter(["huggingface.co/datasets", "kaggle.com"])
    assert leak.blocks("https://huggingface.co/datasets/hotpot_qa/viewer")
    assert leak.blocks("https://www.kaggle.com/anything")
    assert leak.blocks("http://HuggingFace.co/datasets")
    assert not leak.blocks("https://huggingface.co/models/foo")
    assert not leak.blocks("https://huggingface.co/datasets-guide")
    assert not leak.blocks("https://notkaggle.com/x")


async def test_configured_backend_drops_dataset_pages() -> None:
    """With the default blocked list, the dataset mirror never reaches the policy."""
    with SearchEmulator(DOCS, flavor="searxng").running() as server:
        backends = BackendsConfig(searxng=BackendSettings(base_url=server.base_url))
        backend = make_backend(SearchConfig(backend="searxng"), backends)
        hits = await backend.search("who wrote dune frank herbert", 10)
        await backend.aclose()
    urls = [h.url for h in hits]
    assert "https://example.org/dune" in urls
    assert not [u for u in urls if "huggingface.co" in u]


async def test_repeated_query_never_reaches_upstream_and_replay_makes_no_calls(tmp_path: Path) -> None:
    """Through the cache: one upstream call per distinct query; replay answers with zero calls."""
    with SearchEmulator(DOCS, flavor="serper", api_key=KEY).running() as server:
        backend = SerperBackend(KEY, base_url=server.base_url)

        async def search(cache: WebCache, query: str) -> list[SearchHit]:
            return await cached(
                cache, "search", backend.name, query, {"top_k": 5}, lambda: backend.search(query, 5),
                encode=lambda hits: [h.model_dump() for h in hits], decode=lambda d: [SearchHit(**h) for h in d],
            )

        async with WebCache(tmp_path / "c.sqlite") as cache:
            first = [await search(cache, q) for q in ("frank herbert", "tea", "Frank  Herbert", "frank herbert")]
        assert server.calls == 2
        assert first[0] == first[2] == first[3]
        server.reset_counts()
        async with WebCache(tmp_path / "c.sqlite", mode="replay") as cache:
            assert [await search(cache, q) for q in ("frank herbert", "tea")] == first[:2]
            with pytest.raises(ReplayMissError, match="readwrite"):
                await search(cache, "coffee")
        assert server.calls == 0
        await backend.aclose()
