"""The handler service over real HTTP: search and browse on a loopback web, 4xx, auth, metrics, shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys

import aiohttp
import pytest

from deepresearcher.errors import ConfigError
from deepresearcher.testing.handlers import HandlerProcess, handler_thread
from deepresearcher.web.server import create_app


@pytest.fixture
def config(web, tmp_path):
    return web.config(tmp_path / "cache.sqlite")


async def _post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        kwargs = {"data": body} if isinstance(body, (bytes, str)) else {"json": body}
        async with session.post(url, headers=headers, **kwargs) as resp:
            return resp.status, await resp.json()


async def _get_text(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        return await resp.text()


async def test_search_and_browse_end_to_end(web, config):
    """Search hits point at the loopback website, browsing one returns its relevant notes, and a
    repeated query is served from the cache without reaching the search API again."""
    with handler_thread(create_app(config)) as url:
        status, body = await _post(url + "/v1/search", {"queries": ["Zeigryndland population cities", "Hyport"], "top_k": 5})
        assert status == 200
        first, second = body["results"]
        assert first["query"] == "Zeigryndland population cities" and second["query"] == "Hyport"
        assert 0 < len(first["hits"]) <= 5 and first["error"] is None
        assert all(h["url"].startswith(web.site.base_url) for h in first["hits"])

        calls = web.search.calls
        status, again = await _post(url + "/v1/search", {"queries": ["zeigryndland  POPULATION cities"], "top_k": 5})
        assert status == 200 and again["results"][0]["hits"] == first["hits"]
        assert web.search.calls == calls, "a repeated query reached the upstream"

        page_url = next(h["url"] for h in first["hits"] if "List_of_cities" in h["url"])
        status, body = await _post(
            url + "/v1/browse",
            {"question": "What is the population of Hyport?", "urls": [page_url, web.site.url("/_t/image")],
             "notes": [], "queries": ["Hyport population"]},
        )
        assert status == 200
        page, image = body["results"]
        assert page["url"] == page_url and page["error"] is None
        assert any("2,987,800" in note["text"] for note in page["notes"])
        assert "unsupported content" in image["error"]


async def test_a_host_name_the_resolver_rejects_is_one_error_item(web, config):
    """A browse batch with a URL whose host the IDNA codec refuses (a 100,000-character name) answers 200:
    that URL gets its own error, the good page beside it its notes."""
    good = web.site.url("/_t/text")
    bad = "http://" + "a" * 100_000 + ".example/page"
    with handler_thread(create_app(config)) as url:
        status, body = await _post(url + "/v1/browse", {"question": "What does the text say?", "urls": [bad, good]})
    assert status == 200
    refused, page = body["results"]
    assert "host name" in refused["error"] and "100008 characters" in refused["error"]
    assert page["url"] == good and page["error"] is None


async def test_bad_requests_get_clear_4xx(web, config):
    """Malformed JSON is 400; schema violations and oversized batches are 422 with a message naming the field."""
    config.serve.max_queries = 2
    config.serve.max_body_bytes = 1024
    with handler_thread(create_app(config)) as url:
        status, body = await _post(url + "/v1/search", b"{not json")
        assert status == 400 and body["error"]["type"] == "invalid_json"
        status, body = await _post(url + "/v1/search", {"top_k": 5})
        assert status == 422 and "queries" in body["error"]["message"]
        status, body = await _post(url + "/v1/search", {"queries": ["a"], "top_k": 0})
        assert status == 422 and "top_k" in body["error"]["message"]
        status, body = await _post(url + "/v1/search", {"queries": ["a"], "colour": "red"})
        assert status == 422 and "colour" in body["error"]["message"]
        status, body = await _post(url + "/v1/search", {"queries": ["a", "b", "c"]})
        assert status == 422 and "serve.max_queries" in body["error"]["message"]
        status, body = await _post(url + "/v1/browse", {"question": "q", "urls": []})
        assert status == 422 and "urls" in body["error"]["message"]
        status, body = await _post(url + "/v1/browse", {"question": "q", "urls": ["u"], "notes": ["x" * 2000]})
        assert status == 413 and "serve.max_body_bytes" in body["error"]["message"]


async def test_bearer_token_is_required_when_configured(config, monkeypatch):
    """With serve.auth_token_env set, /v1/* needs the token; /healthz stays open; an unset variable is a config error."""
    config.serve.auth_token_env = "DR_TEST_HANDLER_TOKEN"
    with pytest.raises(ConfigError, match="DR_TEST_HANDLER_TOKEN"):
        create_app(config)
    monkeypatch.setenv("DR_TEST_HANDLER_TOKEN", "s3cret")
    with handler_thread(create_app(config)) as url:
        body = {"queries": ["Hyport"]}
        assert (await _post(url + "/v1/search", body))[0] == 401
        assert (await _post(url + "/v1/search", body, {"Authorization": "Bearer wrong"}))[0] == 401
        status, answer = await _post(url + "/v1/search", body, {"Authorization": "Bearer s3cret"})
        assert status == 200 and answer["results"][0]["hits"]
        assert '"status": "ok"' in (await _get_text(url + "/healthz")).replace('":"', '": "')


async def test_metrics_count_requests_errors_and_cache(config):
    """/metrics reports requests by route and status, errors by type, latency and the cache's counters."""
    with handler_thread(create_app(config)) as url:
        for _ in range(3):
            assert (await _post(url + "/v1/search", {"queries": ["Hyport"]}))[0] == 200
        assert (await _post(url + "/v1/search", {"queries": []}))[0] == 422
        text = await _get_text(url + "/metrics")
    assert 'deepresearcher_handler_requests_total{route="search",status="200"} 3.0' in text
    assert 'deepresearcher_handler_requests_total{route="search",status="422"} 1.0' in text
    assert 'deepresearcher_handler_errors_total{route="search",type="validation"} 1.0' in text
    assert 'deepresearcher_handler_request_seconds_count{route="search"} 4.0' in text
    assert 'deepresearcher_cache_entries{backend="serper",kind="search"} 1.0' in text
    assert 'deepresearcher_cache_hits_total{backend="serper",kind="search"} 2.0' in text


async def test_overload_is_answered_503_so_clients_go_elsewhere(web, config):
    """Beyond serve.max_concurrency in flight and serve.max_pending waiting, requests get 503 + Retry-After."""
    config.serve.max_concurrency = 1
    config.serve.max_pending = 1
    slow = {"question": "q", "urls": [web.site.url("/_t/slow?s=1")]}
    with handler_thread(create_app(config)) as url:
        async with aiohttp.ClientSession() as session:

            async def post() -> tuple[int, str | None]:
                async with session.post(url + "/v1/browse", json=slow) as resp:
                    return resp.status, resp.headers.get("Retry-After")

            answers = await asyncio.gather(*(post() for _ in range(4)))
    assert sorted(s for s, _ in answers) == [200, 200, 503, 503]
    assert all(retry == "1" for s, retry in answers if s == 503)


def test_graceful_shutdown_finishes_in_flight_and_flushes_cache(web, tmp_path):
    """SIGTERM to `deepresearcher serve` lets a slow in-flight browse finish, then exits cleanly with its
    fetch recorded in the cache file."""
    cache = tmp_path / "cache.sqlite"
    cfg_path = web.write_config(tmp_path / "handler.yaml", cache)
    slow_url = web.site.url("/_t/slow?s=1.5")

    async def scenario(proc: HandlerProcess) -> tuple[int, dict]:
        request = asyncio.ensure_future(_post(proc.url + "/v1/browse", {"question": "q", "urls": [slow_url]}))
        while web.site.in_flight == 0:  # the handler is now inside the request, fetching the slow page
            await asyncio.sleep(0.01)
        exit_code = asyncio.get_running_loop().run_in_executor(None, proc.stop)
        status, body = await request
        assert await exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM after its clean shutdown
        return status, body

    proc = HandlerProcess(cfg_path, env=web.env_vars).start()
    try:
        status, body = asyncio.run(scenario(proc))
    finally:
        proc.kill()
    assert status == 200 and body["results"][0]["error"] is None and body["results"][0]["title"] == "Slow"
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*) FROM records WHERE kind = 'fetch'").fetchone()[0] == 1


def test_serve_on_a_taken_port_is_one_clear_error(tmp_path):
    """`deepresearcher serve` on a port already in use exits with code 2 and one `Error:` line naming the fix."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "deepresearcher.cli.main", "serve", "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )
    assert done.returncode == 2
    assert f"Cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("setting", "message"), [
    ("search.index={tmp}/no-index", "Error: No search index in"),
    ("search.backend=serper", "Error: Backend 'serper' needs an API key: export SERPER_API_KEY"),
])
def test_a_handler_that_cannot_start_says_why_in_one_line(tmp_path, setting, message):
    """`deepresearcher serve` with no index or no API key exits 2 with the one-line `Error:`, before listening."""
    env = {k: v for k, v in os.environ.items() if k != "SERPER_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "deepresearcher.cli.main", "serve", "--port", "0", "--set", setting.format(tmp=tmp_path)],
        capture_output=True, text=True, timeout=60, env={**env, "COLUMNS": "200"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message) and "Traceback" not in done.stderr
    assert "listening" not in done.stdout
