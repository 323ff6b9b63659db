"""The handler client over real servers: spreading, failover past dead servers, 4xx, and killing a handler mid-batch.

Keyed routing's own behaviour (homes, split batches, one upstream call per query) is in test_client_routing.py."""

from __future__ import annotations

import asyncio
import socket
from contextlib import ExitStack

import pytest

from deepresearcher.errors import (
    BackendUnavailableError,
    ConfigError,
    RequestRejectedError,
)
from deepresearcher.testing.handlers import HandlerProcess, handler_thread
from deepresearcher.web.cache import WebCache
from deepresearcher.web.client import RemoteEnvironment, make_remote_environment, rendezvous_order, routing_key
from deepresearcher.web.interface import Environment
from deepresearcher.web.server import create_app


@pytest.fixture
def dead_url() -> str:
    """A loopback port nobody listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def two_handlers(web, tmp_path):
    config = web.config(tmp_path / "cache.sqlite")
    config.search.top_k = 2
    with ExitStack() as stack:
        yield [stack.enter_context(handler_thread(create_app(config))) for _ in range(2)], config


QUERIES = ["Grirstan", "Hyport population", "Diastylstad", "Treraimere", "Tryyunmere census"]


def homed_at(urls: list[str], path: str, candidates: list[str], index: int) -> list[str]:
    """The candidates whose keyed-routing home is server ``index``: keyed tests send traffic there on purpose."""
    return [c for c in candidates if rendezvous_order(routing_key(path, c), urls)[0] == index]


async def test_requests_spread_over_servers_with_the_environment_interface(two_handlers, web):
    """Least-loaded routing: concurrent calls are shared by both servers, and answers match the queries in order."""
    urls, config = two_handlers
    config.env.server_urls = urls
    config.env.routing = "least_loaded"
    async with make_remote_environment(config) as env:
        assert isinstance(env, Environment) and env.routing == "least_loaded"
        batches = await asyncio.gather(*(env.search([q, "Grirstan"], 3) for q in QUERIES * 8))
        browse = await env.browse("Population of Hyport?", [batches[0][0].hits[0].url], notes=["x"], queries=["Hyport"])
        default_k = await env.search(["Grirstan"])
    assert [b[0].query for b in batches] == QUERIES * 8 and all(b[1].hits for b in batches)
    assert all(s.served > 0 for s in env.servers), [s.served for s in env.servers]
    assert browse[0].error is None and browse[0].notes
    assert len(default_k[0].hits) == 2, "without top_k the servers' search.top_k applies"


@pytest.mark.parametrize("routing", ["keyed", "least_loaded"])
async def test_dead_server_is_skipped_without_failing_a_request(two_handlers, dead_url, routing):
    """A refused server is failed over at once, marked dead, and then not tried again while dead (keyed:
    the queries are ones whose home is the dead server)."""
    urls, _ = two_handlers
    servers = [dead_url, *urls]
    queries = QUERIES if routing == "least_loaded" else homed_at(
        servers, "/v1/search", [f"{q} {i}" for q in QUERIES for i in range(10)], 0)[:5]
    env = RemoteEnvironment(servers, dead_for_s=60, routing=routing)
    try:
        results = await asyncio.gather(*(env.search([q], 3) for q in queries * 4))
        assert all(r[0].error is None and r[0].hits for r in results)
        dead = env.servers[0]
        assert dead.served == 0 and dead.failures >= 1
        failures = dead.failures
        for q in queries:
            assert (await env.search([q], 3))[0].hits
        assert dead.failures == failures, "a server marked dead was tried again"
    finally:
        await env.aclose()


async def test_all_servers_down_is_a_clear_error(dead_url):
    """When every server fails, the error names each one and says what to check."""
    env = RemoteEnvironment([dead_url, dead_url], max_attempts=2)
    try:
        with pytest.raises(BackendUnavailableError, match="env.server_urls"):
            await env.search(["q"], 3)
    finally:
        await env.aclose()


async def test_4xx_is_raised_without_trying_other_servers(web, tmp_path, monkeypatch):
    """A request every server would reject is not retried; a missing token is a config error."""
    config = web.config(tmp_path / "cache.sqlite")
    config.serve.max_queries = 1
    config.serve.auth_token_env = "DR_TEST_TOKEN"
    monkeypatch.setenv("DR_TEST_TOKEN", "tok")
    with handler_thread(create_app(config)) as a, handler_thread(create_app(config)) as b:
        async with RemoteEnvironment([a, b]) as anonymous:
            with pytest.raises(ConfigError, match="token"):
                await anonymous.search(["Hyport"], 3)
        config.env.server_urls = [a, b]
        config.env.auth_token_env = "DR_TEST_TOKEN"
        async with make_remote_environment(config) as env:
            assert (await env.search(["Hyport"], 3))[0].hits
            with pytest.raises(RequestRejectedError, match="serve.max_queries"):
                await env.search(["Hyport", " HYPORT"], 3)  # one key, so one home: the batch is not split
            assert sum(s.failures for s in env.servers) == 0


def test_killing_a_handler_mid_batch_loses_nothing(web, tmp_path):
    """Handler A (a `deepresearcher serve` process) and two more handlers share one cache file. A answers
    a first batch alone, then is SIGKILLed while a second batch is in flight on all three: the client
    finishes every request on the others, and every answer A gave before dying is in the cache,
    identical to what the client received."""
    cache_path = tmp_path / "cache.sqlite"
    proc = HandlerProcess(web.write_config(tmp_path / "handler.yaml", cache_path), env=web.env_vars).spawn()
    config = web.config(cache_path)
    first = [f"{q} {i}" for i, q in enumerate(QUERIES * 4)]
    second = [f"{q} again {i}" for i, q in enumerate(QUERIES * 8)]

    async def scenario(urls: list[str]):
        async with RemoteEnvironment(urls[:1]) as only_a:
            answered_by_a = await asyncio.gather(*(only_a.search([q], 5) for q in first))
        web.search.delay_s = 0.05  # keep the second batch in flight long enough to kill A inside it
        async with RemoteEnvironment(urls, dead_for_s=60) as env:
            batch = asyncio.gather(*(env.search([q], 5) for q in second))
            while env.servers[0].in_flight == 0:
                await asyncio.sleep(0.005)
            await asyncio.to_thread(proc.kill)
            return answered_by_a, await batch, env.servers

    try:
        with handler_thread(create_app(config)) as b, handler_thread(create_app(config)) as c:
            proc.wait_ready()
            answered_by_a, results, servers = asyncio.run(scenario([proc.url, b, c]))
    finally:
        web.search.delay_s = 0.0
        proc.stop()
    assert proc.proc.returncode == -9
    assert [r[0].query for r in results] == second
    assert all(r[0].error is None and r[0].hits for r in results), "a request failed"
    assert servers[0].failures >= 1 and servers[1].served + servers[2].served > 0

    with WebCache(cache_path, mode="replay") as cache:
        for batch in (answered_by_a, results):
            for (result,) in batch:
                stored = cache.lookup("search", "serper", result.query, {"top_k": 5})
                assert stored is not None, f"{result.query!r} missing from the cache"
                assert [h["url"] for h in stored] == [h.url for h in result.hits]


@pytest.mark.parametrize("routing", ["keyed", "least_loaded"])
async def test_overloaded_server_is_retried_elsewhere_but_not_marked_dead(web, tmp_path, routing):
    """A 503 (server busy) sends the request to another server without taking the busy one out of rotation
    (keyed: the pages are ones whose home is the busy server)."""
    busy = web.config(tmp_path / "cache.sqlite")
    busy.serve.max_concurrency, busy.serve.max_pending = 1, 0
    free = web.config(tmp_path / "cache.sqlite")
    slow = web.site.url("/_t/slow?s=1")
    with handler_thread(create_app(busy)) as a, handler_thread(create_app(free)) as b:
        pages = [f"{slow}&n={i}" for i in range(40)]
        pages = pages[:4] if routing == "least_loaded" else homed_at([a, b], "/v1/browse", pages, 0)[:4]
        async with RemoteEnvironment([a, b], dead_for_s=60, routing=routing) as env:
            results = await asyncio.gather(*(env.browse("q", [page]) for page in pages))
    assert all(r[0].error is None and r[0].title == "Slow" for r in results)
    server_a = env.servers[0]
    assert server_a.failures >= 1 and server_a.served >= 1
    assert server_a.dead_until == 0.0, "a busy server was marked dead"
