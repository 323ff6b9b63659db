"""The tools over MCP (``serve --mcp``): the official SDK's client against a real loopback handler and over stdio.

Each MCP answer is compared with what the agent loop gets for the same call when its environment is the same
handler's HTTP routes (``ToolBox`` over ``env.server_urls``), on a tiny world served as a live web (Serper
emulator + website), so the handler's cache records searches and fetches.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import httpx2
import orjson
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from deepresearcher.agent.mcp_server import MCP_PATH, mount_mcp
from deepresearcher.agent.tools import TOOL_SCHEMAS, ToolBox, ToolContext
from deepresearcher.testing.handlers import handler_thread, wait_healthy
from deepresearcher.web.client import make_remote_environment
from deepresearcher.web.server import create_app

QUESTION = "What is the population of Hyport?"


@pytest.fixture
def config(web, tmp_path):
    return web.config(tmp_path / "cache.sqlite")


def handler_with_mcp(config):
    app = create_app(config)
    mount_mcp(app, config)
    return app


@asynccontextmanager
async def mcp_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session on ``url``'s MCP endpoint."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, trust_env=False, timeout=60) as http,
        streamable_http_client(url + MCP_PATH, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def over_http(config, url: str, name: str, arguments: dict, question: str = "") -> str:
    """The observation the agent loop gets for a call when its environment is the handler at ``url``."""
    remote = config.model_copy(update={"env": config.env.model_copy(update={"server_urls": [url]})})
    env = make_remote_environment(remote)
    try:
        return (await ToolBox(env, config).call(name, arguments, ToolContext(question=question))).text
    finally:
        await env.aclose()


async def post(url: str, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def metrics(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as resp:
        return await resp.text()


def text_of(result) -> str:
    (content,) = result.content
    return content.text


async def test_the_tools_are_listed_with_the_agents_schemas(config):
    """tools/list names the agent's two tools with its own schemas; browse_webpage also requires the question."""
    with handler_thread(handler_with_mcp(config)) as url:
        async with mcp_session(url) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    agent = {s["function"]["name"]: s["function"] for s in TOOL_SCHEMAS}
    assert set(tools) == set(agent) == {"web_search", "browse_webpage"}
    assert tools["web_search"].input_schema == agent["web_search"]["parameters"]
    browse = tools["browse_webpage"].input_schema
    assert browse["properties"]["url_list"] == agent["browse_webpage"]["parameters"]["properties"]["url_list"]
    assert browse["properties"]["question"]["type"] == "string"
    assert browse["required"] == ["url_list", "question"]
    assert all(t.description == agent[name]["description"] for name, t in tools.items())
    assert all(t.annotations.read_only_hint for t in tools.values())


async def test_calls_are_answered_as_over_the_http_routes(web, config):
    """web_search and browse_webpage over MCP answer exactly what the agent loop observes through /v1/search and
    /v1/browse of the same handler, and carry the HTTP answers' hits and notes."""
    search = {"query": ["Zeigryndland population cities", "Hyport"]}
    with handler_thread(handler_with_mcp(config)) as url:
        async with mcp_session(url) as session:
            found = await session.call_tool("web_search", search)
            assert not found.is_error
            assert text_of(found) == await over_http(config, url, "web_search", search)

            status, http = await post(url + "/v1/search", {"queries": search["query"], "top_k": config.search.top_k})
            assert status == 200
            observed = orjson.loads(text_of(found))
            assert [o["search_query"] for o in observed] == [r["query"] for r in http["results"]]
            assert [[h["url"] for h in o["web_page_info_list"]] for o in observed] == \
                [[h["url"] for h in r["hits"]] for r in http["results"]]
            assert all(h["url"].startswith(web.site.base_url) for o in observed for h in o["web_page_info_list"])

            page = next(h["url"] for o in observed for h in o["web_page_info_list"] if "List_of_cities" in h["url"])
            browse = {"url_list": [page], "question": QUESTION}
            read = await session.call_tool("browse_webpage", browse)
            assert not read.is_error
            assert text_of(read) == await over_http(config, url, "browse_webpage", {"url_list": [page]}, QUESTION)

            status, http = await post(url + "/v1/browse", {"question": QUESTION, "urls": [page]})
            assert status == 200
            (notes,) = http["results"]
            (information,) = orjson.loads(text_of(read))
            assert information == {"url": page, "information": "\n".join(n["text"] for n in notes["notes"])}
            assert "2,987,800" in information["information"]


async def test_bad_calls_are_tool_errors_and_the_server_goes_on(config):
    """Bad arguments, a missing question and an unknown tool come back as tool errors (isError) with the agent's
    own messages; a good call after them is answered."""
    with handler_thread(handler_with_mcp(config)) as url:
        async with mcp_session(url) as session:
            bad = [("web_search", {}), ("web_search", {"query": "Hyport"}), ("web_search", {"query": [" "]}),
                   ("browse_webpage", {"url_list": 3, "question": QUESTION}), ("fetch", {"url": "x"})]
            for name, arguments in bad:
                result = await session.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                expected = await over_http(config, url, name, arguments, QUESTION)
                assert text_of(result) == expected and '"error"' in expected

            page = "https://example.org/"
            for arguments in ({"url_list": [page]}, {"url_list": [page], "question": " "}):
                result = await session.call_tool("browse_webpage", arguments)
                assert result.is_error and 'browse_webpage needs the argument \\"question\\"' in text_of(result)

            result = await session.call_tool("web_search", {"query": ["Hyport"]})
            assert not result.is_error and orjson.loads(text_of(result))[0]["web_page_info_list"]


async def test_the_handlers_cache_records_mcp_calls(web, config):
    """A repeated MCP search and page read are served from the handler's cache, which /v1/search shares: the
    search API is asked once. browse.only_searched_urls, a rule about one rollout's searches, does not refuse a
    call that carries none."""
    config.browse.only_searched_urls = True
    with handler_thread(handler_with_mcp(config)) as url:
        async with mcp_session(url) as session:
            calls = web.search.calls
            first = await session.call_tool("web_search", {"query": ["Hyport mayor"]})
            assert web.search.calls == calls + 1
            again = await session.call_tool("web_search", {"query": ["Hyport mayor"]})
            assert web.search.calls == calls + 1, "the repeated MCP search reached the search API"
            assert text_of(again) == text_of(first)
            assert (await post(url + "/v1/search", {"queries": ["Hyport mayor"]}))[0] == 200
            assert web.search.calls == calls + 1, "/v1/search missed what the MCP search recorded"

            page = orjson.loads(text_of(first))[0]["web_page_info_list"][0]["url"]
            for _ in range(2):
                read = await session.call_tool("browse_webpage", {"url_list": [page], "question": QUESTION})
                assert not read.is_error and "information" in orjson.loads(text_of(read))[0]
        text = await metrics(url)
    assert 'deepresearcher_cache_hits_total{backend="serper",kind="search"} 2.0' in text
    assert 'deepresearcher_cache_misses_total{backend="serper",kind="search"} 1.0' in text
    assert 'deepresearcher_cache_hits_total{backend="http",kind="fetch"} 1.0' in text


async def test_mcp_needs_the_handlers_bearer_token(config, monkeypatch):
    """With serve.auth_token_env set, /mcp answers 401 without the token, like /v1/*, and works with it."""
    config.serve.auth_token_env = "DR_TEST_MCP_TOKEN"
    monkeypatch.setenv("DR_TEST_MCP_TOKEN", "s3cret")
    with handler_thread(handler_with_mcp(config)) as url:
        status, body = await post(url + MCP_PATH, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert status == 401 and body["error"]["type"] == "unauthorized"
        async with mcp_session(url, token="s3cret") as session:
            assert len((await session.list_tools()).tools) == 2


async def test_stdio_transport_serves_the_same_tools(web, tmp_path):
    """``serve --mcp --transport stdio`` spawned by the SDK's stdio client lists and answers the tools, and
    flushes what it recorded into the cache file when the client closes it."""
    cache = tmp_path / "cache.sqlite"
    path = web.write_config(tmp_path / "tools.yaml", cache)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "deepresearcher.cli.main", "serve", "--mcp", "--transport", "stdio",
                                      "--config", str(path)],
        env={**os.environ, **web.env_vars},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} == {"web_search", "browse_webpage"}
        result = await session.call_tool("web_search", {"query": ["Hyport"]})
        assert not result.is_error
        (observed,) = orjson.loads(text_of(result))
        assert observed["search_query"] == "Hyport"
        assert observed["web_page_info_list"][0]["url"].startswith(web.site.base_url)
        bad = await session.call_tool("browse_webpage", {"url_list": ["https://example.org/"]})
        assert bad.is_error
    with sqlite3.connect(cache) as db:
        kinds = {kind for (kind,) in db.execute("SELECT kind FROM counters")}
    assert "search" in kinds


async def test_serve_mcp_prints_the_endpoint_and_answers_there(web, tmp_path):
    """``deepresearcher serve --mcp`` serves /v1/* and MCP in one process and says where MCP is."""
    path = web.write_config(tmp_path / "handler.yaml", tmp_path / "cache.sqlite")
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepresearcher.cli.main", "serve", "--mcp", "--config", str(path), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **web.env_vars},
    )
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        base = lines[0].rsplit("listening on ", 1)[1].strip()
        assert lines[1].strip() == f"MCP tools (streamable HTTP) at {base}{MCP_PATH}", lines
        wait_healthy(base)
        async with mcp_session(base) as session:
            result = await session.call_tool("web_search", {"query": ["Hyport"]})
        assert orjson.loads(text_of(result))[0]["search_query"] == "Hyport"
    finally:
        proc.terminate()
        proc.wait(30)


def test_stdio_needs_mcp():
    """``--transport stdio`` alone is a usage error, not a handler on the wrong transport."""
    from typer.testing import CliRunner

    from deepresearcher.cli.main import app

    result = CliRunner().invoke(app, ["serve", "--transport", "stdio"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "stdio serves the MCP tools alone: add --mcp." in result.output
